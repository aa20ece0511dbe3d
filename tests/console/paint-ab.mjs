// A/B first paint: same isolad, same 200 sandboxes; variant "main" serves /work/main/console's files.
import { chromium } from 'playwright-core';
import { readFileSync } from 'node:fs';
const URL_ = process.env.ISOLA_TEST_URL, TOKEN = process.env.ISOLA_TEST_TOKEN, N = Number(process.env.RUNS || 7);
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox'] });
const mainFiles = { '/': 'index.html', '/console/app.js': 'app.js', '/console/app.css': 'app.css' };
async function once(variant) {
	const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
	const page = await ctx.newPage();
	if (variant === 'main') await page.route('**/*', async (route) => {
		const u = new URL(route.request().url());
		const f = mainFiles[u.pathname];
		if (!f) return route.continue();
		const real = await route.fetch();
		await route.fulfill({ response: real, body: readFileSync('/work/main/console/' + f) , headers: { ...real.headers(), etag: 'x' + Math.random() } });
	});
	await page.goto(URL_ + '/');
	await page.evaluate((t) => sessionStorage.setItem('isola.token', t), TOKEN);
	await page.reload();
	await page.waitForFunction(() => window.isolaFirstPaint && document.querySelectorAll('#sandboxes tbody tr').length >= 200, null, { timeout: 60000 });
	const t = await page.evaluate(() => Math.round(window.isolaFirstPaint));
	await ctx.close();
	return t;
}
const res = { main: [], branch: [] };
for (let i = 0; i < N; i++) for (const v of ['main', 'branch']) res[v].push(await once(v));
const med = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
console.log(JSON.stringify({ main: res.main, branch: res.branch, median_main: med(res.main), median_branch: med(res.branch) }));
await browser.close();
