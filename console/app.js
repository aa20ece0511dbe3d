// SPDX-License-Identifier: Apache-2.0
// isola web console: a client of the public /v1 API with the user's token (docs/console.md).
// Every value from the API reaches the DOM through textContent or attribute setters, never parsed as HTML.
'use strict';
(() => {
	const $ = (id) => document.getElementById(id);
	const TOKEN_KEY = 'isola.token';
	const st = {
		token: null, // the bearer token (memory; sessionStorage so a reload keeps the tab signed in)
		who: null, // GET /v1/whoami
		rows: new Map(), // sandbox id -> {sb, tr}
		selected: null, // sandbox id in the detail view
		events: null, // AbortController of the /v1/events stream
		term: null, // xterm Terminal
		fit: null, // FitAddon
		ws: null, // the PTY WebSocket
		opening: false, // openTerminal() is running
		cwd: '/', // file browser directory
		listSeq: 0, // listDir() calls made (a slower, older answer is dropped)
	};
	const canWrite = () => st.who && st.who.role !== 'read-only';
	// The one-sandbox views, usage columns and notebook (sandbox-views.js, loaded after this file).
	const views = () => window.isolaViews || null;

	// Builds an element; children are nodes or strings (always text, never markup).
	function el(tag, props, ...children) {
		const e = document.createElement(tag);
		for (const [k, v] of Object.entries(props || {})) {
			if (k === 'text') e.textContent = v;
			else if (k === 'class') e.className = v;
			else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
			else e.setAttribute(k, v);
		}
		for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
		return e;
	}

	function showError(msg) {
		const p = $('error');
		p.textContent = msg || '';
		p.hidden = !msg;
	}

	class ApiError extends Error {
		constructor(status, code, message) {
			super(`${code}: ${message}`);
			this.status = status;
			this.code = code;
		}
	}

	// One /v1 request with the token. json: a body to send as JSON; raw: return the Response.
	async function api(method, path, opts = {}) {
		const headers = { Authorization: 'Bearer ' + st.token };
		let body = opts.body;
		if (opts.json !== undefined) {
			headers['Content-Type'] = 'application/json';
			body = JSON.stringify(opts.json);
		}
		const send = () => fetch(path, { method, headers, body, cache: 'no-store', signal: opts.signal });
		let r;
		try {
			r = await send();
		} catch (e) {
			// A read that failed before any answer ("Failed to fetch": the connection was reset
			// or closed) is asked once more; a write is not (it may have been done).
			if (e.name === 'AbortError' || (method !== 'GET' && method !== 'HEAD')) throw e;
			await new Promise((res) => setTimeout(res, 250));
			r = await send();
		}
		if (!r.ok) {
			let code = String(r.status), message = r.statusText;
			try {
				const e = await r.json();
				code = e.code || code;
				message = e.message || message;
			} catch (_) { /* not JSON */ }
			if (r.status === 401 && st.token) signOut('The token was refused (wrong or revoked): signed out.');
			throw new ApiError(r.status, code, message);
		}
		if (opts.raw) return r;
		if (r.status === 204) return null;
		const ct = r.headers.get('content-type') || '';
		return ct.includes('json') ? r.json() : r.text();
	}
	const sbPath = (id, rest = '') => `/v1/sandboxes/${encodeURIComponent(id)}${rest}`;

	// Runs an action, showing its failure; returns its result or undefined.
	async function attempt(fn) {
		try {
			showError('');
			return await fn();
		} catch (e) {
			if (e.name !== 'AbortError') showError(e.message);
			return undefined;
		}
	}

	/* --- sign in -------------------------------------------------------------------------- */

	async function signIn(token) {
		st.token = token;
		try {
			st.who = await api('GET', '/v1/whoami');
		} catch (e) {
			st.token = null;
			sessionStorage.removeItem(TOKEN_KEY);
			showError(e.message);
			return;
		}
		performance.mark('isola-signed-in');
		sessionStorage.setItem(TOKEN_KEY, token);
		showError('');
		$('whoami').textContent = `${st.who.role} of tenant ${st.who.tenant} (${st.who.who})`;
		document.body.classList.toggle('read-only', !canWrite());
		for (const e of document.querySelectorAll('.needs-write')) e.hidden = !canWrite();
		$('signin').hidden = true;
		$('app').hidden = false;
		$('signout').hidden = false;
		startEvents();
		document.dispatchEvent(new CustomEvent('isola:signin')); // ops.js: templates, operations
		const last = sessionStorage.getItem('isola.open');
		if (last) openSandbox(last);
	}

	function signOut(why) {
		if (st.events) st.events.abort();
		st.events = null;
		closeTerminal();
		if (views()) views().leave();
		st.token = null;
		st.who = null;
		sessionStorage.clear();
		st.rows.clear();
		$('sandboxes').tBodies[0].replaceChildren();
		$('app').hidden = true;
		$('detail').hidden = true;
		$('signout').hidden = true;
		$('signin').hidden = false;
		$('whoami').textContent = '';
		showError(why || '');
		document.dispatchEvent(new CustomEvent('isola:signout'));
	}

	/* --- live sandbox table (GET /v1/events) ------------------------------------------------- */

	async function startEvents() {
		if (st.events) st.events.abort();
		const ctl = new AbortController();
		st.events = ctl;
		while (st.events === ctl) {
			try {
				const r = await api('GET', '/v1/events', { raw: true, signal: ctl.signal });
				$('live').textContent = 'live';
				await readEvents(r.body.getReader(), onEvent);
			} catch (e) {
				if (e.name === 'AbortError' || st.events !== ctl) return;
				if (e.status === 401) return;
			}
			$('live').textContent = 'reconnecting…';
			await new Promise((res) => setTimeout(res, 2000));
		}
	}

	// Parses a text/event-stream body: calls fn(type, data) per event.
	async function readEvents(reader, fn) {
		const dec = new TextDecoder();
		let buf = '';
		for (;;) {
			const { value, done } = await reader.read();
			if (done) return;
			buf += dec.decode(value, { stream: true });
			let i;
			while ((i = buf.indexOf('\n\n')) >= 0) {
				const block = buf.slice(0, i);
				buf = buf.slice(i + 2);
				let type = 'message', data = '';
				for (const line of block.split('\n')) {
					if (line.startsWith('event: ')) type = line.slice(7);
					else if (line.startsWith('data: ')) data += line.slice(6);
				}
				if (data) fn(type, JSON.parse(data));
			}
		}
	}

	function onEvent(type, ev) {
		if (type === 'snapshot') {
			performance.mark('isola-snapshot');
			st.rows.clear();
			const body = $('sandboxes').tBodies[0];
			const frag = document.createDocumentFragment();
			for (const sb of ev.sandboxes) frag.append(rowFor(sb));
			body.replaceChildren(frag);
			if (views()) views().startUsage();
			// When the filled table was first painted (the frame after it, ms since navigation):
			// what tests/console measures with 200 sandboxes.
			if (!window.isolaFirstPaint) requestAnimationFrame(() => setTimeout(() => {
				window.isolaFirstPaint = window.isolaFirstPaint || performance.now();
			}));
		} else if (type === 'created' || type === 'changed') {
			upsert(ev.sandbox);
		} else if (type === 'destroyed') {
			const row = st.rows.get(ev.id);
			if (row) row.tr.remove();
			st.rows.delete(ev.id);
			if (st.selected === ev.id) $('d-state').textContent = 'destroyed';
		}
		$('count').textContent = `(${st.rows.size})`;
		templateOptions();
		applyFilter();
	}

	function upsert(sb) {
		const old = st.rows.get(sb.id);
		const tr = rowFor(sb);
		if (old) old.tr.replaceWith(tr);
		else $('sandboxes').tBodies[0].append(tr);
		if (st.selected === sb.id) {
			setDetailState(sb.state);
			// A shell waits for its sandbox to run (created from the form a moment ago, resumed).
			if (sb.state === 'running' && !st.ws && !$('tab-terminal').hidden) openTerminal();
		}
	}

	function human(bytes) {
		if (!bytes) return '—';
		const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
		let i = 0;
		while (bytes >= 1024 && i < u.length - 1) {
			bytes /= 1024;
			i++;
		}
		return `${bytes.toFixed(i ? 1 : 0)} ${u[i]}`;
	}

	function age(createdAt) {
		const s = Math.max(0, Date.now() / 1000 - createdAt);
		if (s < 60) return `${Math.floor(s)}s`;
		if (s < 3600) return `${Math.floor(s / 60)}m`;
		if (s < 86400) return `${Math.floor(s / 3600)}h`;
		return `${Math.floor(s / 86400)}d`;
	}

	// Lifecycle actions a state allows (the API is the judge; this only hides the pointless).
	const ACTIONS = [
		['Pause', (s) => s === 'running', (id) => api('POST', sbPath(id, '/pause'))],
		['Resume', (s) => s === 'paused' || s === 'hibernated', (id) => api('POST', sbPath(id, '/resume'))],
		['Hibernate', (s) => s === 'running', (id) => api('POST', sbPath(id, '/hibernate'))],
		['Snapshot', (s) => s === 'running' || s === 'paused', (id) =>
			api('POST', '/v1/snapshots', { json: { sandbox: id, name: `${id}-${Date.now()}` } })],
		['Fork', (s) => s === 'running' || s === 'paused', (id) => api('POST', sbPath(id, '/fork'), { json: { count: 1 } })],
	];

	function rowFor(sb) {
		const labels = el('td', { class: 'labels' });
		for (const [k, v] of Object.entries(sb.labels || {})) labels.append(el('span', { class: 'label', text: `${k}=${v}` }));
		const actions = el('td', { class: 'actions' },
			el('button', { type: 'button', text: 'Open', onclick: () => openSandbox(sb.id) }));
		if (canWrite()) {
			for (const [name, ok, fn] of ACTIONS)
				if (ok(sb.state)) actions.append(el('button', { type: 'button', text: name, 'data-action': name.toLowerCase(),
					onclick: () => attempt(() => fn(sb.id)) }));
			actions.append(destroyButton(sb.id));
		}
		const usage = views() ? views().usageText(sb.id) : ['—', '—', '—'];
		const tr = el('tr', { 'data-id': sb.id },
			el('td', { class: 'id', text: sb.id }),
			el('td', { text: sb.name || '' }),
			el('td', { class: `state state-${sb.state}`, text: sb.state }),
			el('td', { text: sb.tier }),
			el('td', { text: sb.template }),
			labels,
			el('td', { class: 'age', 'data-created': String(sb.created_at), text: age(sb.created_at) }),
			el('td', { text: sb.cpu ? String(sb.cpu) : '—' }),
			el('td', { text: human(sb.memory) }),
			el('td', { class: 'usage u-cpu', text: usage[0] }),
			el('td', { class: 'usage u-mem', text: usage[1] }),
			el('td', { class: 'usage u-net', text: usage[2] }),
			actions);
		tr.dataset.search = [sb.id, sb.name, sb.state, sb.tier, sb.template,
			...Object.entries(sb.labels || {}).map(([k, v]) => `${k}=${v}`)].join(' ').toLowerCase();
		tr.dataset.state = sb.state;
		tr.dataset.template = sb.template || '';
		if (st.selected === sb.id) tr.classList.add('selected');
		st.rows.set(sb.id, { sb, tr });
		return tr;
	}

	// Destroy asks twice (a second click within 4 s) instead of a dialog.
	function destroyButton(id) {
		const b = el('button', { type: 'button', class: 'danger', text: 'Destroy', 'data-action': 'destroy' });
		b.addEventListener('click', () => {
			if (b.dataset.armed) {
				attempt(() => api('DELETE', sbPath(id)));
				return;
			}
			b.dataset.armed = '1';
			b.textContent = 'Confirm destroy';
			setTimeout(() => {
				delete b.dataset.armed;
				b.textContent = 'Destroy';
			}, 4000);
		});
		return b;
	}

	// Free text (every word in id, name, state, tier, template or a label), then exact state,
	// template and label (`key` has the label, `key=value` has it with that value).
	function applyFilter() {
		const q = $('filter').value.trim().toLowerCase();
		const state = $('filter-state').value, template = $('filter-template').value;
		const label = $('filter-label').value.trim();
		const eq = label.indexOf('=');
		const [lk, lv] = eq < 0 ? [label, null] : [label.slice(0, eq), label.slice(eq + 1)];
		for (const { sb, tr } of st.rows.values()) {
			const labels = sb.labels || {};
			tr.hidden = (q !== '' && !q.split(/\s+/).every((w) => tr.dataset.search.includes(w))) ||
				(state !== '' && sb.state !== state) || (template !== '' && sb.template !== template) ||
				(label !== '' && (!Object.hasOwn(labels, lk) || (lv !== null && labels[lk] !== lv)));
		}
	}

	// The template filter offers the templates of the listed sandboxes.
	function templateOptions() {
		const sel = $('filter-template');
		const have = new Set([...sel.options].slice(1).map((o) => o.value));
		const want = new Set([...st.rows.values()].map(({ sb }) => sb.template).filter(Boolean));
		if (want.size === have.size && [...want].every((t) => have.has(t))) return;
		const cur = sel.value;
		sel.replaceChildren(sel.options[0], ...[...want].sort().map((t) => el('option', { value: t, text: t })));
		sel.value = want.has(cur) ? cur : '';
	}

	setInterval(() => {
		for (const td of document.querySelectorAll('td.age')) td.textContent = age(Number(td.dataset.created));
	}, 10000);

	// A size as the API parses it (util_parse_size): digits, then K/M/G/T, an optional i and B.
	const SIZE_RE = /^\d+([kKmMgGtT][iI]?[bB]?)?$/;

	async function createFromForm(ev) {
		ev.preventDefault();
		const body = { template: $('c-template').value.trim() || 'host', tier: $('c-tier').value };
		// Limits, checked here with the API's own rules so a typo is named before a request.
		const cpu = $('c-cpu').value.trim();
		if (cpu) {
			const n = Number(cpu);
			if (!/^(\d+\.?\d*|\.\d+)$/.test(cpu) || !(n >= 0.001 && n <= 1024))
				return showError(`CPU "${cpu}": a number of CPUs from 0.001 to 1024, like 0.5 or 2`);
			body.cpu = n;
		}
		for (const [field, id] of [['memory', 'c-memory'], ['disk', 'c-disk']]) {
			const v = $(id).value.trim();
			if (!v) continue;
			if (!SIZE_RE.test(v))
				return showError(`${field[0].toUpperCase() + field.slice(1)} "${v}": a byte count or a size like 512M, 1G or 2GiB (K, M, G, T)`);
			body[field] = /^\d+$/.test(v) ? Number(v) : v;
		}
		const name = $('c-name').value.trim();
		if (name) body.name = name;
		const allow = $('c-allow').value.split(',').map((s) => s.trim()).filter(Boolean);
		if (allow.length) body.network = { default: 'deny', allow };
		$('c-submit').disabled = true;
		const sb = await attempt(() => api('POST', '/v1/sandboxes', { json: body }));
		$('c-submit').disabled = false;
		if (sb && sb.id) upsert(sb);
	}

	/* --- one sandbox ------------------------------------------------------------------------- */

	function setDetailState(state) {
		$('d-state').textContent = state;
		$('d-state').className = `state state-${state}`;
	}

	// The sandbox's limits as the API reports them (0 or absent: no limit of its own).
	function limitsText(sb) {
		const lim = (v, fmt) => (v ? fmt(v) : 'unlimited');
		return `limits: CPU ${lim(sb.cpu, String)}, memory ${lim(sb.memory, human)}, disk ${lim(sb.disk, human)}, pids ${lim(sb.pids, String)}`;
	}

	async function openSandbox(id) {
		const sb = await attempt(() => api('GET', sbPath(id)));
		if (!sb) {
			sessionStorage.removeItem('isola.open');
			return;
		}
		closeTerminal();
		if (views()) views().leave();
		st.selected = sb.id;
		sessionStorage.setItem('isola.open', sb.id);
		for (const { tr } of st.rows.values()) tr.classList.toggle('selected', tr.dataset.id === sb.id);
		$('d-id').textContent = sb.id;
		setDetailState(sb.state);
		$('d-limits').textContent = limitsText(sb);
		$('detail').hidden = false;
		st.cwd = '/';
		showTab(sessionStorage.getItem('isola.tab') || (canWrite() ? 'terminal' : 'files'));
	}

	function closeSandbox() {
		closeTerminal();
		if (views()) views().leave();
		st.selected = null;
		sessionStorage.removeItem('isola.open');
		$('detail').hidden = true;
		for (const { tr } of st.rows.values()) tr.classList.remove('selected');
	}

	function showTab(name) {
		if ((name === 'terminal' || name === 'notebook') && !canWrite()) name = 'files';
		sessionStorage.setItem('isola.tab', name);
		for (const b of document.querySelectorAll('.tabs button')) b.classList.toggle('active', b.dataset.tab === name);
		for (const t of document.querySelectorAll('.tab')) t.hidden = t.id !== `tab-${name}`;
		if (name === 'terminal') openTerminal();
		else closeTerminal();
		if (views()) views().leave();
		if (name === 'files') listDir(st.cwd);
		if (name === 'processes') listProcs();
		if (views()) views().show(name, st.selected);
	}

	/* --- terminal: xterm.js over /v1/sandboxes/{id}/processes/{pid}/ws ------------------------- */

	// xterm.js writes its theme and cell dimensions into <style> elements, which the CSP
	// (style-src 'self', no 'unsafe-inline') refuses to apply. Their text is xterm's own, built
	// from its options, never from terminal output; it is mirrored into a constructable style
	// sheet, which CSP allows. Only <style> elements inside #terminal are read.
	const xtermSheet = new CSSStyleSheet();
	function mirrorXtermStyles() {
		const css = [...$('terminal').querySelectorAll('style')].map((s) => s.textContent).join('\n');
		xtermSheet.replaceSync(css);
	}
	function watchXtermStyles() {
		if (!document.adoptedStyleSheets.includes(xtermSheet))
			document.adoptedStyleSheets = [...document.adoptedStyleSheets, xtermSheet];
		new MutationObserver(mirrorXtermStyles).observe($('terminal'), { childList: true, subtree: true, characterData: true });
	}

	const SHELL = ['/bin/sh', '-c', 'if command -v bash >/dev/null 2>&1; then exec bash -i; else exec sh -i; fi'];
	const termKey = (id) => `isola.shell.${id}`;

	// Opens the terminal once at a time (events may ask again while a shell is being started).
	async function openTerminal(fresh) {
		if (st.opening) return;
		st.opening = true;
		try {
			await startTerminal(fresh);
		} finally {
			st.opening = false;
		}
	}

	// xterm.js (~480 KiB) loads on the first terminal, not before the table's first paint.
	const scripts = new Map();
	function loadScript(src) {
		if (!scripts.has(src))
			scripts.set(src, new Promise((resolve, reject) => {
				document.head.append(el('script', { src, onload: resolve, onerror: () => reject(new Error(`cannot load ${src}`)) }));
			}));
		return scripts.get(src);
	}

	async function startTerminal(fresh) {
		const id = st.selected;
		await loadScript('/console/xterm.js');
		await loadScript('/console/addon-fit.js');
		if (st.selected !== id || $('tab-terminal').hidden) return;
		if (!st.term) {
			st.term = new window.Terminal({ convertEol: false, cursorBlink: true, fontSize: 13 });
			st.fit = new window.FitAddon.FitAddon();
			st.term.loadAddon(st.fit);
			st.term.open($('terminal'));
			st.term.onData((d) => {
				if (st.ws && st.ws.readyState === WebSocket.OPEN) st.ws.send(new TextEncoder().encode(d));
			});
			st.term.onResize(({ cols, rows }) => {
				if (st.ws && st.ws.readyState === WebSocket.OPEN) st.ws.send(JSON.stringify({ type: 'resize', cols, rows }));
			});
		}
		st.fit.fit();
		const cur = st.rows.get(id);
		if (cur && cur.sb.state !== 'running') {
			$('t-status').textContent = `the sandbox is ${cur.sb.state}: the shell starts when it runs`;
			return;
		}
		// Reattach to this tab's shell after a reload when it still runs; else start one.
		let pid = fresh ? null : sessionStorage.getItem(termKey(id));
		if (pid) {
			const p = await api('GET', sbPath(id, `/processes/${pid}`)).catch(() => null);
			if (!p || !p.running) pid = null;
		}
		if (!pid) {
			const p = await attempt(() => api('POST', sbPath(id, '/processes'),
				{ json: { cmd: SHELL, tty: true, cols: st.term.cols, rows: st.term.rows, tag: 'console' } }));
			if (!p) return;
			pid = String(p.pid);
			sessionStorage.setItem(termKey(id), pid);
		}
		if (st.selected !== id) return;
		attach(id, pid);
	}

	function attach(id, pid) {
		if (st.ws) st.ws.close();
		const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
		const ws = new WebSocket(`${proto}//${location.host}${sbPath(id, `/processes/${pid}/ws`)}`,
			['isola', 'isola.bearer.' + st.token]);
		ws.binaryType = 'arraybuffer';
		st.ws = ws;
		$('t-status').textContent = `connecting to pid ${pid}…`;
		ws.onopen = () => {
			$('t-status').textContent = `shell pid ${pid}`;
			ws.send(JSON.stringify({ type: 'resize', cols: st.term.cols, rows: st.term.rows }));
			st.term.focus();
		};
		ws.onmessage = (m) => {
			if (typeof m.data !== 'string') {
				st.term.write(new Uint8Array(m.data));
				return;
			}
			const ev = JSON.parse(m.data);
			if (ev.type === 'exit') {
				sessionStorage.removeItem(termKey(id));
				st.term.write(`\r\n[exited with status ${ev.exit_code}]\r\n`);
			} else if (ev.type === 'error') {
				showError(`${ev.code}: ${ev.message}`);
			}
		};
		ws.onclose = () => {
			if (st.ws !== ws) return;
			st.ws = null;
			$('t-status').textContent = `disconnected from pid ${pid}`;
		};
	}

	function closeTerminal() {
		if (st.ws) {
			const ws = st.ws;
			st.ws = null;
			ws.close();
		}
		if (st.term) {
			st.term.dispose();
			st.term = null;
			st.fit = null;
		}
	}

	window.addEventListener('resize', () => {
		if (st.fit) st.fit.fit();
	});

	/* --- files ------------------------------------------------------------------------------- */

	const joinPath = (dir, name) => (dir.endsWith('/') ? dir : dir + '/') + name;
	const IMAGE = /\.(png|jpe?g|gif|webp|bmp)$/i;
	const VIEW_MAX = 1 << 20;

	async function listDir(path) {
		const id = st.selected;
		const seq = ++st.listSeq; // only the latest listing asked for is shown
		const typed = $('f-path').value;
		const r = await attempt(() => api('GET', sbPath(id, `/fs/list?path=${encodeURIComponent(path)}`)));
		if (!r || st.selected !== id || seq !== st.listSeq) return;
		st.cwd = path;
		// A path typed while this listing was on its way stays (the tab's first listing must
		// not overwrite what the user is about to open).
		if ($('f-path').value === typed) $('f-path').value = path;
		const body = $('files').tBodies[0];
		const frag = document.createDocumentFragment();
		const entries = r.entries.slice().sort((a, b) => (a.type === 'dir') - (b.type === 'dir') || a.name.localeCompare(b.name)).reverse();
		for (const e of entries) {
			const full = joinPath(path, e.name);
			const name = el('a', { class: 'file', text: e.name, 'data-name': e.name,
				onclick: () => (e.type === 'dir' ? listDir(full) : viewFile(full, e)) });
			const dl = e.type === 'file' ? el('button', { type: 'button', text: 'Download', 'data-action': 'download',
				onclick: () => downloadFile(full, e.name) }) : '';
			frag.append(el('tr', {}, el('td', {}, name), el('td', { text: e.type }), el('td', { text: e.type === 'file' ? human(e.size) : '' }),
				el('td', { text: e.mtime ? new Date(e.mtime * 1000).toLocaleString() : '' }), el('td', {}, dl)));
		}
		body.replaceChildren(frag);
	}

	async function fetchFile(path) {
		const r = await api('GET', sbPath(st.selected, `/files?path=${encodeURIComponent(path)}`), { raw: true });
		return r.blob();
	}

	// Shows a file as text (textContent: markup in it stays text) or as an image (blob: URL).
	async function viewFile(path, e) {
		$('f-view-name').textContent = path;
		$('f-view').textContent = '';
		$('f-image').hidden = true;
		if (e.size > VIEW_MAX) {
			$('f-view').textContent = `(${human(e.size)}: too large to show; download it)`;
			return;
		}
		const blob = await attempt(() => fetchFile(path));
		if (!blob) return;
		if (IMAGE.test(path)) {
			$('f-image').src = URL.createObjectURL(blob);
			$('f-image').hidden = false;
		} else {
			$('f-view').textContent = new TextDecoder('utf-8', { fatal: false }).decode(await blob.arrayBuffer());
		}
	}

	async function downloadFile(path, name) {
		const blob = await attempt(() => fetchFile(path));
		if (blob) saveAs(blob, name);
	}

	// Hands a blob to the browser as a download named name (never rendered).
	function saveAs(blob, name) {
		const a = el('a', { href: URL.createObjectURL(blob), download: name });
		document.body.append(a);
		a.click();
		a.remove();
		setTimeout(() => URL.revokeObjectURL(a.href), 10000);
	}

	async function upload(files) {
		for (const f of files)
			await attempt(() => api('PUT', sbPath(st.selected, `/files?path=${encodeURIComponent(joinPath(st.cwd, f.name))}`), { body: f }));
		listDir(st.cwd);
	}

	/* --- processes --------------------------------------------------------------------------- */

	async function listProcs() {
		const id = st.selected;
		const r = await attempt(() => api('GET', sbPath(id, '/processes')));
		if (!r || st.selected !== id) return;
		const frag = document.createDocumentFragment();
		for (const p of r.processes || []) {
			frag.append(el('tr', {}, el('td', { text: String(p.pid) }), el('td', { text: (p.argv || []).join(' ') }),
				el('td', { text: p.tty ? 'yes' : '' }), el('td', { text: p.tag || '' }), el('td', { text: p.running ? 'yes' : 'no' }),
				el('td', {}, el('button', { type: 'button', text: 'Output', onclick: () => showOutput(id, p.pid) }),
					p.running && views() ? el('button', { type: 'button', text: 'Follow', 'data-action': 'follow',
						onclick: () => views().follow(id, p.pid) }) : '')));
		}
		$('procs').tBodies[0].replaceChildren(frag);
	}

	async function showOutput(id, pid) {
		if (views()) views().leave();
		const r = await attempt(() => api('GET', sbPath(id, `/processes/${pid}/output`)));
		if (r) $('p-output').textContent = (r.stdout || '') + (r.stderr || '');
	}

	// Makes zone take drops: highlighted while something is dragged over it, onDrop(dataTransfer).
	function dropZone(zone, onDrop) {
		zone.addEventListener('dragover', (e) => {
			e.preventDefault();
			zone.classList.add('over');
		});
		zone.addEventListener('dragleave', () => zone.classList.remove('over'));
		zone.addEventListener('drop', (e) => {
			e.preventDefault();
			zone.classList.remove('over');
			onDrop(e.dataTransfer);
		});
	}

	// What sandbox-views.js uses (the same helpers: one API client, one element builder).
	// and what ops.js (templates, snapshots, operations) borrows; both load after this file.
	window.isolaApp = { st, api, el, sbPath, attempt, human, canWrite, showError, openSandbox, saveBlob: saveAs, dropZone,
		who: () => st.who };
	window.isola = window.isolaApp;

	/* --- wiring ------------------------------------------------------------------------------ */

	document.addEventListener('DOMContentLoaded', () => {
		$('signin-form').addEventListener('submit', (e) => {
			e.preventDefault();
			signIn($('token').value.trim());
			$('token').value = '';
		});
		$('signout').addEventListener('click', () => signOut(''));
		for (const f of ['filter', 'filter-label']) $(f).addEventListener('input', applyFilter);
		for (const f of ['filter-state', 'filter-template']) $(f).addEventListener('change', applyFilter);
		$('create-form').addEventListener('submit', createFromForm);
		$('d-close').addEventListener('click', closeSandbox);
		for (const b of document.querySelectorAll('.tabs button')) b.addEventListener('click', () => showTab(b.dataset.tab));
		$('t-new').addEventListener('click', () => openTerminal(true));
		$('f-go').addEventListener('click', () => listDir($('f-path').value || '/'));
		$('f-up').addEventListener('click', () => listDir(st.cwd.replace(/\/[^/]*\/?$/, '') || '/'));
		$('f-upload').addEventListener('change', (e) => upload(e.target.files));
		dropZone($('f-drop'), (dt) => upload(dt.files));
		watchXtermStyles();
		const saved = sessionStorage.getItem(TOKEN_KEY);
		if (saved) signIn(saved);
	});
})();
