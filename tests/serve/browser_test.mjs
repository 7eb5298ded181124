// tarnn serve's page in a real browser (Debian's chromium, headless, driven by playwright-core):
// draws a stroke, sets the known rows, presses Complete, waits for the streamed completions,
// checks that every completion shows the known pixels exactly, samples a grid, and saves a
// screenshot. usage: node browser_test.mjs TARNN MODEL SCREENSHOT.png   (exit 77: skipped)
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';

const [bin, model, shot] = process.argv.slice(2);
const chromiumPath = process.env.CHROMIUM || '/usr/bin/chromium';
const skip = (why) => { console.log('skipped: ' + why); process.exit(77); };
if (!existsSync(chromiumPath)) skip(`no ${chromiumPath} (Debian: apt-get install chromium)`);
let chromium;
try {
  ({ chromium } = await import('playwright-core'));
} catch (e) {
  skip('no playwright-core (npm ci --prefix tests/serve)');
}

const fail = (why) => { console.log('FAIL: ' + why); process.exitCode = 1; };
const server = spawn(bin, ['serve', '--model', model, '--port', '0', '--threads', '2'],
                     { stdio: ['ignore', 'pipe', 'inherit'] });
const url = await new Promise((resolve, reject) => {
  const lines = createInterface({ input: server.stdout });
  lines.once('line', (l) => (l.includes('http://') ? resolve(l.split(' ').pop()) : reject(new Error(l))));
  server.once('exit', (code) => reject(new Error('tarnn serve exited ' + code)));
});
console.log('server at ' + url);

const browser = await chromium.launch({
  executablePath: chromiumPath, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1180, height: 1250 } });
  const problems = [];
  page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  page.on('console', (m) => { if (m.type() === 'error') problems.push('console: ' + m.text()); });
  await page.goto(url);
  await page.waitForSelector('body[data-state=ready]', { timeout: 30000 });

  // a "7" drawn over the cleared canvas: a bar, then a diagonal
  await page.click('#clear');
  const box = await page.locator('#draw').boundingBox();
  const at = (x, y) => [box.x + (x / 28) * box.width, box.y + (y / 28) * box.height];
  const stroke = [[7, 6], [20, 6], [21, 7], [16, 15], [13, 23]];
  await page.mouse.move(...at(...stroke[0]));
  await page.mouse.down();
  for (const p of stroke.slice(1)) await page.mouse.move(...at(...p), { steps: 12 });
  await page.mouse.up();
  await page.$eval('#keep-rows', (el) => { el.value = '12'; el.dispatchEvent(new Event('input')); });
  await page.selectOption('#samples', '8');
  const [image, mask] = await page.evaluate(() => [Array.from(tarnnPage.image), Array.from(tarnnPage.mask)]);
  const inked = image.filter((v, i) => v > 128 && mask[i]).length;
  if (inked < 10) fail(`the stroke left ${inked} bright known pixels`);
  if (mask.filter((m) => m).length !== 12 * 28) fail('the slider did not set 12 known rows');

  // the bits/dim shown is the stroke's (scored a moment after the stroke ends)
  await page.waitForFunction(() => tarnnPage.scored === tarnnPage.b64(tarnnPage.image), null,
                             { timeout: 60000 });
  await page.click('#complete');
  await page.waitForSelector('body[data-state=done]', { timeout: 180000 });
  const result = await page.evaluate(() => {
    const canvases = [...document.querySelectorAll('#completions canvas')];
    return {
      grows: tarnnPage.grows,
      running: tarnnPage.runningStats,
      stats: document.getElementById('complete-stats').textContent,
      bpd: document.getElementById('bpd').textContent,
      pixels: canvases.map((c) => Array.from(c.getContext('2d').getImageData(0, 0, 28, 28).data)),
    };
  });
  if (result.pixels.length !== 8) fail(`${result.pixels.length} completions shown, not 8`);
  if (result.grows < 10) fail(`only ${result.grows} streamed updates: the completions did not grow`);
  let wrong = 0, differ = 0;
  result.pixels.forEach((px) => {
    for (let i = 0; i < 784; ++i) {
      const shown = px[4 * i];
      if (mask[i] && (shown !== image[i] || px[4 * i + 1] !== image[i])) ++wrong;
      if (!mask[i] && shown !== result.pixels[0][4 * i]) ++differ;
    }
  });
  if (wrong) fail(`${wrong} known pixels differ from the drawing on the page`);
  if (!differ) fail('the 8 completions are all the same');
  if (!/images\/s/.test(result.stats)) fail('no images/s after the run: ' + result.stats);
  if (!/images\/s.*pixels\/s/.test(result.running)) fail('no rates while it ran: ' + result.running);
  const scored = await page.evaluate(async () => (await (await fetch('/api/score', {
    method: 'POST', body: JSON.stringify({ image: tarnnPage.b64(tarnnPage.image) }),
  })).json()).bits_per_dim.toFixed(3));
  if (result.bpd !== scored) fail(`bits/dim shown ${result.bpd}, the drawing's is ${scored}`);
  console.log(`completions: 8 shown, ${result.grows} streamed updates, known pixels exact; ${result.stats}; drawing ${result.bpd} bits/dim`);

  await page.selectOption('#sample-n', '16');
  await page.click('#sample');
  await page.waitForSelector('body[data-state=done]', { timeout: 180000 });
  const n = await page.locator('#sample-grid canvas').count();
  if (n !== 16) fail(`${n} samples shown, not 16`);
  console.log('samples: ' + (await page.textContent('#sample-stats')));
  if (shot) {
    await page.screenshot({ path: shot, fullPage: true });
    console.log('screenshot: ' + shot);
  }
  for (const p of problems) fail(p);
} catch (e) {
  fail(e.message);
} finally {
  await browser.close();
  server.kill('SIGTERM');
  const code = await new Promise((resolve) => server.once('exit', resolve));
  if (code !== 0) fail('tarnn serve exited ' + code + ' after SIGTERM');
}
console.log(process.exitCode ? 'browser test FAILED' : 'browser test passed');
