// SPDX-License-Identifier: Apache-2.0
// console.test: the web console in headless chromium (playwright-core) against a real isolad.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { URL_, TOKEN, WAIT, api, createSandbox, signedIn, row, shot, launchBrowser, closeBrowser } from './helpers.mjs';

before(launchBrowser);
after(closeBrowser);

test('every console response carries the CSP and the hardening headers', async () => {
	for (const path of ['/', '/console/app.js', '/console/app.css', '/console/xterm.js', '/console/xterm.css',
		'/console/addon-fit.js', '/console/missing.js']) {
		const r = await fetch(URL_ + path);
		const csp = r.headers.get('content-security-policy') || '';
		assert.match(csp, /default-src 'none'/, path);
		assert.match(csp, /script-src 'self';/, path);
		assert.match(csp, /frame-ancestors 'none'/, path);
		assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/, path);
		assert.equal(r.headers.get('x-content-type-options'), 'nosniff', path);
		assert.equal(r.headers.get('referrer-policy'), 'no-referrer', path);
		assert.equal(r.status, path.includes('missing') ? 404 : 200, path);
		if (r.status === 200) {
			const etag = r.headers.get('etag');
			assert.ok(etag, path);
			const again = await fetch(URL_ + path, { headers: { 'If-None-Match': etag } });
			assert.equal(again.status, 304, path);
			assert.match(again.headers.get('content-security-policy') || '', /default-src 'none'/, path);
		}
	}
	assert.equal((await fetch(URL_ + '/')).headers.get('content-type'), 'text/html; charset=utf-8');
	assert.equal((await fetch(URL_ + '/console/app.js')).headers.get('content-type'), 'text/javascript; charset=utf-8');
	const html = await (await fetch(URL_ + '/')).text();
	assert.doesNotMatch(html, /<script(?![^>]*\ssrc=)[^>]*>/, 'no inline script');
	assert.doesNotMatch(html, /\sstyle=|<style|\son[a-z]+=/i, 'no inline style or handler');
	assert.doesNotMatch(readFileSync(new URL('../../console/app.js', import.meta.url), 'utf8'), /innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
});

test('sign in; a sandbox created through the API appears without a reload', async () => {
	const page = await signedIn();
	assert.match(await page.textContent('#whoami'), /admin of tenant default/);
	const sb = await createSandbox({ labels: { made: 'api' } });
	await row(page, sb.id).waitFor({ timeout: WAIT });
	assert.equal(await row(page, sb.id).locator('td.state').textContent(), 'running');
	await api('POST', `/v1/sandboxes/${sb.id}/pause`);
	await page.waitForFunction((id) => document.querySelector(`tr[data-id="${id}"] td.state`)?.textContent === 'paused',
		sb.id, { timeout: WAIT });
	await shot(page, 'table-live');
	await api('DELETE', `/v1/sandboxes/${sb.id}`);
	await row(page, sb.id).waitFor({ state: 'detached', timeout: WAIT });
	assert.deepEqual(page.cspErrors, []);
	await page.context().close();
});

test('create from the form, then a terminal: echo $((6*7)) prints 42, and a reload reattaches the same shell', async () => {
	const page = await signedIn();
	await page.fill('#c-name', 'from-form');
	await page.click('#c-submit');
	const tr = page.locator('#sandboxes tr', { hasText: 'from-form' });
	await tr.waitFor({ timeout: WAIT });
	const id = await tr.getAttribute('data-id');
	const sb = await api('GET', `/v1/sandboxes/${id}`);
	assert.equal(sb.name, 'from-form');
	await tr.locator('button', { hasText: 'Open' }).click();
	await page.waitForFunction(() => /^shell pid \d+$/.test(document.getElementById('t-status').textContent), null, { timeout: WAIT });
	const status = await page.textContent('#t-status');
	await page.click('#terminal');
	await page.keyboard.type('echo $((6*7))');
	await page.keyboard.press('Enter');
	await page.waitForFunction(() => /^42\s*$/m.test(document.querySelector('#terminal .xterm-rows').innerText), null, { timeout: WAIT });
	await shot(page, 'terminal-42');
	// A reload keeps the tab signed in and reattaches to the same shell, whose tail replays.
	await page.reload();
	await page.waitForFunction(() => /^shell pid \d+$/.test(document.getElementById('t-status').textContent), null, { timeout: WAIT });
	assert.equal(await page.textContent('#t-status'), status);
	await page.waitForFunction(() => /^42\s*$/m.test(document.querySelector('#terminal .xterm-rows').innerText), null, { timeout: WAIT });
	await page.click('#terminal');
	await page.keyboard.type('echo $((7*8))');
	await page.keyboard.press('Enter');
	await page.waitForFunction(() => /^56\s*$/m.test(document.querySelector('#terminal .xterm-rows').innerText), null, { timeout: WAIT });
	// A narrower window resizes the terminal, and the PTY follows (stty reads the kernel's size).
	const size = async (mark) => {
		await page.keyboard.type(`echo ${mark} $(stty size)`);
		await page.keyboard.press('Enter');
		const re = new RegExp(`^${mark} (\\d+) (\\d+)\\s*$`, 'm');
		const h = await page.waitForFunction((src) => new RegExp(src, 'm').exec(document.querySelector('#terminal .xterm-rows').innerText),
			re.source, { timeout: WAIT });
		const [, rows, cols] = await h.jsonValue();
		return { rows: Number(rows), cols: Number(cols) };
	};
	const wide = await size('wide');
	await page.setViewportSize({ width: 700, height: 900 });
	await page.waitForFunction((c) => document.querySelector('#terminal .xterm-rows > div').textContent !== null &&
		document.querySelector('#terminal .xterm-screen').clientWidth < c, 1200, { timeout: WAIT });
	const narrow = await size('narrow');
	assert.ok(narrow.cols < wide.cols, `stty size after the resize: ${JSON.stringify({ wide, narrow })}`);
	await page.context().close();
	await api('DELETE', `/v1/sandboxes/${id}`);
});

test('create form: CPU and disk limits, checked in the form, refused by the API with its message, shown in the sandbox view', async () => {
	const page = await signedIn();
	const before = (await api('GET', '/v1/sandboxes')).sandboxes.length;
	// Bad input is named in the form; nothing reaches the API.
	for (const [id, value, re] of [['#c-cpu', 'half', /^CPU "half": a number of CPUs/], ['#c-cpu', '0', /^CPU "0"/],
		['#c-disk', '512 megs', /^Disk "512 megs": a byte count or a size like 512M/], ['#c-memory', '1.5G', /^Memory "1.5G"/]]) {
		await page.fill('#c-cpu', id === '#c-cpu' ? value : '');
		await page.fill('#c-disk', id === '#c-disk' ? value : '');
		await page.fill('#c-memory', id === '#c-memory' ? value : '');
		await page.click('#c-submit');
		await page.waitForFunction(() => !document.getElementById('error').hidden, null, { timeout: WAIT });
		assert.match(await page.textContent('#error'), re);
	}
	assert.equal((await api('GET', '/v1/sandboxes')).sandboxes.length, before, 'no sandbox was created');
	await shot(page, 'create-limits-invalid');
	// cpu 0.5 and disk 512M: the API has them, and so does the sandbox view.
	await page.fill('#c-memory', '');
	await page.fill('#c-cpu', '0.5');
	await page.fill('#c-disk', '512M');
	await page.fill('#c-name', 'limits-form');
	await page.click('#c-submit');
	const tr = page.locator('#sandboxes tr', { hasText: 'limits-form' });
	await tr.waitFor({ timeout: WAIT });
	assert.equal(await page.isVisible('#error'), false);
	const id = await tr.getAttribute('data-id');
	try {
		const sb = await api('GET', `/v1/sandboxes/${id}`);
		assert.equal(sb.cpu, 0.5);
		assert.equal(sb.disk, 512 << 20);
		await tr.locator('button', { hasText: 'Open' }).click();
		await page.waitForFunction(() => /CPU 0\.5,.*disk 512\.0 MiB/.test(document.getElementById('d-limits').textContent), null, { timeout: WAIT });
		assert.equal(await tr.locator('td').nth(7).textContent(), '0.5', 'the table shows the CPU limit');
		await shot(page, 'create-limits');
	} finally {
		await page.context().close();
		await api('DELETE', `/v1/sandboxes/${id}`);
	}
	// A tenant whose disk quota is 256M: the API refuses 512M, and the form shows its message.
	const tenant = `c${Math.random().toString(36).slice(2, 10)}`;
	await api('POST', '/v1/tenants', { name: tenant, max_disk: '256M' });
	const { token } = await api('POST', '/v1/tokens', { tenant, role: 'admin', name: `${tenant}-admin` });
	const tp = await signedIn(token);
	await tp.fill('#c-disk', '512M');
	await tp.click('#c-submit');
	await tp.waitForFunction(() => !document.getElementById('error').hidden, null, { timeout: WAIT });
	assert.match(await tp.textContent('#error'), new RegExp(`^quota_exceeded: .*tenant \`${tenant}\`: 0B of disk in use \\+ 512M requested exceeds its quota of 256M$`));
	assert.equal((await api('GET', '/v1/sandboxes', null, token)).sandboxes.length, 0);
	await shot(tp, 'create-limits-quota');
	await tp.context().close();
});

test('files: upload, download, and a hostile file name shown as text', async () => {
	const sb = await createSandbox();
	const hostile = '<img src=x onerror=alert(1)>';
	await api('POST', `/v1/sandboxes/${sb.id}/exec`, { cmd: ['sh', '-c', `mkdir -p /tmp/up && touch "/tmp/up/${hostile}" && printf '<script>alert(2)</script>' > /tmp/up/page.html`] });
	const page = await signedIn();
	await row(page, sb.id).locator('button', { hasText: 'Open' }).click();
	await page.click('.tabs button[data-tab=files]');
	await page.fill('#f-path', '/tmp/up');
	await page.click('#f-go');
	const link = page.locator('#files a.file', { hasText: hostile });
	await link.waitFor({ timeout: WAIT });
	assert.equal(await link.textContent(), hostile);
	assert.equal(await page.locator('#files img').count(), 0, 'the name was not parsed as markup');
	// A file with markup is shown as text too.
	await page.locator('#files a.file', { hasText: 'page.html' }).click();
	await page.waitForFunction(() => document.getElementById('f-view').textContent.includes('<script>'), null, { timeout: WAIT });
	assert.equal(await page.locator('#f-view script').count(), 0);
	// Upload through the file input.
	await page.setInputFiles('#f-upload', { name: 'hello.txt', mimeType: 'text/plain', buffer: Buffer.from('hello from the browser\n') });
	await page.locator('#files a.file', { hasText: 'hello.txt' }).waitFor({ timeout: WAIT });
	const r = await fetch(`${URL_}/v1/sandboxes/${sb.id}/files?path=/tmp/up/hello.txt`, { headers: { Authorization: `Bearer ${TOKEN}` } });
	assert.equal(await r.text(), 'hello from the browser\n');
	// Download it back.
	const [dl] = await Promise.all([
		page.waitForEvent('download', { timeout: WAIT }),
		page.locator('#files tr', { hasText: 'hello.txt' }).locator('button[data-action=download]').click(),
	]);
	assert.equal(dl.suggestedFilename(), 'hello.txt');
	assert.equal(readFileSync(await dl.path(), 'utf8'), 'hello from the browser\n');
	await shot(page, 'files');
	assert.deepEqual(page.dialogs, [], 'no dialog fired');
	await page.context().close();
	await api('DELETE', `/v1/sandboxes/${sb.id}`);
});

test('a read-only token sees no destructive control and gets 403 when it forges one', async () => {
	const sb = await createSandbox();
	const { token } = await api('POST', '/v1/tokens', { tenant: 'default', role: 'read-only', name: 'console-ro' });
	const page = await signedIn(token);
	assert.match(await page.textContent('#whoami'), /read-only of tenant default/);
	await row(page, sb.id).waitFor({ timeout: WAIT });
	assert.equal(await page.locator('#sandboxes button[data-action]').count(), 0);
	assert.equal(await page.locator('#sandboxes button', { hasText: /Destroy|Pause|Fork|Hibernate|Snapshot/ }).count(), 0);
	assert.equal(await page.isVisible('#create-form'), false);
	await row(page, sb.id).locator('button', { hasText: 'Open' }).click();
	await page.waitForSelector('#tab-files:not([hidden])', { timeout: WAIT });
	assert.equal(await page.isVisible('.tabs button[data-tab=terminal]'), false);
	assert.equal(await page.isVisible('#f-upload'), false);
	await shot(page, 'read-only');
	const forged = await page.evaluate(async (id) => {
		const token = sessionStorage.getItem('isola.token');
		const r = await fetch(`/v1/sandboxes/${id}`, { method: 'DELETE', headers: { Authorization: `Bearer ${token}` } });
		return r.status;
	}, sb.id);
	assert.equal(forged, 403);
	assert.equal((await api('GET', `/v1/sandboxes/${sb.id}`)).state, 'running');
	await page.context().close();
	await api('DELETE', `/v1/sandboxes/${sb.id}`);
});

test('a revoked token loses the console', async () => {
	const { token, id } = await api('POST', '/v1/tokens', { tenant: 'default', role: 'user', name: 'console-rev' });
	const page = await signedIn(token);
	await api('DELETE', `/v1/tokens/${id}`);
	// The next request the page makes (here: the reload's whoami) is refused and signs it out.
	await page.reload();
	// The sign-in form shows from the reload on: wait for the refusal itself.
	await page.waitForSelector('#signin:not([hidden])', { timeout: WAIT });
	await page.waitForFunction(() => document.getElementById('error').textContent !== '', null, { timeout: WAIT });
	assert.match(await page.textContent('#error'), /refused|unauthorized/);
	await page.context().close();
});

function freePort() {
	return new Promise((resolve) => {
		const s = createServer();
		s.listen(0, '127.0.0.1', () => {
			const { port } = s.address();
			s.close(() => resolve(port));
		});
	});
}

test('isolad --console off answers 404 at / and /console/', async () => {
	const dir = mkdtempSync(join(tmpdir(), 'isola-console-off-'));
	const port = await freePort();
	const d = spawn(process.env.ISOLA_TEST_ISOLAD, ['--state-dir', dir, '--socket', join(dir, 's.sock'), '--listen',
		`127.0.0.1:${port}`, '--agent', process.env.ISOLA_TEST_AGENT, '--console', 'off'], { stdio: 'ignore' });
	try {
		let up = false;
		for (let i = 0; i < 300 && !up; i++) {
			up = await fetch(`http://127.0.0.1:${port}/v1/health`).then((r) => r.ok, () => false);
			if (!up) await new Promise((r) => setTimeout(r, 100));
		}
		assert.ok(up, 'the second isolad answers /v1/health');
		for (const path of ['/', '/console/app.js']) {
			const r = await fetch(`http://127.0.0.1:${port}${path}`);
			assert.equal(r.status, 404, path);
			assert.equal((await r.json()).code, 'not_found');
		}
	} finally {
		d.kill('SIGTERM');
		await new Promise((r) => d.once('exit', r));
		rmSync(dir, { recursive: true, force: true });
	}
});

test('first paint of the table with many sandboxes (measured, not asserted)', async () => {
	const n = Number(process.env.CONSOLE_PAINT_N || 200);
	const ids = [];
	// Small limits: 200 sandboxes stay within the host's CPU and memory commitment.
	try {
		await fillAndMeasure(n, ids);
	} finally {
		for (let i = 0; i < ids.length; i += 8)
			await Promise.all(ids.slice(i, i + 8).map((id) => api('DELETE', `/v1/sandboxes/${id}`)));
	}
});

async function fillAndMeasure(n, ids) {
	for (let i = 0; i < n; i += 8) {
		const batch = await Promise.all(Array.from({ length: Math.min(8, n - i) }, () => createSandbox({ cpu: 0.1, memory: '32M', labels: { bulk: '1' } })));
		ids.push(...batch.map((s) => s.id));
	}
	const page = await signedIn();
	await page.reload();
	const t0 = Date.now();
	await page.waitForFunction((k) => document.querySelectorAll('#sandboxes tbody tr').length >= k, n, { timeout: WAIT });
	const wall = Date.now() - t0;
	await page.waitForFunction(() => window.isolaFirstPaint, null, { timeout: WAIT });
	const t = await page.evaluate(() => {
		const at = (name) => Math.round(performance.getEntriesByName(name)[0]?.startTime ?? -1);
		const nav = performance.getEntriesByType('navigation')[0];
		return { dcl: Math.round(nav.domContentLoadedEventEnd), signedIn: at('isola-signed-in'), snapshot: at('isola-snapshot'),
			paint: Math.round(window.isolaFirstPaint) };
	});
	console.log(`# console first paint: ${n} sandboxes, table painted ${t.paint} ms after navigation start ` +
		`(DOMContentLoaded ${t.dcl} ms, whoami answered ${t.signedIn} ms, snapshot event ${t.snapshot} ms; ` +
		`${wall} ms after reload returned; load average ${loadavg()[0].toFixed(1)} on ${cpus().length} CPUs)`);
	await shot(page, `table-${n}`);
	await page.context().close();
}
