// SPDX-License-Identifier: Apache-2.0
// isola web console, one sandbox: usage columns, charts, egress, ports, snapshots and forks,
// a followed process log, directory download and the notebook (docs/console.md).
// Like app.js: API values reach the DOM through textContent and attribute setters only.
'use strict';
(() => {
	const app = window.isolaApp;
	const { st, api, el, sbPath, attempt, human } = app;
	const $ = (id) => document.getElementById(id);
	const SVG = 'http://www.w3.org/2000/svg';
	const svg = (tag, attrs = {}) => {
		const e = document.createElementNS(SVG, tag);
		for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
		return e;
	};
	const when = (t) => new Date(t * 1000).toLocaleTimeString();
	const bytes = (n) => (n ? human(n) : '0 B');

	/* --- usage columns: GET /stats for the visible running rows, every 5 s ------------------- */

	const USAGE_EVERY_MS = 5000; // one pass over the visible rows this often
	const USAGE_MAX_ROWS = 40; // at most this many /stats per pass
	const USAGE_PARALLEL = 4; // requests in flight at once
	const usage = new Map(); // sandbox id -> {t, cpu, cpuPct, mem, tx, rx}
	let usageTimer = null;

	// The three usage cells' texts of sandbox id (CPU %, memory used, network), from the cache.
	function usageText(id) {
		const u = usage.get(id);
		if (!u) return ['—', '—', '—'];
		const net = u.tx === undefined ? '—' : `↑${bytes(u.tx)} ↓${bytes(u.rx)}`;
		return [u.cpuPct === undefined ? '…' : `${u.cpuPct.toFixed(1)}%`, human(u.mem), net];
	}

	// Writes the cached usage of id into its row's three usage cells.
	function fillUsage(tr, id) {
		const [cpu, mem, net] = usageText(id);
		tr.querySelector('td.u-cpu').textContent = cpu;
		tr.querySelector('td.u-mem').textContent = mem;
		tr.querySelector('td.u-net').textContent = net;
	}

	function visibleRunningRows() {
		const out = [];
		const h = window.innerHeight;
		for (const [id, { sb, tr }] of st.rows) {
			if (out.length >= USAGE_MAX_ROWS) break;
			if (sb.state !== 'running' || tr.hidden) continue;
			const r = tr.getBoundingClientRect();
			if (r.bottom >= 0 && r.top <= h) out.push(id);
		}
		return out;
	}

	async function statsOf(id) {
		const s = await api('GET', sbPath(id, '/stats')).catch(() => null);
		if (!s) return;
		const prev = usage.get(id);
		const u = { t: s.time, cpu: s.cpu_seconds, mem: s.memory_bytes };
		if (s.network) {
			u.tx = s.network.tx_bytes;
			u.rx = s.network.rx_bytes;
		}
		// CPU % of one CPU over the interval since the previous pass.
		if (prev && s.time > prev.t) u.cpuPct = Math.max(0, (100 * (s.cpu_seconds - prev.cpu)) / (s.time - prev.t));
		else if (prev) u.cpuPct = prev.cpuPct;
		usage.set(id, u);
		const row = st.rows.get(id);
		if (row) fillUsage(row.tr, id);
	}

	async function usagePass() {
		usageTimer = null;
		if (!st.token) return;
		if (document.visibilityState === 'visible') {
			const ids = visibleRunningRows();
			for (let i = 0; i < ids.length; i += USAGE_PARALLEL) await Promise.all(ids.slice(i, i + USAGE_PARALLEL).map(statsOf));
			for (const id of usage.keys()) if (!st.rows.has(id)) usage.delete(id);
		}
		if (st.token && !usageTimer) usageTimer = setTimeout(usagePass, USAGE_EVERY_MS);
	}

	// Starts the passes (once; the first after the table's first paint, not before it).
	function startUsage() {
		if (!usageTimer) usageTimer = setTimeout(usagePass, 1000);
	}

	/* --- what one tab started, stopped when the tab, the sandbox or the session changes -------- */

	let active = null; // {timer, ctl}: the shown view's refresh timer and stream
	function leave() {
		if (!active) return;
		clearTimeout(active.timer);
		if (active.ctl) active.ctl.abort();
		active = null;
	}
	// Runs fn now and every ms while this view stays shown.
	function every(ms, fn) {
		const me = { timer: null, ctl: null };
		active = me;
		const tick = async () => {
			await fn();
			if (active === me) me.timer = setTimeout(tick, ms);
		};
		tick();
		return me;
	}

	/* --- metrics: the last hour from GET /metrics, drawn as SVG ------------------------------ */

	// One chart: series [{points: [[t, v]...], cls}], values formatted by fmt.
	function chart(title, series, fmt, t0, t1) {
		const W = 600, H = 140, L = 4, B = 16;
		const all = series.flatMap((s) => s.points.map((p) => p[1]));
		const max = Math.max(1e-9, ...all);
		const x = (t) => L + ((W - L - 2) * (t - t0)) / Math.max(1, t1 - t0);
		const y = (v) => H - B - ((H - B - 14) * v) / max;
		const g = svg('svg', { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': title });
		for (const f of [0, 0.5, 1]) g.append(svg('line', { class: 'grid', x1: L, x2: W, y1: y(max * f), y2: y(max * f) }));
		for (const s of series) {
			if (s.points.length < 1) continue;
			g.append(svg('polyline', { class: `line ${s.cls || ''}`, points: s.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ') }));
		}
		const top = svg('text', { x: L + 2, y: 11 });
		top.textContent = `max ${fmt(max)}`;
		const left = svg('text', { x: L + 2, y: H - 3 });
		left.textContent = when(t0);
		const right = svg('text', { x: W - 2, y: H - 3, 'text-anchor': 'end' });
		right.textContent = when(t1);
		g.append(top, left, right);
		const last = series.map((s) => (s.points.length ? `${s.name ? s.name + ' ' : ''}${fmt(s.points[s.points.length - 1][1])}` : '')).filter(Boolean).join(', ');
		return el('div', { class: 'chart', 'data-chart': title.toLowerCase().split(' ')[0] }, el('h4', { text: `${title}: ${last || 'no data'}` }), g);
	}

	// Per-second rate of a cumulative counter between consecutive samples.
	function rate(samples, key) {
		const out = [];
		for (let i = 1; i < samples.length; i++) {
			const dt = samples[i].time - samples[i - 1].time;
			const dv = (samples[i][key] || 0) - (samples[i - 1][key] || 0);
			if (dt > 0) out.push([samples[i].time, Math.max(0, dv / dt)]);
		}
		return out;
	}

	async function showMetrics(id) {
		const now = Date.now() / 1000;
		const r = await attempt(() => api('GET', sbPath(id, `/metrics?start=${Math.floor(now - 3600)}`)));
		if (!r || st.selected !== id) return;
		const s = r.samples || [];
		$('m-status').textContent = `${s.length} samples in the last hour (one every ${r.period_s} s while running)`;
		const t0 = now - 3600, t1 = now;
		const pct = (v) => `${v.toFixed(1)}%`;
		const rateFmt = (v) => `${bytes(Math.round(v))}/s`;
		$('m-charts').replaceChildren(
			chart('CPU % of one CPU', [{ points: rate(s, 'cpu_seconds').map(([t, v]) => [t, 100 * v]) }], pct, t0, t1),
			chart('Memory used', [{ points: s.map((x) => [x.time, x.memory_bytes]) }], human, t0, t1),
			chart('Disk used', [{ points: s.map((x) => [x.time, x.disk_bytes]) }], human, t0, t1),
			chart('Network sent/received', [{ name: 'sent', points: rate(s, 'net_tx_bytes') },
				{ name: 'received', cls: 'second', points: rate(s, 'net_rx_bytes') }], rateFmt, t0, t1));
	}

	/* --- network: policy, counters, recent denials (GET /network) ------------------------------ */

	const COUNTERS = ['tx_bytes', 'rx_bytes', 'connections', 'active', 'denied', 'bytes_out', 'bytes_in', 'dns_queries', 'dns_refused'];

	async function showNetwork(id) {
		let n;
		try {
			n = await api('GET', sbPath(id, '/network'));
		} catch (e) {
			$('n-status').textContent = e.message;
			return;
		}
		if (st.selected !== id) return;
		$('n-status').textContent = `address ${n.address}, gateway ${n.gateway}, host interface ${n.interface}`;
		$('n-policy').textContent = JSON.stringify(n.policy, null, 2);
		const c = n.counters || {};
		$('n-counters').tBodies[0].replaceChildren(...COUNTERS.map((k) =>
			el('tr', {}, el('th', { text: k }), el('td', { 'data-counter': k, text: String(c[k] ?? '') }))));
		const d = n.denials || { total: 0, recent: [] };
		$('n-denied-total').textContent = `(${d.total} since attached; the last ${d.recent.length} shown)`;
		$('n-denials').tBodies[0].replaceChildren(...d.recent.map((x) => el('tr', {},
			el('td', { text: new Date(x.time * 1000).toLocaleString() }), el('td', { class: 'host', text: x.host || '—' }),
			el('td', { text: x.address }), el('td', { text: String(x.port) }), el('td', { class: 'reason', text: x.reason }))));
	}

	/* --- ports: exposures with their URLs (GET/POST/DELETE /ports) ----------------------------- */

	// A link only for http(s) URLs (a javascript: URL would run on click); else text.
	const link = (u) => (/^https?:\/\//i.test(u || '') ? el('a', { href: u, target: '_blank', rel: 'noopener noreferrer', text: u }) : (u || ''));

	async function showPorts(id) {
		let r;
		try {
			r = await api('GET', sbPath(id, '/ports'));
		} catch (e) {
			$('port-status').textContent = e.message;
			$('ports').tBodies[0].replaceChildren();
			return;
		}
		if (st.selected !== id) return;
		$('port-status').textContent = `${r.connections_active} of ${r.max_connections} connections open; ` +
			`in ${bytes(r.bytes_in)}, out ${bytes(r.bytes_out)}` + (r.ports.some((p) => !p.public) ?
			'. Private ports need the sandbox access token (X-Isola-Access-Token header).' : '');
		$('ports').tBodies[0].replaceChildren(...r.ports.map((p) => el('tr', { 'data-port': String(p.port) },
			el('td', { text: String(p.port) }), el('td', { text: p.public ? 'yes' : 'no' }),
			el('td', {}, link(p.url)), el('td', {}, link(p.path_url)),
			el('td', { text: p.connections ? JSON.stringify(p.connections) : '' }),
			el('td', {}, app.canWrite() ? el('button', { type: 'button', class: 'danger', text: 'Close', 'data-action': 'unexpose',
				onclick: async () => {
					await attempt(() => api('DELETE', sbPath(id, `/ports/${p.port}`)));
					showPorts(id);
				} }) : ''))));
	}

	async function exposePort(ev) {
		ev.preventDefault();
		const id = st.selected;
		const port = Number($('port-number').value);
		const ok = await attempt(() => api('POST', sbPath(id, '/ports'), { json: { port, public: $('port-public').checked } }));
		if (ok) showPorts(id);
	}

	/* --- snapshots and forks as a tree ---------------------------------------------------------- */

	const sbLink = (id, label) => el('a', { class: 'file', 'data-sandbox': id, text: label || id, onclick: () => app.openSandbox(id) });

	// The sandbox's ancestry (forked from, created from a snapshot), then its snapshots (with
	// the sandboxes created from each) and its forks, recursively.
	async function showLineage(id) {
		const [snaps, self] = await Promise.all([
			attempt(() => api('GET', '/v1/snapshots')), attempt(() => api('GET', sbPath(id)))]);
		if (!snaps || !self || st.selected !== id) return;
		const list = snaps.snapshots || [];
		const sandboxes = [...st.rows.values()].map((r) => r.sb);
		const node = (kind, ...content) => el('li', { 'data-kind': kind }, el('span', { class: 'kind', text: kind }), ...content);
		const seen = new Set();
		const subtree = (sid) => {
			const ul = el('ul');
			if (seen.has(sid)) return ul;
			seen.add(sid);
			for (const sn of list.filter((x) => x.source === sid)) {
				const li = node('snapshot', el('span', { class: 'snap', 'data-snapshot': sn.name, text: sn.name }),
					` ${human(sn.size)}, ${new Date(sn.created_at * 1000).toLocaleString()} (${sn.state})`);
				const made = el('ul');
				for (const c of sandboxes.filter((x) => x.snapshot === sn.name || x.snapshot === sn.id))
					made.append(node('created', sbLink(c.id, c.name ? `${c.id} (${c.name})` : c.id), subtree(c.id)));
				li.append(made);
				ul.append(li);
			}
			for (const c of sandboxes.filter((x) => x.forked_from === sid))
				ul.append(node('fork', sbLink(c.id, c.name ? `${c.id} (${c.name})` : c.id), ` ${c.state}`, subtree(c.id)));
			return ul;
		};
		const root = el('ul');
		const me = node('sandbox', el('span', { class: 'node-self', text: self.name ? `${self.id} (${self.name})` : self.id }), subtree(id));
		if (self.forked_from) root.append(node('forked from', sbLink(self.forked_from), el('ul', {}, me)));
		else if (self.snapshot) root.append(node('from snapshot', el('span', { text: self.snapshot }), el('ul', {}, me)));
		else root.append(me);
		const nSnaps = list.filter((x) => x.source === id).length, nForks = sandboxes.filter((x) => x.forked_from === id).length;
		$('l-status').textContent = `${nSnaps} snapshot(s) and ${nForks} fork(s) of this sandbox`;
		$('lineage').replaceChildren(root);
	}

	/* --- processes: follow a log (GET /processes/{pid}/output?follow=true, NDJSON) ------------ */

	const LOG_MAX = 256 * 1024; // characters of a followed log kept on the page

	// Reads an NDJSON body, calling fn(object) per line.
	async function readNdjson(body, fn) {
		const reader = body.getReader();
		const dec = new TextDecoder();
		let buf = '';
		for (;;) {
			const { value, done } = await reader.read();
			if (value) buf += dec.decode(value, { stream: true });
			let i;
			while ((i = buf.indexOf('\n')) >= 0) {
				const line = buf.slice(0, i).trim();
				buf = buf.slice(i + 1);
				if (line) fn(JSON.parse(line));
			}
			if (done) {
				if (buf.trim()) fn(JSON.parse(buf));
				return;
			}
		}
	}

	const b64bytes = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));

	async function follow(id, pid) {
		leave();
		const me = { timer: null, ctl: new AbortController() };
		active = me;
		const out = $('p-output');
		out.textContent = '';
		$('p-status').textContent = `following pid ${pid}…`;
		const dec = { stdout: new TextDecoder(), stderr: new TextDecoder() };
		const add = (text) => {
			// One text node, trimmed from the front past LOG_MAX: the output stays text.
			out.textContent = (out.textContent + text).slice(-LOG_MAX);
			out.scrollTop = out.scrollHeight;
		};
		try {
			const r = await api('GET', sbPath(id, `/processes/${pid}/output?follow=true&stream=ndjson`), { raw: true, signal: me.ctl.signal });
			await readNdjson(r.body, (ev) => {
				if (ev.type === 'stdout' || ev.type === 'stderr') add(dec[ev.type].decode(b64bytes(ev.data || ''), { stream: true }));
				else if (ev.type === 'dropped') add(`\n[${ev.bytes} earlier bytes of ${ev.stream} were dropped]\n`);
				else if (ev.type === 'exit') $('p-status').textContent = `pid ${pid} exited with status ${ev.exit_code}`;
				else if (ev.type === 'error') $('p-status').textContent = `${ev.code}: ${ev.message}`;
			});
			if (active === me && !/exited/.test($('p-status').textContent)) $('p-status').textContent = `pid ${pid}: the stream ended`;
		} catch (e) {
			if (e.name !== 'AbortError') $('p-status').textContent = e.message;
		}
	}

	/* --- files: a directory as a tar (GET /archive) ----------------------------------------- */

	async function downloadDir() {
		const dir = st.cwd;
		const r = await attempt(() => api('GET', sbPath(st.selected, `/archive?path=${encodeURIComponent(dir)}`), { raw: true }));
		if (!r) return;
		const blob = await attempt(() => r.blob());
		const base = dir.replace(/\/+$/, '').split('/').pop() || 'root';
		if (blob) app.saveBlob(blob, `${base}.tar`);
	}

	/* --- notebook: Python cells through POST /code/execute (NDJSON) --------------------------- */

	// ANSI escape sequences (colours in IPython tracebacks) removed: the text stays plain.
	// eslint-disable-next-line no-control-regex
	const stripAnsi = (s) => String(s).replace(/\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]/g, '');
	// Base64 image data from a result (Jupyter ends it with a newline), or null if it is not base64.
	const b64 = (v) => {
		const s = typeof v === 'string' ? v.replace(/\s+/g, '') : '';
		return /^[A-Za-z0-9+/]+={0,2}$/.test(s) ? s : null;
	};

	let notebookOf = null; // the sandbox whose cells are on the page

	function addCell(code = '') {
		const src = el('textarea', { spellcheck: 'false', 'aria-label': 'code' });
		src.value = code;
		const out = el('div', { class: 'out' });
		const status = el('span', { class: 'muted' });
		const run = el('button', { type: 'button', text: 'Run', 'data-action': 'run', onclick: () => runCell(src, out, status, run) });
		src.addEventListener('keydown', (e) => {
			if (e.key === 'Enter' && (e.shiftKey || e.ctrlKey)) {
				e.preventDefault();
				run.click();
			}
		});
		const cell = el('div', { class: 'cell' }, src, el('div', { class: 'toolbar' }, run, status), out);
		$('cells').append(cell);
		return cell;
	}

	async function runCell(src, out, status, run) {
		const id = st.selected;
		out.replaceChildren();
		run.disabled = true;
		status.textContent = 'running…';
		let stream = null;
		const text = (cls, t) => {
			if (stream && stream.className === cls) stream.textContent += t;
			else {
				stream = el('pre', { class: cls, text: t });
				out.append(stream);
			}
		};
		try {
			const r = await api('POST', sbPath(id, '/code/execute'), { json: { code: src.value, language: 'python' }, raw: true });
			await readNdjson(r.body, (ev) => {
				if (ev.type === 'stdout' || ev.type === 'stderr') text(ev.type, ev.text || '');
				else if (ev.type === 'result') {
					stream = null;
					if (b64(ev.png)) out.append(el('img', { src: `data:image/png;base64,${b64(ev.png)}`, alt: 'result image' }));
					else if (b64(ev.jpeg)) out.append(el('img', { src: `data:image/jpeg;base64,${b64(ev.jpeg)}`, alt: 'result image' }));
					else if (ev.text !== undefined && ev.text !== null) out.append(el('pre', { class: 'result', text: String(ev.text) }));
				} else if (ev.type === 'error') {
					stream = null;
					const tb = Array.isArray(ev.traceback) ? ev.traceback.join('\n') : ev.traceback || '';
					out.append(el('pre', { class: 'err', text: stripAnsi(tb || `${ev.name}: ${ev.value}`) }));
				} else if (ev.type === 'number_of_executions') status.textContent = `[${ev.execution_count}]`;
			});
			if (status.textContent === 'running…') status.textContent = 'done';
		} catch (e) {
			status.textContent = '';
			out.append(el('pre', { class: 'err', text: e.message }));
		} finally {
			run.disabled = false;
		}
	}

	/* --- tab dispatch (called by app.js's showTab) --------------------------------------------- */

	function show(name, id) {
		if (name === 'metrics') every(10000, () => showMetrics(id));
		else if (name === 'network') every(3000, () => showNetwork(id));
		else if (name === 'ports') showPorts(id);
		else if (name === 'lineage') showLineage(id);
		else if (name === 'notebook' && notebookOf !== id) {
			// A notebook belongs to one sandbox (its interpreter holds the cells' state).
			notebookOf = id;
			$('cells').replaceChildren();
			addCell();
		}
		if (name !== 'processes') $('p-status').textContent = '';
	}

	document.addEventListener('DOMContentLoaded', () => {
		$('f-tar').addEventListener('click', downloadDir);
		$('port-form').addEventListener('submit', exposePort);
		$('nb-add').addEventListener('click', () => addCell());
	});

	window.isolaViews = { show, leave, follow, startUsage, usageText };
})();
