// SPDX-License-Identifier: Apache-2.0
// isola web console: templates, snapshots and operations pages (docs/console.md), over the public /v1 API.
// Uses app.js's helpers (window.isola); every API value reaches the DOM as text, never parsed as HTML.
'use strict';
(() => {
	const $ = (id) => document.getElementById(id);
	const { api, attempt, dropZone, el, human, showError } = window.isola;
	const who = () => window.isola.who() || {};
	const isAdmin = () => who().role === 'admin';
	const isOperator = () => isAdmin() && who().tenant === 'default';
	const AUDIT_PAGE = 50;
	const au = { records: [], page: 0 }; // the audit trail as exported (newest first) and the page shown

	const when = (t) => (t ? new Date((typeof t === 'number' ? t * 1000 : t)).toLocaleString() : '—');
	const button = (text, action, onclick, cls) => el('button', { type: 'button', text, 'data-action': action, class: cls || '', onclick });

	/* --- pages ------------------------------------------------------------------------------- */

	function showPage(name) {
		if (name === 'ops' && !isAdmin()) name = 'sandboxes';
		$('app').dataset.page = name;
		sessionStorage.setItem('isola.page', name);
		for (const b of document.querySelectorAll('#pages button')) b.classList.toggle('active', b.dataset.page === name);
		for (const s of document.querySelectorAll('section.page')) s.hidden = s.id !== `page-${name}`;
		if (name === 'templates') loadTemplates();
		if (name === 'snapshots') loadSnapshots();
		if (name === 'ops') loadOps();
	}

	function onSignIn() {
		for (const e of document.querySelectorAll('.needs-admin')) e.hidden = !isAdmin();
		for (const e of document.querySelectorAll('.needs-operator')) e.hidden = !isOperator();
		showPage(sessionStorage.getItem('isola.page') || 'sandboxes');
	}

	function onSignOut() {
		for (const id of ['templates', 'snapshots', 'tenants', 'tokens', 'audit']) $(id).tBodies[0].replaceChildren();
		for (const id of ['op-host', 'op-compliance', 'tp-progress', 'tb-steps', 'tb-context']) $(id).replaceChildren();
		for (const id of ['tb-log', 'tb-step', 'tb-result']) $(id).textContent = '';
		$('tb-progress').hidden = true;
		bd.files.clear();
		$('tk-secret').textContent = '';
		if ($('tk-dialog').open) $('tk-dialog').close();
		au.records = [];
		$('app').dataset.page = 'sandboxes';
	}

	/* --- templates --------------------------------------------------------------------------- */

	// SOURCE as `isola template ls` shows it.
	function sourceText(t) {
		if (t.source === 'pull' && t.origin) return `pull ${t.origin}`;
		if (['oci', 'docker-archive', 'rootfs'].includes(t.source)) return `import (${t.source})`;
		return t.source || '—';
	}

	async function loadTemplates() {
		const r = await attempt(() => api('GET', '/v1/templates'));
		if (!r) return;
		const frag = document.createDocumentFragment();
		for (const t of r.templates || []) {
			let size = human(t.size_bytes ?? t.size);
			if (t.image_size_bytes) size += ` (vm ${human(t.image_size_bytes)})`;
			const actions = el('td', { class: 'actions' }, button('Inspect', 'inspect', () => inspectTemplate(t.name)));
			if (window.isola.canWrite() && t.name !== 'host') actions.append(confirmButton('Delete', () => deleteTemplate(t.name)));
			frag.append(el('tr', { 'data-name': t.name }, el('td', { text: t.name }), el('td', { text: size }),
				el('td', { text: String(t.layers ?? 0) }), el('td', { text: sourceText(t) }),
				el('td', { text: when(t.created_at) }), actions));
		}
		$('templates').tBodies[0].replaceChildren(frag);
		$('tp-count').textContent = `(${(r.templates || []).length})`;
	}

	async function inspectTemplate(name) {
		const t = await attempt(() => api('GET', `/v1/templates/${encodeURIComponent(name)}`));
		if (t) $('tp-inspect').textContent = JSON.stringify(t, null, 2);
	}

	async function deleteTemplate(name) {
		await attempt(() => api('DELETE', `/v1/templates/${encodeURIComponent(name)}`));
		loadTemplates();
	}

	// A destructive action asks twice (a second click within 4 s), like the sandbox table's Destroy.
	function confirmButton(text, fn) {
		const b = button(text, text.toLowerCase(), null, 'danger');
		b.addEventListener('click', () => {
			if (b.dataset.armed) return fn();
			b.dataset.armed = '1';
			b.textContent = `Confirm ${text.toLowerCase()}`;
			setTimeout(() => {
				delete b.dataset.armed;
				b.textContent = text;
			}, 4000);
		});
		return b;
	}

	// One progress line per phase (a pull's layers each have theirs): a <progress> and its numbers.
	function progressView() {
		const box = $('tp-progress');
		box.replaceChildren();
		const phases = new Map();
		return (phase, done, total) => {
			let p = phases.get(phase);
			if (!p) {
				p = { bar: el('progress', { max: '1', value: '0' }), text: el('span', { class: 'muted' }) };
				phases.set(phase, p);
				box.append(el('div', { class: 'progress', 'data-phase': phase }, el('span', { text: phase + ' ' }), p.bar, ' ', p.text));
			}
			if (total > 0) {
				p.bar.max = total;
				p.bar.value = Math.min(done, total);
			} else p.bar.removeAttribute('value');
			p.text.textContent = total > 0 ? `${human(done) === '—' ? '0 B' : human(done)} of ${human(total)}` : human(done);
		};
	}

	// Reads an NDJSON body of import events (progress, done, error); returns the last event.
	async function readImportEvents(text, show) {
		let last = null;
		for (const line of text.split('\n')) {
			if (!line.trim()) continue;
			const ev = JSON.parse(line);
			if (ev.type === 'progress') show(ev.phase || 'progress', ev.done || 0, ev.total || 0);
			last = ev;
		}
		return last;
	}

	function importResult(last) {
		if (last && last.type === 'done') {
			showError('');
			$('tp-progress').append(el('p', { class: 'ok', text: `template ${last.template?.name ?? ''} ready` }));
		} else showError(last ? `${last.code || 'error'}: ${last.message || 'failed'}` : 'no answer');
		loadTemplates();
	}

	// Import: XMLHttpRequest, because fetch() cannot report upload progress; the server's
	// progress events (unpacking) follow as NDJSON, read as they arrive.
	function importTarball(ev) {
		ev.preventDefault();
		const file = $('tp-import-file').files[0];
		const name = $('tp-import-name').value.trim();
		if (!file || !name) return;
		const show = progressView();
		const xhr = new XMLHttpRequest();
		xhr.open('POST', `/v1/templates?name=${encodeURIComponent(name)}`);
		xhr.setRequestHeader('Authorization', 'Bearer ' + sessionStorage.getItem('isola.token'));
		xhr.setRequestHeader('Content-Type', 'application/x-tar');
		xhr.upload.onprogress = (e) => show('upload', e.loaded, e.lengthComputable ? e.total : file.size);
		// Only complete lines: the last one may still be arriving.
		xhr.onprogress = () => readImportEvents(xhr.responseText.slice(0, xhr.responseText.lastIndexOf('\n') + 1), show);
		xhr.onload = async () => {
			if (xhr.status >= 400) {
				let e = {};
				try {
					e = JSON.parse(xhr.responseText);
				} catch (_) { /* not JSON */ }
				showError(`${e.code || xhr.status}: ${e.message || xhr.statusText}`);
				return;
			}
			importResult(await readImportEvents(xhr.responseText, show));
		};
		xhr.onerror = () => showError('import: the connection failed');
		xhr.send(file);
	}

	async function pullTemplate(ev) {
		ev.preventDefault();
		const body = { ref: $('tp-pull-ref').value.trim() };
		const name = $('tp-pull-name').value.trim();
		if (name) body.name = name;
		const show = progressView();
		const r = await attempt(() => api('POST', '/v1/templates/pull', { json: body, raw: true }));
		if (!r) return;
		// Per-layer progress as it streams.
		const reader = r.body.getReader();
		const dec = new TextDecoder();
		let buf = '', last = null;
		for (;;) {
			const { value, done } = await reader.read();
			if (done) break;
			buf += dec.decode(value, { stream: true });
			const cut = buf.lastIndexOf('\n');
			if (cut < 0) continue;
			last = (await readImportEvents(buf.slice(0, cut), show)) || last;
			buf = buf.slice(cut + 1);
		}
		importResult((await readImportEvents(buf, show)) || last);
	}

	/* --- template build (POST /v1/templates/build) ------------------------------------------- */

	const bd = { files: new Map() }; // context path -> File (the picker's and the drop zone's)
	const LOG_MAX = 256 << 10; // characters of RUN output kept in the pane

	// A context path as the tar will hold it: relative, '/'-separated, no '.' or '..' parts.
	function ctxPath(p) {
		const parts = String(p).split('/').filter((x) => x && x !== '.');
		if (!parts.length || parts.includes('..')) throw new Error(`context file "${p}": not a relative path`);
		return parts.join('/');
	}

	function addContext(path, file) {
		bd.files.set(ctxPath(path), file);
		showContext();
	}

	function showContext() {
		const frag = document.createDocumentFragment();
		for (const [p, f] of [...bd.files].sort(([a], [b]) => (a < b ? -1 : 1)))
			frag.append(el('li', { 'data-path': p, text: `${p} (${human(f.size) === '—' ? '0 B' : human(f.size)})` }));
		$('tb-context').replaceChildren(frag);
	}

	// A drop: folders are walked (webkitGetAsEntry) so their paths are kept; plain files otherwise.
	async function dropContext(dt) {
		const entries = [...(dt.items || [])].map((i) => (i.kind === 'file' && i.webkitGetAsEntry ? i.webkitGetAsEntry() : null));
		if (entries.length && entries.every(Boolean)) {
			const walk = async (entry, prefix) => {
				if (entry.isFile) {
					const f = await new Promise((res, rej) => entry.file(res, rej));
					addContext(prefix + entry.name, f);
				} else if (entry.isDirectory) {
					const reader = entry.createReader();
					for (;;) { // readEntries answers in batches until an empty one
						const batch = await new Promise((res, rej) => reader.readEntries(res, rej));
						if (!batch.length) break;
						for (const e of batch) await walk(e, `${prefix}${entry.name}/`);
					}
				}
			};
			for (const e of entries) await walk(e, '');
			return;
		}
		for (const f of dt.files || []) addContext(f.webkitRelativePath || f.name, f);
	}

	// A ustar archive of files: Map(path -> Blob) (directories implied by paths get entries).
	// Names longer than 100 bytes are split into prefix/name; a path that cannot be is refused.
	function ustar(files) {
		const enc = new TextEncoder();
		const now = Math.floor(Date.now() / 1000);
		const parts = [];
		const header = (path, size, type, mode) => {
			const h = new Uint8Array(512);
			let name = enc.encode(path), prefix = new Uint8Array(0);
			if (name.length > 100) { // split at a '/' into prefix (≤ 155 bytes) and name (≤ 100)
				let ok = false;
				for (let i = path.lastIndexOf('/'); i > 0 && !ok; i = path.lastIndexOf('/', i - 1)) {
					prefix = enc.encode(path.slice(0, i));
					name = enc.encode(path.slice(i + 1));
					ok = prefix.length <= 155 && name.length <= 100 && name.length > 0;
				}
				if (!ok) throw new Error(`context file "${path}": the path is too long for a tar header`);
			}
			const put = (off, len, bytes) => h.set(bytes.subarray(0, len), off);
			const oct = (off, len, v) => put(off, len, enc.encode(v.toString(8).padStart(len - 1, '0') + '\0'));
			put(0, 100, name);
			oct(100, 8, mode);
			oct(108, 8, 0);
			oct(116, 8, 0);
			oct(124, 12, size);
			oct(136, 12, now);
			h.fill(0x20, 148, 156); // checksum computed with its own field as spaces
			h[156] = type.charCodeAt(0);
			put(257, 6, enc.encode('ustar\0'));
			put(263, 2, enc.encode('00'));
			put(345, 155, prefix);
			let sum = 0;
			for (const b of h) sum += b;
			put(148, 8, enc.encode(sum.toString(8).padStart(6, '0') + '\0 '));
			return h;
		};
		const dirs = new Set();
		for (const path of [...files.keys()].sort()) {
			const segs = path.split('/');
			for (let k = 1; k < segs.length; k++) {
				const d = segs.slice(0, k).join('/') + '/';
				if (!dirs.has(d)) {
					dirs.add(d);
					parts.push(header(d, 0, '5', 0o755));
				}
			}
			const f = files.get(path);
			if (f.size >= 8 * 2 ** 30) throw new Error(`context file "${path}": 8 GiB or more does not fit a ustar header`);
			parts.push(header(path, f.size, '0', 0o644), f);
			if (f.size % 512) parts.push(new Uint8Array(512 - (f.size % 512)));
		}
		parts.push(new Uint8Array(1024));
		return new Blob(parts, { type: 'application/x-tar' });
	}

	// The form's options: build args (K=V lines), allow rules (comma or line separated).
	function buildOptions() {
		const args = {};
		const lines = $('tb-args').value.split('\n');
		for (let n = 0; n < lines.length; n++) {
			const l = lines[n].trim();
			if (!l) continue;
			const eq = l.indexOf('=');
			if (eq <= 0) throw new Error(`build args, line ${n + 1}: "${l}" is not K=V`);
			args[l.slice(0, eq).trim()] = l.slice(eq + 1);
		}
		const allow = $('tb-allow').value.split(/[,\n]/).map((x) => x.trim()).filter(Boolean);
		return { build_args: args, allow };
	}

	// The build's view: the current step, one line per step (cached or its time), the RUN
	// output as text in the log pane, and the end (done, or the failing step with its exit code).
	function buildView() {
		$('tb-progress').hidden = false;
		$('tb-step').textContent = 'uploading the context…';
		$('tb-steps').replaceChildren();
		$('tb-log').textContent = '';
		$('tb-result').textContent = '';
		$('tb-result').className = '';
		delete $('tb-result').dataset.exitCode;
		const steps = new Map(); // step -> {li, st, instruction}
		const failed = { step: 0, code: null };
		let total = 0;
		let pending = ''; // output not yet in the pane (flushed once a frame)
		let flushing = false;
		const flush = () => {
			flushing = false;
			if (!pending) return;
			const pane = $('tb-log');
			pane.append(pending); // a text node: output is never markup
			pending = '';
			if (pane.textContent.length > LOG_MAX) pane.textContent = pane.textContent.slice(-LOG_MAX);
			pane.scrollTop = pane.scrollHeight;
		};
		const log = (text) => {
			pending += text;
			if (!flushing) {
				flushing = true;
				requestAnimationFrame(flush);
			}
		};
		const stepText = (n) => `Step ${n}/${total}: ${steps.get(n)?.instruction ?? ''}`;
		// A step with no layer (ENV, WORKDIR, ...) is done when the next one starts.
		const settle = () => {
			for (const s of steps.values()) if (s.st.textContent === 'running') s.st.textContent = 'done';
		};
		return (ev) => {
			if (ev.type === 'step') {
				settle();
				total = ev.total;
				const st = el('span', { class: 'st', text: 'running' });
				const li = el('li', { 'data-step': String(ev.step) }, el('span', { text: `${ev.step}/${ev.total} ${ev.instruction}` }), st);
				steps.set(ev.step, { li, st, instruction: ev.instruction });
				$('tb-steps').append(li);
				$('tb-step').textContent = stepText(ev.step);
				log(`Step ${ev.step}/${ev.total}: ${ev.instruction}\n`);
			} else if (ev.type === 'output') {
				log(`${ev.line}\n`);
			} else if (ev.type === 'layer') {
				const s = steps.get(ev.step);
				if (s) {
					s.li.dataset.cached = String(!!ev.cached);
					s.st.textContent = ev.cached ? 'cached' : `${(ev.ms / 1000).toFixed(1)} s`;
				}
			} else if (ev.type === 'run_failed') {
				failed.step = ev.step;
				failed.code = ev.exit_code;
				const s = steps.get(ev.step);
				if (s) {
					s.li.classList.add('failed');
					s.st.textContent = `failed, exit code ${ev.exit_code}`;
				}
			} else if (ev.type === 'done') {
				flush();
				settle();
				$('tb-step').textContent = `built in ${total} step${total === 1 ? '' : 's'}`;
				$('tb-result').className = 'ok';
				$('tb-result').textContent = `template ${ev.template?.name ?? ''} built`;
				loadTemplates();
			} else if (ev.type === 'error') {
				flush();
				const where = failed.step ? `${stepText(failed.step)} failed with exit code ${failed.code}` : `${ev.code || 'error'}`;
				$('tb-step').textContent = failed.step ? stepText(failed.step) : $('tb-step').textContent;
				$('tb-result').className = 'bad';
				$('tb-result').dataset.exitCode = failed.code === null ? '' : String(failed.code);
				$('tb-result').textContent = `build failed: ${where}\n${ev.message || ''}`;
			}
		};
	}

	async function buildTemplate(ev) {
		ev.preventDefault();
		const name = $('tb-name').value.trim();
		const dockerfile = $('tb-dockerfile').value;
		let opts, tar;
		try {
			if (!/^[A-Za-z0-9_][A-Za-z0-9._-]{0,62}$/.test(name)) throw new Error(`template name "${name}": 1-63 of A-Z a-z 0-9 . _ - not starting with . or -`);
			opts = buildOptions();
			const files = new Map(bd.files);
			if (dockerfile.trim()) {
				// The text is the Dockerfile: as `Dockerfile`, or beside a context file of that name.
				const as = files.has('Dockerfile') ? '.isola-dockerfile' : 'Dockerfile';
				files.set(as, new Blob([dockerfile]));
				opts.dockerfile = as;
			} else if (!files.has('Dockerfile')) throw new Error('Dockerfile: write one, or add a context file named Dockerfile');
			tar = ustar(files);
		} catch (e) {
			showError(e.message);
			return;
		}
		showError('');
		$('tb-submit').disabled = true;
		const show = buildView();
		try {
			const r = await api('POST', `/v1/templates/build?name=${encodeURIComponent(name)}&options=${encodeURIComponent(JSON.stringify(opts))}`,
				{ body: tar, raw: true });
			$('tb-step').textContent = 'building…';
			let last = null;
			await readNdjson(r, (e) => {
				last = e;
				show(e);
			});
			if (!last || (last.type !== 'done' && last.type !== 'error')) show({ type: 'error', code: 'error', message: 'the build stream ended without a result' });
		} catch (e) {
			show({ type: 'error', code: e.code || 'error', message: e.message });
		} finally {
			$('tb-submit').disabled = false;
		}
	}

	// Reads an NDJSON response as it streams: fn(event) per complete line.
	async function readNdjson(r, fn) {
		const reader = r.body.getReader();
		const dec = new TextDecoder();
		let buf = '';
		for (;;) {
			const { value, done } = await reader.read();
			buf += dec.decode(value || new Uint8Array(0), { stream: !done });
			let i;
			while ((i = buf.indexOf('\n')) >= 0) {
				const line = buf.slice(0, i);
				buf = buf.slice(i + 1);
				if (line.trim()) fn(JSON.parse(line));
			}
			if (done) break;
		}
		if (buf.trim()) fn(JSON.parse(buf));
	}

	/* --- snapshots --------------------------------------------------------------------------- */

	async function loadSnapshots() {
		const r = await attempt(() => api('GET', '/v1/snapshots'));
		if (!r) return;
		const frag = document.createDocumentFragment();
		for (const s of r.snapshots || []) {
			const key = s.name || s.id;
			const actions = el('td', { class: 'actions' });
			if (window.isola.canWrite()) actions.append(confirmButton('Delete', async () => {
				await attempt(() => api('DELETE', `/v1/snapshots/${encodeURIComponent(key)}`));
				loadSnapshots();
			}));
			frag.append(el('tr', { 'data-name': key }, el('td', { text: s.name || '' }), el('td', { text: s.id || '' }),
				el('td', { text: human(s.size_bytes ?? s.size) }), el('td', { text: when(s.created_at) }),
				el('td', { text: s.source || '' }), actions));
		}
		$('snapshots').tBodies[0].replaceChildren(frag);
		$('sn-count').textContent = `(${(r.snapshots || []).length})`;
	}

	/* --- operations -------------------------------------------------------------------------- */

	// The audit export goes first and /v1/compliance is asked once for two views: with the
	// /v1/events stream holding one of the browser's six connections to isolad, the page
	// used to start eight requests at once, and the two queued last (export, compliance)
	// were the two seen failing with "Failed to fetch" (ops.test.mjs, under load).
	function loadOps() {
		const comp = isOperator() ? attempt(() => api('GET', '/v1/compliance')) : Promise.resolve(null);
		if (isOperator()) {
			loadAudit();
			loadCompliance(comp);
		}
		loadHost(comp);
		loadTenants();
		loadTokens();
	}

	function kv(dl, key, value) {
		dl.append(el('dt', { text: key }), value instanceof Node ? el('dd', {}, value) : el('dd', { text: String(value) }));
	}

	// Host capacity as the role may see it: the operator gets the admission figures (compliance)
	// and the doctor's checks with the host paths; a tenant admin the doctor's checks only.
	async function loadHost(compliance) {
		const dl = $('op-host');
		const [doc, comp] = await Promise.all([attempt(() => api('GET', '/v1/doctor')), compliance]);
		dl.replaceChildren();
		const a = comp && comp.admission;
		if (a) {
			kv(dl, 'cores', `${a.cpus} (capacity ${a.cpu_capacity} CPUs at overcommit ${a.cpu_overcommit}, ${a.cpu_committed} committed)`);
			kv(dl, 'memory', `${human(a.memory_total)} (capacity ${human(a.memory_capacity)}, ${human(a.memory_committed)} committed)`);
		}
		if (!doc) return;
		if (doc.tier) kv(dl, 'default tier', doc.tier);
		for (const [k, v] of Object.entries(doc)) {
			if (!v || typeof v !== 'object') continue;
			const ok = v.ok ?? v.present;
			kv(dl, k, `${ok === undefined ? '' : ok ? 'ok' : 'no'}${v.detail ? ': ' + v.detail : ''}`);
		}
		if (doc.state_dir) kv(dl, 'state dir', doc.state_dir);
	}

	const quota = (used, max, fmt = String) => `${fmt(used)} / ${max ? fmt(max) : 'unlimited'}`;

	async function loadTenants() {
		const r = isOperator() ? await attempt(() => api('GET', '/v1/tenants'))
			: await attempt(() => api('GET', `/v1/tenants/${encodeURIComponent(who().tenant)}`)).then((t) => t && { tenants: [t] });
		if (!r) return;
		const frag = document.createDocumentFragment();
		for (const t of r.tenants || []) {
			const q = t.quota || {}, u = t.usage || {};
			frag.append(el('tr', { 'data-name': t.name }, el('td', { text: t.name }),
				el('td', { text: quota(u.sandboxes || 0, q.max_sandboxes) }), el('td', { text: quota(u.cpu || 0, q.max_cpu) }),
				el('td', { text: quota(u.memory || 0, q.max_memory, human) }), el('td', { text: quota(u.disk || 0, q.max_disk, human) }),
				el('td', { text: q.create_rate ? `${q.create_rate}/s (burst ${q.create_burst})` : 'unlimited' })));
		}
		$('tenants').tBodies[0].replaceChildren(frag);
	}

	async function loadTokens() {
		const r = await attempt(() => api('GET', '/v1/tokens'));
		if (!r) return;
		const frag = document.createDocumentFragment();
		for (const t of r.tokens || []) {
			const actions = el('td', { class: 'actions' });
			if (t.active) actions.append(confirmButton('Revoke', async () => {
				await attempt(() => api('DELETE', `/v1/tokens/${encodeURIComponent(t.id)}`));
				loadTokens();
			}));
			frag.append(el('tr', { 'data-id': t.id }, el('td', { class: 'id', text: t.id }), el('td', { class: 'name', text: t.name || '' }),
				el('td', { text: t.tenant }), el('td', { text: t.role }), el('td', { text: when(t.created_at) }),
				el('td', { text: when(t.last_used) }), el('td', { class: 'status', text: t.active ? 'active' : `revoked ${when(t.revoked_at)}` }),
				actions));
		}
		$('tokens').tBodies[0].replaceChildren(frag);
	}

	// Creates a token; its secret is shown once in a dialog and dropped from the page when it closes.
	async function createToken(ev) {
		ev.preventDefault();
		const body = { name: $('tk-name').value.trim(), role: $('tk-role').value,
			tenant: (isOperator() && $('tk-tenant').value.trim()) || who().tenant };
		const t = await attempt(() => api('POST', '/v1/tokens', { json: body }));
		if (!t) return;
		$('tk-name').value = '';
		$('tk-dialog-name').textContent = `${t.name} (${t.role} of ${t.tenant})`;
		$('tk-secret').textContent = t.token;
		$('tk-dialog').showModal();
		loadTokens();
	}

	function closeSecret() {
		$('tk-secret').textContent = '';
		$('tk-dialog-name').textContent = '';
		$('tk-dialog').close();
	}

	// The audit trail (GET /v1/audit/export, NDJSON), searched and paged in the page.
	async function loadAudit() {
		showVerify(attempt(() => api('GET', '/v1/audit/verify')));
		const text = await attempt(() => api('GET', '/v1/audit/export', { raw: true }).then((r) => r.text())); // NDJSON
		if (typeof text !== 'string') return;
		au.records = text.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l)).reverse();
		au.page = 0;
		renderAudit();
	}

	async function showVerify(answer) {
		const v = await answer;
		if (v) {
			$('au-verify').textContent = v.ok ? `chain verified: ${v.records} records, ${v.segments} segments, ${v.sealed} sealed`
				: `CHAIN BROKEN: ${(v.problems || []).map((p) => (typeof p === 'string' ? p : JSON.stringify(p))).join('; ')}`;
			$('au-verify').className = v.ok ? 'ok' : 'bad';
		}
	}

	function renderAudit() {
		const words = $('au-search').value.trim().toLowerCase().split(/\s+/).filter(Boolean);
		const hits = au.records.filter((x) => {
			const hay = [x.who, x.tenant, x.action, x.target, x.outcome].join(' ').toLowerCase();
			return words.every((w) => hay.includes(w));
		});
		const pages = Math.max(1, Math.ceil(hits.length / AUDIT_PAGE));
		au.page = Math.min(au.page, pages - 1);
		const frag = document.createDocumentFragment();
		for (const x of hits.slice(au.page * AUDIT_PAGE, (au.page + 1) * AUDIT_PAGE))
			frag.append(el('tr', {}, el('td', { text: String(x.seq) }), el('td', { text: x.time }), el('td', { class: 'who', text: x.who }),
				el('td', { text: x.tenant }), el('td', { class: 'action', text: x.action }), el('td', { class: 'target', text: x.target }),
				el('td', { text: x.outcome })));
		$('audit').tBodies[0].replaceChildren(frag);
		$('au-page').textContent = `page ${au.page + 1} of ${pages} (${hits.length} records)`;
		$('au-prev').disabled = au.page === 0;
		$('au-next').disabled = au.page >= pages - 1;
	}

	// `isola compliance report` as nested definition lists.
	function tree(v) {
		if (v === null || typeof v !== 'object') return document.createTextNode(v === null ? '—' : String(v));
		if (Array.isArray(v) && v.every((x) => x === null || typeof x !== 'object')) return document.createTextNode(v.join(', ') || '—');
		const dl = el('dl', { class: 'kv' });
		for (const [k, x] of Object.entries(v)) kv(dl, Array.isArray(v) ? `#${Number(k) + 1}` : k, tree(x));
		return dl;
	}

	async function loadCompliance(compliance) {
		const r = await compliance;
		if (r) $('op-compliance').replaceChildren(tree(r));
	}

	/* --- wiring ------------------------------------------------------------------------------ */

	document.addEventListener('isola:signin', onSignIn);
	document.addEventListener('isola:signout', onSignOut);
	document.addEventListener('DOMContentLoaded', () => {
		for (const b of document.querySelectorAll('#pages button')) b.addEventListener('click', () => showPage(b.dataset.page));
		$('tp-refresh').addEventListener('click', loadTemplates);
		$('tp-import').addEventListener('submit', importTarball);
		$('tp-pull').addEventListener('submit', pullTemplate);
		$('tp-build').addEventListener('submit', buildTemplate);
		$('tb-files').addEventListener('change', (e) => {
			try {
				for (const f of e.target.files) addContext(f.webkitRelativePath || f.name, f);
			} catch (err) {
				showError(err.message);
			}
			e.target.value = '';
		});
		$('tb-clear').addEventListener('click', () => {
			bd.files.clear();
			showContext();
		});
		dropZone($('tb-drop'), (dt) => dropContext(dt).catch((err) => showError(err.message)));
		$('sn-refresh').addEventListener('click', loadSnapshots);
		$('op-refresh').addEventListener('click', loadOps);
		$('tk-create').addEventListener('submit', createToken);
		$('tk-dialog-close').addEventListener('click', closeSecret);
		$('tk-dialog').addEventListener('close', () => {
			$('tk-secret').textContent = '';
		});
		$('au-search').addEventListener('input', () => {
			au.page = 0;
			renderAudit();
		});
		$('au-prev').addEventListener('click', () => {
			au.page--;
			renderAudit();
		});
		$('au-next').addEventListener('click', () => {
			au.page++;
			renderAudit();
		});
	});
})();
