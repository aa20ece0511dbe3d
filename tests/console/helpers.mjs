// SPDX-License-Identifier: Apache-2.0
// helpers: what the console suites share: the API client, a signed-in chromium page, screenshots.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

export const URL_ = process.env.ISOLA_TEST_URL;
export const TOKEN = process.env.ISOLA_TEST_TOKEN;
export const SHOTS = process.env.ISOLA_TEST_SHOTS || tmpdir();
export const WAIT = 60000;

let browser;

// Debian's chromium, headless (call from before(); closeBrowser from after()).
export async function launchBrowser() {
	browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox'] });
}

export async function closeBrowser() {
	if (browser) await browser.close();
	browser = null;
}

export async function api(method, path, body, token = TOKEN) {
	const r = await fetch(URL_ + path, {
		method,
		headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
		body: body ? JSON.stringify(body) : undefined,
	});
	const text = await r.text();
	if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
	return text ? JSON.parse(text) : null;
}

export const createSandbox = (extra = {}) => api('POST', '/v1/sandboxes', { template: 'host', ...extra });

// A page signed in with token; dialogs (alert from injected markup) are recorded, not shown.
export async function signedIn(token = TOKEN) {
	const ctx = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
	const page = await ctx.newPage();
	page.dialogs = [];
	page.on('dialog', (d) => {
		page.dialogs.push(d.message());
		d.dismiss();
	});
	page.cspErrors = [];
	page.on('console', (m) => {
		if (/Content Security Policy/i.test(m.text())) page.cspErrors.push(m.text());
	});
	await page.goto(URL_ + '/');
	await page.fill('#token', token);
	// The form's submit handler prevents the navigation; without noWaitAfter the click also
	// waits (30 s at most) for the renderer to confirm that no navigation was scheduled,
	// which a renderer busy under CI's load did not do in time once (CI #4, 200 sandboxes).
	// Signing in is judged by the waits below.
	await page.click('#signin-form button[type=submit]', { noWaitAfter: true, timeout: WAIT });
	await page.waitForSelector('#app:not([hidden])', { timeout: WAIT });
	await page.waitForFunction(() => document.getElementById('live').textContent === 'live', null, { timeout: WAIT });
	return page;
}

export const row = (page, id) => page.locator(`#sandboxes tr[data-id="${id}"]`);
export const shot = (page, name) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
