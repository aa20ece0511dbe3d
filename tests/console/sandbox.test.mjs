// SPDX-License-Identifier: Apache-2.0
// sandbox.test: the console's one-sandbox views (console/sandbox-views.js) and the table's usage
// columns and filters, in headless chromium against a real isolad (tests/console/run.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { URL_, WAIT, api, createSandbox, signedIn, row, shot, launchBrowser, closeBrowser } from './helpers.mjs';

const sh = (id, script) => api('POST', `/v1/sandboxes/${id}/exec`, { cmd: ['sh', '-c', script] });
let sb; // one running sandbox most tests share
const made = [];

before(async () => {
	await launchBrowser();
	sb = await createSandbox({ labels: { team: 'views' } });
	made.push(sb.id);
});

after(async () => {
	for (const id of made) await api('DELETE', `/v1/sandboxes/${id}`).catch(() => {});
	await closeBrowser();
});

// A page signed in with the detail of id open on tab.
async function openTab(id, tab) {
	const page = await signedIn();
	await row(page, id).locator('button', { hasText: 'Open' }).click();
	// The detail opens, or the console shows why not (then the test fails saying so).
	await page.waitForFunction(() => !document.getElementById('detail').hidden || !document.getElementById('error').hidden,
		null, { timeout: WAIT });
	assert.equal(await page.isVisible('#detail'), true, `the detail did not open: ${await page.textContent('#error')}`);
	await page.click(`.tabs button[data-tab=${tab}]`);
	await page.waitForSelector(`#tab-${tab}:not([hidden])`, { timeout: WAIT });
	return page;
}

test('sandbox-views.js is served under the CSP and builds no markup from strings', async () => {
	const r = await fetch(URL_ + '/console/sandbox-views.js');
	assert.equal(r.status, 200);
	assert.match(r.headers.get('content-security-policy') || '', /script-src 'self';/);
	assert.equal(r.headers.get('content-type'), 'text/javascript; charset=utf-8');
	const src = readFileSync(new URL('../../console/sandbox-views.js', import.meta.url), 'utf8');
	assert.equal(await r.text(), src, 'the embedded copy is the source');
	assert.doesNotMatch(src, /innerHTML|outerHTML|insertAdjacentHTML|document\.write|\.style\b|eval\(|new Function/);
});

test('usage columns fill from /stats, and the state, template and label filters narrow the table', async () => {
	const other = await createSandbox({ labels: { team: 'other' } });
	made.push(other.id);
	await api('POST', `/v1/sandboxes/${other.id}/pause`);
	await sh(sb.id, 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done');
	const page = await signedIn();
	await row(page, other.id).waitFor({ timeout: WAIT });
	// Two passes (5 s apart) give a CPU %; memory used and network bytes come with the first.
	await page.waitForFunction((id) => /^\d+\.\d%$/.test(document.querySelector(`tr[data-id="${id}"] td.u-cpu`)?.textContent),
		sb.id, { timeout: WAIT });
	const cells = await row(page, sb.id).locator('td.usage').allTextContents();
	assert.match(cells[1], /^\d+(\.\d)? (B|KiB|MiB|GiB)$/, `memory used: ${cells}`);
	assert.match(cells[2], /^↑.+ ↓.+$/, `network: ${cells}`);
	assert.equal(await row(page, other.id).locator('td.u-cpu').textContent(), '—', 'a paused sandbox has no usage');
	const visible = () => page.$$eval('#sandboxes tbody tr:not([hidden])', (trs) => trs.map((t) => t.dataset.id));
	await page.selectOption('#filter-state', 'paused');
	assert.deepEqual(await visible(), [other.id]);
	await page.selectOption('#filter-state', '');
	await page.fill('#filter-label', 'team=views');
	assert.deepEqual(await visible(), [sb.id]);
	await page.fill('#filter-label', 'team');
	assert.deepEqual((await visible()).sort(), [sb.id, other.id].sort());
	await page.fill('#filter-label', 'team=nobody');
	assert.deepEqual(await visible(), []);
	await page.fill('#filter-label', '');
	assert.deepEqual(await page.$$eval('#filter-template option', (o) => o.map((x) => x.value)), ['', 'host']);
	await page.selectOption('#filter-template', 'host');
	assert.ok((await visible()).includes(sb.id));
	await shot(page, 'usage-columns');
	assert.deepEqual(page.cspErrors, []);
	await page.context().close();
});

test('metrics: CPU, memory, disk and network charts of the last hour', async () => {
	const page = await openTab(sb.id, 'metrics');
	// The history takes a sample every 5 s: wait for two (a CPU rate needs a pair), without sleeping.
	await page.waitForFunction(() => {
		const pts = [...document.querySelectorAll('#m-charts .chart')].map((c) => c.querySelector('polyline')?.getAttribute('points') || '');
		return pts.length === 4 && pts.every((p) => p.split(' ').length >= 1 && p !== '');
	}, null, { timeout: WAIT });
	const titles = await page.$$eval('#m-charts h4', (h) => h.map((x) => x.textContent));
	assert.equal(titles.length, 4);
	assert.match(titles[0], /^CPU % of one CPU: \d+\.\d%$/);
	assert.match(titles[1], /^Memory used: \d/);
	assert.match(titles[2], /^Disk used: \d/);
	assert.match(titles[3], /^Network sent\/received: sent .+\/s, received .+\/s$/);
	assert.equal(await page.locator('#m-charts svg').count(), 4);
	await shot(page, 'metrics');
	await page.context().close();
});

test('network: the policy, counters and a recent denial with a hostile host name, shown as text', async () => {
	const page = await openTab(sb.id, 'network');
	await page.waitForFunction(() => document.getElementById('n-policy').textContent.includes('"default"'), null, { timeout: WAIT });
	const { gateway } = await api('GET', `/v1/sandboxes/${sb.id}/network`);
	const hostile = '<img src=x onerror=alert(1)>';
	// From the sandbox: TLS with a hostile SNI and an HTTP request for a name the policy does not
	// allow, both to the host side of its own veth (this machine; the proxy refuses both).
	await sh(sb.id, `python3 -c 'import socket,ssl,sys
s = socket.create_connection((sys.argv[1], 443), 10)
try: ssl.create_default_context().wrap_socket(s, server_hostname=sys.argv[2])
except Exception as e: print(e)' ${gateway} '${hostile}'; curl -s -m 10 --resolve denied.test:80:${gateway} http://denied.test/ || true`);
	const hostCell = page.locator('#n-denials td.host', { hasText: hostile });
	await hostCell.waitFor({ timeout: WAIT });
	assert.equal(await hostCell.textContent(), hostile);
	const tr = page.locator('#n-denials tr', { hasText: 'denied.test' });
	await tr.waitFor({ timeout: WAIT });
	const cells = await tr.locator('td').allTextContents();
	assert.deepEqual(cells.slice(1), ['denied.test', gateway, '80', 'deny_default']);
	assert.equal(await page.locator('#n-denials tr', { hasText: hostile }).locator('td.reason').textContent(), 'bad_name');
	assert.equal(await page.locator('#tab-network img').count(), 0, 'the host name was not parsed as markup');
	assert.ok(Number(await page.textContent('#n-counters td[data-counter=denied]')) >= 2);
	await shot(page, 'network-denials');
	assert.deepEqual(page.dialogs, []);
	await page.context().close();
});

test('ports: expose a port from the console, see its URLs, close it', async () => {
	const page = await openTab(sb.id, 'ports');
	await page.fill('#port-number', '8123');
	await page.click('#port-form button[type=submit]');
	const tr = page.locator('#ports tr[data-port="8123"]');
	await tr.waitFor({ timeout: WAIT });
	const api_ = (await api('GET', `/v1/sandboxes/${sb.id}/ports`)).ports.find((p) => p.port === 8123);
	assert.ok(api_, 'exposed through the API');
	assert.equal(await tr.locator('a').first().getAttribute('href'), api_.url);
	assert.equal(await tr.locator('a').nth(1).getAttribute('href'), api_.path_url);
	await shot(page, 'ports');
	await tr.locator('button[data-action=unexpose]').click();
	await tr.waitFor({ state: 'detached', timeout: WAIT });
	assert.deepEqual((await api('GET', `/v1/sandboxes/${sb.id}/ports`)).ports, []);
	await page.context().close();
});

test('snapshots and forks of a sandbox as a tree', async () => {
	const name = `views-${Date.now()}`;
	await api('POST', '/v1/snapshots', { sandbox: sb.id, name });
	const fork = await api('POST', `/v1/sandboxes/${sb.id}/fork`, { count: 1 });
	const child = fork.children[0].id || fork.children[0];
	made.push(child);
	const fromSnap = await api('POST', '/v1/sandboxes', { snapshot: name });
	made.push(fromSnap.id);
	const page = await openTab(sb.id, 'lineage');
	await page.locator('#lineage [data-snapshot]', { hasText: name }).waitFor({ timeout: WAIT });
	// sandbox → snapshot → created from it; sandbox → fork
	const self = page.locator('#lineage li[data-kind=sandbox]');
	assert.equal(await self.locator(':scope > ul > li[data-kind=fork] a[data-sandbox]').getAttribute('data-sandbox'), child);
	assert.equal(await self.locator(':scope > ul > li[data-kind=snapshot] li[data-kind=created] a').getAttribute('data-sandbox'), fromSnap.id);
	await shot(page, 'lineage');
	// The fork's own tree starts at its source.
	await self.locator(`a[data-sandbox="${child}"]`).click();
	await page.waitForFunction((id) => document.getElementById('d-id').textContent === id, child, { timeout: WAIT });
	await page.click('.tabs button[data-tab=lineage]');
	await page.locator('#lineage li[data-kind="forked from"] > a', { hasText: sb.id }).waitFor({ timeout: WAIT });
	await page.context().close();
	await api('DELETE', `/v1/snapshots/${encodeURIComponent(name)}`).catch(() => {});
});

test('processes: a background process log followed live; markup in it stays text', async () => {
	const p = await api('POST', `/v1/sandboxes/${sb.id}/processes`, { cmd: ['sh', '-c',
		'echo "<script>alert(3)</script>"; while [ ! -e /tmp/go ]; do sleep 0.1; done; echo after-follow'], tag: 'follow-me' });
	const page = await openTab(sb.id, 'processes');
	const tr = page.locator('#procs tr', { hasText: 'follow-me' });
	await tr.waitFor({ timeout: WAIT });
	await tr.locator('button[data-action=follow]').click();
	await page.waitForFunction(() => document.getElementById('p-output').textContent.includes('<script>alert(3)</script>'), null, { timeout: WAIT });
	assert.match(await page.textContent('#p-status'), new RegExp(`^following pid ${p.pid}`));
	// Output written after the follow began arrives on the same stream, then the exit.
	await sh(sb.id, 'touch /tmp/go');
	await page.waitForFunction(() => document.getElementById('p-output').textContent.includes('after-follow'), null, { timeout: WAIT });
	await page.waitForFunction((pid) => document.getElementById('p-status').textContent === `pid ${pid} exited with status 0`, p.pid, { timeout: WAIT });
	assert.equal(await page.locator('#p-output script').count(), 0);
	await shot(page, 'process-follow');
	assert.deepEqual(page.dialogs, []);
	await page.context().close();
});

test('files: a directory downloads as a tar', async () => {
	await sh(sb.id, 'mkdir -p /tmp/tree/sub && echo one > /tmp/tree/a.txt && echo two > /tmp/tree/sub/b.txt');
	const page = await openTab(sb.id, 'files');
	await page.fill('#f-path', '/tmp/tree');
	await page.click('#f-go');
	await page.locator('#files a.file', { hasText: 'a.txt' }).waitFor({ timeout: WAIT });
	const [dl] = await Promise.all([page.waitForEvent('download', { timeout: WAIT }), page.click('#f-tar')]);
	assert.equal(dl.suggestedFilename(), 'tree.tar');
	const names = execFileSync('tar', ['-tf', await dl.path()], { encoding: 'utf8' }).split('\n').filter(Boolean).map((n) => n.replace(/\/$/, ''));
	assert.deepEqual(names.sort(), ['tree', 'tree/a.txt', 'tree/sub', 'tree/sub/b.txt']);
	assert.equal(execFileSync('tar', ['-xOf', await dl.path(), 'tree/sub/b.txt'], { encoding: 'utf8' }), 'two\n');
	await page.context().close();
});

test('notebook: a cell prints 42, a matplotlib figure shows as a PNG, an error shows its traceback as text', async () => {
	const page = await openTab(sb.id, 'notebook');
	const cell = (i) => page.locator('#cells .cell').nth(i);
	await cell(0).locator('textarea').fill('x = 6 * 7\nprint(x)');
	await cell(0).locator('button[data-action=run]').click();
	// The first cell starts the interpreter (slow on a loaded machine): its output or its error.
	await cell(0).locator('pre.stdout, pre.err').first().waitFor({ timeout: 300000 });
	assert.equal(await cell(0).locator('pre.err').count(), 0, `the cell failed: ${await cell(0).locator('pre.err').allTextContents()}`);
	await cell(0).locator('pre.stdout', { hasText: '42' }).waitFor({ timeout: WAIT });
	assert.equal((await cell(0).locator('pre.stdout').textContent()).trim(), '42');
	await page.click('#nb-add');
	await cell(1).locator('textarea').fill('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [x, 1, x])\nplt.show()');
	await cell(1).locator('button[data-action=run]').click();
	const img = cell(1).locator('img');
	await img.waitFor({ timeout: WAIT });
	const src = await img.getAttribute('src');
	assert.match(src, /^data:image\/png;base64,iVBORw0KGgo/);
	assert.ok(await img.evaluate((i) => i.complete && i.naturalWidth > 100), 'the PNG decodes');
	await page.click('#nb-add');
	await cell(2).locator('textarea').fill('print("<b>not bold</b>")\n1 / 0');
	await cell(2).locator('button[data-action=run]').click();
	const err = cell(2).locator('pre.err');
	await err.waitFor({ timeout: WAIT });
	const tb = await err.textContent();
	assert.match(tb, /ZeroDivisionError/);
	assert.doesNotMatch(tb, /\x1b/, 'ANSI colours stripped');
	assert.equal((await cell(2).locator('pre.stdout').textContent()).trim(), '<b>not bold</b>');
	assert.equal(await cell(2).locator('b').count(), 0);
	await shot(page, 'notebook');
	assert.deepEqual(page.dialogs, []);
	await page.context().close();
});
