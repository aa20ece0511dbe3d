// SPDX-License-Identifier: Apache-2.0
// ops.test: the console's templates, snapshots and operations pages (console/ops.js) in headless chromium.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const URL_ = process.env.ISOLA_TEST_URL;
const OPERATOR = process.env.ISOLA_TEST_TOKEN; // admin of the default tenant
const SHOTS = process.env.ISOLA_TEST_SHOTS || tmpdir();
const WAIT = 60000;
const HOSTILE = '<img src=x onerror=alert(1)>';

let browser;

// One /v1 request; returns {status, body} (body parsed when JSON).
async function call(method, path, body, token = OPERATOR) {
	const r = await fetch(URL_ + path, {
		method,
		headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
		body: body ? JSON.stringify(body) : undefined,
	});
	const text = await r.text();
	let parsed = text;
	try {
		parsed = text ? JSON.parse(text) : null;
	} catch (_) { /* NDJSON or text */ }
	return { status: r.status, body: parsed };
}

async function ok(method, path, body, token) {
	const r = await call(method, path, body, token);
	assert.ok(r.status < 300, `${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
	return r.body;
}

// A page signed in with token on one of the console's pages; dialogs (alert) are recorded.
async function open(token, pageName) {
	const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
	const page = await ctx.newPage();
	page.alerts = [];
	page.on('dialog', (d) => {
		page.alerts.push(d.message());
		d.dismiss();
	});
	page.failed = []; // requests that got no answer (printed when a wait fails)
	page.on('requestfailed', (r) => page.failed.push(`${r.method()} ${new URL(r.url()).pathname} ${r.failure()?.errorText}`));
	await page.goto(URL_ + '/');
	await page.fill('#token', token);
	await page.click('#signin-form button[type=submit]');
	await page.waitForSelector('#app:not([hidden])', { timeout: WAIT });
	if (pageName) await page.click(`#pages button[data-page=${pageName}]`);
	return page;
}

const shot = (page, name) => page.screenshot({ path: join(SHOTS, `ops-${name}.png`), fullPage: true });

async function tenantWithAdmin() {
	const name = `c${Math.random().toString(36).slice(2, 10)}`;
	await ok('POST', '/v1/tenants', { name, max_sandboxes: 4 });
	const t = await ok('POST', '/v1/tokens', { tenant: name, role: 'admin', name: `${name}-admin` });
	return { name, token: t.token };
}

before(async () => {
	browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox'] });
});

after(async () => {
	if (browser) await browser.close();
});

test('templates: the list with template ls columns, inspect, and an import with progress', async () => {
	const page = await open(OPERATOR, 'templates');
	const host = page.locator('#templates tr[data-name="host"]');
	await host.waitFor({ timeout: WAIT });
	const cells = await host.locator('td').allTextContents();
	assert.equal(cells[0], 'host');
	assert.match(cells[1], /\d.*(B|KiB|MiB|GiB)/, 'size');
	assert.equal(cells[2], '0', 'layers');
	assert.equal(cells[3], 'host', 'source');
	await host.locator('button[data-action=inspect]').click();
	await page.waitForFunction(() => document.getElementById('tp-inspect').textContent.includes('"name": "host"'), null, { timeout: WAIT });
	// Import a tarball through the file picker: upload progress, then the server's, then the row.
	const dir = mkdtempSync(join(tmpdir(), 'isola-ops-tar-'));
	try {
		mkdirSync(join(dir, 'root/etc'), { recursive: true });
		mkdirSync(join(dir, 'root/bin'), { recursive: true });
		writeFileSync(join(dir, 'root/etc/hostname'), 'console-import\n');
		writeFileSync(join(dir, 'root/bin/filler'), Buffer.alloc(2 << 20, 7));
		execFileSync('tar', ['-cf', join(dir, 'root.tar'), '-C', join(dir, 'root'), '.']);
		await page.fill('#tp-import-name', 'console-imported');
		await page.setInputFiles('#tp-import-file', join(dir, 'root.tar'));
		await page.click('#tp-import button[type=submit]');
		await page.locator('#templates tr[data-name="console-imported"]').waitFor({ timeout: WAIT });
	} finally {
		rmSync(dir, { recursive: true, force: true });
	}
	assert.equal(await page.locator('#tp-progress [data-phase="upload"] progress').count(), 1, 'upload progress shown');
	const [value, max] = await page.locator('#tp-progress [data-phase="upload"] progress').evaluate((p) => [p.value, p.max]);
	assert.ok(max > 2 << 20 && value === max, `upload progress ${value}/${max}`);
	assert.match(await page.textContent('#tp-progress'), /template console-imported ready/);
	await shot(page, 'templates');
	// Delete asks twice; the API no longer has it.
	const del = page.locator('#templates tr[data-name="console-imported"] button[data-action=delete]');
	await del.click();
	await del.click();
	await page.locator('#templates tr[data-name="console-imported"]').waitFor({ state: 'detached', timeout: WAIT });
	assert.equal((await call('GET', '/v1/templates/console-imported')).status, 404);
	await page.context().close();
});

// Drops files on the build form's drop zone: plain files (dataTransfer.files), or a folder given
// as a FileSystemDirectoryEntry tree (what chromium hands over for a dragged folder), faked here
// because a synthetic DataTransfer carries no entries.
async function dropOnBuild(page, files, folder) {
	await page.evaluate(async ({ files, folder }) => {
		const dt = new DataTransfer();
		for (const [name, text] of Object.entries(files)) dt.items.add(new File([text], name));
		const saved = DataTransferItem.prototype.webkitGetAsEntry;
		if (folder) {
			const tree = (name, node) => (typeof node === 'string'
				? { isFile: true, isDirectory: false, name, file: (ok) => ok(new File([node], name)) }
				: { isFile: false, isDirectory: true, name, createReader: () => {
					let left = Object.entries(node).map(([n, v]) => tree(n, v));
					return { readEntries: (ok) => { const batch = left.slice(0, 1); left = left.slice(1); ok(batch); } };
				} });
			dt.items.add(new File([''], folder.name));
			DataTransferItem.prototype.webkitGetAsEntry = function () { return tree(folder.name, folder.tree); };
		}
		try {
			document.getElementById('tb-drop').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
		} finally {
			DataTransferItem.prototype.webkitGetAsEntry = saved;
		}
	}, { files, folder });
}

test('templates: a build from the console: context by picker and drop, live steps, RUN output as text, cached rebuild, a failing RUN', async () => {
	const page = await open(OPERATOR, 'templates');
	await page.locator('#templates tr[data-name="host"]').waitFor({ timeout: WAIT });
	const name = `console-built-${Date.now()}`;
	const dockerfile = 'FROM host\nARG GREETING\nCOPY marker.txt /opt/marker.txt\nCOPY tree /opt/tree\nCOPY picked.txt /opt/\n' +
		'RUN echo "marker-$(cat /opt/marker.txt)-$(cat /opt/tree/sub/deep.txt)-$(cat /opt/picked.txt)-$GREETING" && ' +
		`printf '%s\\n' '${HOSTILE}' '<script>alert(2)</script>'\n`;
	await page.fill('#tb-name', name);
	await page.fill('#tb-dockerfile', dockerfile);
	await page.fill('#tb-args', 'GREETING=hi there\n');
	await dropOnBuild(page, { 'marker.txt': 'dropped' }, null);
	await dropOnBuild(page, {}, { name: 'tree', tree: { sub: { 'deep.txt': 'deep' }, 'top.txt': 'top' } });
	await page.setInputFiles('#tb-files', { name: 'picked.txt', mimeType: 'text/plain', buffer: Buffer.from('picked') });
	await page.waitForFunction(() => document.querySelectorAll('#tb-context li').length === 4, null, { timeout: WAIT });
	assert.deepEqual(await page.locator('#tb-context li').evaluateAll((l) => l.map((x) => x.dataset.path)),
		['marker.txt', 'picked.txt', 'tree/sub/deep.txt', 'tree/top.txt'], 'folder paths kept');
	await page.click('#tb-submit');
	await page.waitForFunction(() => document.getElementById('tb-result').textContent !== '', null, { timeout: 300000 });
	assert.equal(await page.getAttribute('#tb-result', 'class'), 'ok', await page.textContent('#tb-result'));
	const log = await page.textContent('#tb-log');
	assert.match(log, /^marker-dropped-deep-picked-hi there$/m, log);
	assert.match(log, /^Step 4\/4: RUN echo/m);
	assert.ok(log.includes(HOSTILE) && log.includes('<script>alert(2)</script>'), 'hostile output shown as text');
	assert.equal(await page.locator('#tb-log *').count(), 0, 'the output made no element');
	const steps = await page.locator('#tb-steps li').evaluateAll((l) => l.map((x) => [x.firstChild.textContent, x.dataset.cached]));
	assert.equal(steps.length, 4, 'COPY, COPY, COPY, RUN (FROM and ARG are not steps)');
	assert.deepEqual(steps[3], ['4/4 RUN echo "marker-$(cat /opt/marker.txt)-$(cat /opt/tree/sub/deep.txt)-$(cat /opt/picked.txt)-$GREETING" && ' +
		`printf '%s\\n' '${HOSTILE}' '<script>alert(2)</script>'`, 'false']);
	// The template is in the list without a reload, and built from the context.
	await page.locator(`#templates tr[data-name="${name}"]`).waitFor({ timeout: WAIT });
	assert.equal((await page.locator(`#templates tr[data-name="${name}"] td`).nth(3).textContent()), 'build');
	await shot(page, 'template-build');
	// The same Dockerfile and context under another name: every step from the cache.
	await page.fill('#tb-name', `${name}-again`);
	await page.click('#tb-submit');
	await page.waitForFunction(() => document.getElementById('tb-result').className === 'ok', null, { timeout: 300000 });
	assert.deepEqual(await page.locator('#tb-steps li').evaluateAll((l) => l.map((x) => x.dataset.cached)), Array(4).fill('true'));
	assert.match(await page.textContent('#tb-steps li[data-step="4"] .st'), /^cached$/);
	// A failing RUN: the step, its output and the exit code; no template of that name.
	await page.click('#tb-clear');
	await page.fill('#tb-name', `${name}-fail`);
	await page.fill('#tb-args', '');
	await page.fill('#tb-dockerfile', 'FROM host\nRUN echo about-to-fail && exit 3\n');
	await page.click('#tb-submit');
	await page.waitForFunction(() => document.getElementById('tb-result').className === 'bad', null, { timeout: 300000 });
	const result = await page.textContent('#tb-result');
	assert.match(result, /^build failed: Step 1\/1: RUN echo about-to-fail && exit 3 failed with exit code 3\n/, result);
	assert.equal(await page.getAttribute('#tb-result', 'data-exit-code'), '3');
	assert.match(await page.textContent('#tb-log'), /^about-to-fail$/m);
	assert.match(await page.textContent('#tb-steps li.failed'), /exit code 3/);
	await shot(page, 'template-build-failed');
	assert.equal((await call('GET', `/v1/templates/${name}-fail`)).status, 404);
	assert.deepEqual(page.alerts, []);
	for (const n of [name, `${name}-again`]) await ok('DELETE', `/v1/templates/${n}`);
	await page.context().close();
});

test('snapshots: name, size, created, source sandbox; delete', async () => {
	const sb = await ok('POST', '/v1/sandboxes', { template: 'host' });
	const name = `console-snap-${Date.now()}`;
	try {
		await ok('POST', '/v1/snapshots', { sandbox: sb.id, name });
		const page = await open(OPERATOR, 'snapshots');
		const tr = page.locator(`#snapshots tr[data-name="${name}"]`);
		await tr.waitFor({ timeout: WAIT });
		const cells = await tr.locator('td').allTextContents();
		assert.equal(cells[0], name);
		assert.match(cells[2], /\d/, 'size');
		assert.equal(cells[4], sb.id, 'source sandbox');
		await shot(page, 'snapshots');
		await tr.locator('button[data-action=delete]').click();
		await tr.locator('button[data-action=delete]').click();
		await tr.waitFor({ state: 'detached', timeout: WAIT });
		assert.equal((await call('GET', `/v1/snapshots/${name}`)).status, 404);
		await page.context().close();
	} finally {
		await call('DELETE', `/v1/sandboxes/${sb.id}`);
	}
});

test('tokens: created in the console, its secret shown once and working, revoked in the console and refused', async () => {
	const page = await open(OPERATOR, 'ops');
	await page.fill('#tk-name', HOSTILE);
	await page.selectOption('#tk-role', 'user');
	await page.click('#tk-create button[type=submit]');
	await page.waitForSelector('#tk-dialog[open]', { timeout: WAIT });
	const secret = await page.textContent('#tk-secret');
	assert.match(secret, /^isola_/);
	assert.equal((await ok('GET', '/v1/whoami', null, secret)).role, 'user');
	await shot(page, 'token-secret');
	await page.click('#tk-dialog-close');
	assert.equal(await page.textContent('#tk-secret'), '', 'the secret left the page');
	assert.ok(!(await page.content()).includes(secret), 'the secret is nowhere in the DOM');
	// The hostile name is text in the table, not an element.
	const row = page.locator('#tokens tbody tr', { has: page.locator('td.name', { hasText: HOSTILE }) });
	await row.waitFor({ timeout: WAIT });
	assert.equal(await page.locator('#tokens img').count(), 0);
	assert.ok(!(await row.textContent()).includes('isola_'), 'the list never shows a secret');
	await row.locator('button[data-action=revoke]').click();
	await row.locator('button[data-action=revoke]').click();
	await page.waitForFunction(() => [...document.querySelectorAll('#tokens td.status')].some((td) => td.textContent.startsWith('revoked')),
		null, { timeout: WAIT });
	assert.equal((await call('GET', '/v1/whoami', null, secret)).status, 401);
	assert.deepEqual(page.alerts, []);
	await page.context().close();
});

test('operator: tenants with quotas and usage, the audit trail searched and verified, compliance, host capacity', async () => {
	const t = await tenantWithAdmin();
	const page = await open(OPERATOR, 'ops');
	const tr = page.locator(`#tenants tr[data-name="${t.name}"]`);
	await tr.waitFor({ timeout: WAIT });
	assert.equal(await tr.locator('td').nth(1).textContent(), '0 / 4');
	await page.waitForFunction(() => document.getElementById('au-verify').textContent !== '', null, { timeout: WAIT });
	assert.match(await page.textContent('#au-verify'), /^chain verified: \d+ records/);
	// Seen failing under load (1 run in ~10): the export had failed with "Failed to fetch" and the
	// compliance report stayed empty, the last two of eight requests the page started at once
	// (the /v1/events stream holds one of the browser's six connections to the host); what
	// failed below the browser was not found. The page now starts seven, the export first, and
	// asks a failed read once more (api() in app.js); if it happens again, say which requests
	// failed and with what network error.
	try { await page.locator('#audit tbody tr').first().waitFor({ timeout: WAIT }); } catch (e) {
		console.log('audit rows never showed; failed requests:', JSON.stringify(page.failed), 'the page:',
			JSON.stringify(await page.evaluate(() => ({ rows: document.querySelectorAll('#audit tbody tr').length,
			boxHidden: document.getElementById('op-audit-box').hidden, page: document.getElementById('app').dataset.page,
			opsHidden: document.getElementById('page-ops').hidden, auPage: document.getElementById('au-page').textContent,
			err: (document.getElementById('error') || {}).textContent, body: document.body.innerText.slice(0, 1500) }))));
		throw e;
	}
	await page.fill('#au-search', `POST /v1/tenants`);
	await page.waitForFunction(() => {
		const rows = [...document.querySelectorAll('#audit tbody tr')];
		return rows.length > 0 && rows.every((r) => r.querySelector('td.action').textContent === 'POST /v1/tenants');
	}, null, { timeout: WAIT });
	assert.match(await page.textContent('#au-page'), /^page 1 of \d+ \(\d+ records\)$/);
	await page.waitForSelector('#op-compliance dl.kv dt', { timeout: WAIT });
	assert.match(await page.textContent('#op-compliance'), /egress/);
	await page.waitForFunction(() => /cores/.test(document.getElementById('op-host').textContent), null, { timeout: WAIT });
	assert.match(await page.textContent('#op-host'), /state dir/, 'the operator sees host paths');
	await shot(page, 'operator');
	await page.context().close();
});

test('a tenant admin sees its own tenant and tokens only, no audit, no host paths', async () => {
	const a = await tenantWithAdmin();
	const b = await tenantWithAdmin();
	await ok('POST', '/v1/tokens', { tenant: b.name, role: 'user', name: 'b-only-token' });
	const page = await open(a.token, 'ops');
	await page.locator(`#tokens tbody tr`).first().waitFor({ timeout: WAIT });
	await page.locator(`#tenants tr[data-name="${a.name}"]`).waitFor({ timeout: WAIT });
	const tenants = await page.locator('#tenants td:first-child').allTextContents();
	assert.deepEqual(tenants, [a.name]);
	const tokenTenants = await page.locator('#tokens tbody td:nth-child(3)').allTextContents();
	assert.ok(tokenTenants.length > 0 && tokenTenants.every((n) => n === a.name), tokenTenants.join(','));
	assert.equal(await page.locator('#tokens td', { hasText: 'b-only-token' }).count(), 0);
	assert.equal(await page.isVisible('#op-audit-box'), false);
	assert.equal(await page.isVisible('#tk-tenant'), false);
	await page.waitForFunction(() => /cgroup/.test(document.getElementById('op-host').textContent), null, { timeout: WAIT });
	assert.doesNotMatch(await page.textContent('#op-host'), /state dir/);
	assert.equal(await page.locator('#audit tbody tr').count(), 0);
	await shot(page, 'tenant-admin');
	// Forged: another tenant's token, the audit trail.
	const forged = await page.evaluate(async (other) => {
		const h = { Authorization: `Bearer ${sessionStorage.getItem('isola.token')}`, 'Content-Type': 'application/json' };
		const mint = await fetch('/v1/tokens', { method: 'POST', headers: h, body: JSON.stringify({ tenant: other, role: 'admin', name: 'x' }) });
		const audit = await fetch('/v1/audit/export', { headers: h });
		return [mint.status, audit.status];
	}, b.name);
	assert.deepEqual(forged, [403, 403]);
	await page.context().close();
});

test('a read-only token sees no token, tenant or template controls and gets 403 forging them', async () => {
	const { token } = await ok('POST', '/v1/tokens', { tenant: 'default', role: 'read-only', name: 'ops-ro' });
	const victim = await ok('POST', '/v1/tokens', { tenant: 'default', role: 'user', name: 'ops-victim' });
	const page = await open(token);
	assert.equal(await page.isVisible('#pages button[data-page=ops]'), false);
	await page.click('#pages button[data-page=templates]');
	await page.locator('#templates tr[data-name="host"]').waitFor({ timeout: WAIT });
	assert.equal(await page.isVisible('#tp-import'), false);
	assert.equal(await page.isVisible('#tp-pull'), false);
	assert.equal(await page.isVisible('#tp-build'), false);
	assert.equal(await page.isVisible('#tb-submit'), false);
	assert.equal(await page.locator('#templates button[data-action=delete]').count(), 0);
	await shot(page, 'read-only-templates');
	const forged = await page.evaluate(async (id) => {
		const h = { Authorization: `Bearer ${sessionStorage.getItem('isola.token')}`, 'Content-Type': 'application/json' };
		const mint = await fetch('/v1/tokens', { method: 'POST', headers: h, body: JSON.stringify({ tenant: 'default', role: 'admin', name: 'x' }) });
		const revoke = await fetch(`/v1/tokens/${id}`, { method: 'DELETE', headers: h });
		const tenant = await fetch('/v1/tenants', { method: 'POST', headers: h, body: JSON.stringify({ name: 'forged' }) });
		// A build as the form would send it: a one-file tar holding a Dockerfile.
		const enc = new TextEncoder(), df = enc.encode('FROM host\nRUN touch /forged\n'), hd = new Uint8Array(512);
		const put = (off, s) => hd.set(enc.encode(s), off);
		put(0, 'Dockerfile'); put(100, '0000644\0'); put(108, '0000000\0'); put(116, '0000000\0');
		put(124, df.length.toString(8).padStart(11, '0') + '\0'); put(136, '00000000000\0'); put(148, '        '); put(156, '0'); put(257, 'ustar\0'); put(263, '00');
		put(148, hd.reduce((a, b) => a + b, 0).toString(8).padStart(6, '0') + '\0 ');
		const body = new Blob([hd, df, new Uint8Array(512 - df.length), new Uint8Array(1024)]);
		const build = await fetch('/v1/templates/build?name=forged-build', { method: 'POST', headers: { Authorization: h.Authorization }, body });
		return [mint.status, revoke.status, tenant.status, build.status];
	}, victim.id);
	assert.deepEqual(forged, [403, 403, 403, 403]);
	assert.equal((await call('GET', '/v1/templates/forged-build')).status, 404);
	assert.equal((await ok('GET', '/v1/whoami', null, victim.token)).role, 'user', 'the victim token still works');
	await page.context().close();
});
