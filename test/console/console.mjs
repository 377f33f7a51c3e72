// Browser test of toolgate's web console, driven by TestConsoleBrowser
// (test/e2e/console_browser_test.go), which starts the gateway and passes:
//   CONSOLE_URL  the console (http://127.0.0.1:PORT/ui/)
//   MCP_URL      the gateway's MCP endpoint
//   CANARY       a secret the gateway knows, which no page may show
//   SHOT_DIR     where to save screenshots (desktop-*.png, phone-*.png)
//   DOCS_DIR     optional: also save one desktop screenshot per page here
//                (make screenshots: docs/console/)
//   CHROMIUM     the browser (default /usr/bin/chromium, Debian's)
// It prints one line per step and exits non-zero on the first failure.
import { chromium } from 'playwright-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { mkdirSync, copyFileSync } from 'node:fs';
import { join } from 'node:path';

const base = process.env.CONSOLE_URL;
const canary = process.env.CANARY;
const shots = process.env.SHOT_DIR;
const docs = process.env.DOCS_DIR || '';
if (!base || !canary || !shots || !process.env.MCP_URL) {
  console.error('console.mjs: CONSOLE_URL, MCP_URL, CANARY and SHOT_DIR are required');
  process.exit(2);
}
mkdirSync(shots, { recursive: true });
if (docs) { mkdirSync(docs, { recursive: true }); }
const timeout = 30000;
const log = (m) => console.log('console-e2e: ' + m);
const pages = ['servers', 'activity', 'detections', 'pins', 'search', 'charts'];
const paths = { servers: '', activity: 'activity', detections: 'detections', pins: 'pins', search: 'search?q=delete+entities+observations', charts: 'charts' };

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
const mcp = new Client({ name: 'console-e2e', version: '1' });
const errors = [];
let failed = false;
try {
  await mcp.connect(new StreamableHTTPClientTransport(new URL(process.env.MCP_URL)));
  const callTool = async (tool, args) => {
    const r = await mcp.callTool({ name: 'call_tool', arguments: { tool_name: tool, arguments: args } });
    return { isError: !!r.isError, text: (r.content || []).map((c) => c.text || '').join('') };
  };
  await mcp.callTool({ name: 'search_tools', arguments: { query: 'echo a message, add two numbers', top_k: 20 } });
  await mcp.callTool({ name: 'search_tools', arguments: { query: 'fails with a protocol error', top_k: 5 } });

  const desktop = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
  const pp = await phone.newPage();
  pp.setDefaultTimeout(timeout);
  // A page at phone width: no wider than the window, no secret, captured.
  const phoneShot = async (name) => {
    await pp.goto(base + paths[name]);
    await pp.getByRole('heading', { level: 1 }).waitFor();
    const wide = await pp.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    if (wide > 1) { throw new Error(name + ' is ' + wide + ' px wider than a phone'); }
    if ((await pp.content()).includes(canary)) { throw new Error(name + ' (phone) shows the secret'); }
    await pp.screenshot({ path: join(shots, 'phone-' + name + '.png') });
  };
  const page = await desktop.newPage();
  page.setDefaultTimeout(timeout);
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') { errors.push(m.text()); } });
  const noSecret = async (what) => {
    const html = await page.content();
    if (html.includes(canary)) { throw new Error(what + ' shows the secret'); }
  };
  const shot = async (name) => {
    const file = join(shots, 'desktop-' + name + '.png');
    await page.screenshot({ path: file, fullPage: false });
    if (docs) { copyFileSync(file, join(docs, name + '.png')); }
  };

  // Servers: every configured server is listed; the lazy one starts with its button.
  await page.goto(base);
  for (const s of ['everything', 'memory', 'canary']) {
    await page.getByRole('rowheader', { name: s, exact: true }).waitFor();
  }
  await page.keyboard.press('Tab');
  if (await page.evaluate(() => document.activeElement.textContent) !== 'Skip to content') {
    throw new Error('the first Tab does not reach the skip link');
  }
  const memory = page.locator('tr[data-server="memory"]');
  await memory.getByRole('button', { name: 'start memory' }).click();
  await page.getByRole('status').filter({ hasText: 'memory: start done' }).waitFor();
  await memory.locator('.state-idle, .state-running').waitFor();
  await noSecret('servers');
  log('servers listed; memory started with its button');

  // Live activity: a call made through an MCP client appears, with its filter steps.
  await page.goto(base + 'activity');
  await page.locator('[data-live-state]', { hasText: 'Live' }).waitFor();
  const sum = await callTool('everything__get-sum', { a: 2, b: 3 });
  if (sum.isError) { throw new Error('get-sum failed: ' + sum.text); }
  const allowed = page.locator('li.ev', { hasText: 'everything__get-sum' }).filter({ has: page.locator('.badge-allow') }).first();
  await allowed.waitFor();
  await allowed.locator('summary').focus();
  await page.keyboard.press('Enter'); // details open from the keyboard
  await allowed.getByRole('table', { name: 'Pipeline stages' }).waitFor();
  await allowed.getByRole('cell', { name: 'dev.toolgate/version_pinning' }).waitFor();
  log('a call made through an MCP client appeared live, with its pipeline stages');

  // A blocked call shows its reason: the echo tool's definition differs from its pin.
  const blocked = await callTool('everything__echo', { message: 'the secret is ' + canary });
  if (!blocked.isError || !blocked.text.includes('version_pinning')) { throw new Error('echo was not refused by its pin: ' + blocked.text); }
  await callTool('canary__fail_rpc', {});
  const refusal = page.locator('li.ev', { hasText: 'everything__echo' }).filter({ has: page.locator('.badge-block') }).first();
  await refusal.locator('.reason', { hasText: 'version_pinning' }).waitFor();
  // The canary server's error carries the secret: the row shows it masked.
  const failedRow = page.locator('li.ev', { hasText: 'canary__fail_rpc' }).filter({ has: page.locator('.badge-error') }).first();
  await failedRow.locator('summary').click();
  await failedRow.locator('dd', { hasText: '[REDACTED]' }).first().waitFor();
  await noSecret('activity');
  // Drawn again after the calls, a call's row lists every middleware with its final verdict (output_poisoning judged the result).
  await page.reload();
  const reloaded = page.locator('li.ev', { hasText: 'everything__get-sum' }).filter({ has: page.locator('.badge-allow') }).first();
  await reloaded.locator('summary').click();
  await reloaded.getByRole('row', { name: /dev.toolgate\/output_poisoning call pass/ }).waitFor();
  await shot('activity');
  log('the blocked call appeared with its reason (version_pinning)');

  // The filter narrows the list to one tool and one decision.
  await page.getByLabel('Tool').fill('echo');
  await page.getByLabel('Decision').selectOption('block');
  await page.getByRole('button', { name: 'Apply' }).click();
  await page.locator('li.ev', { hasText: 'everything__echo' }).first().waitFor();
  if (await page.locator('li.ev', { hasText: 'get-sum' }).count() !== 0) { throw new Error('the filter kept another tool'); }
  log('filters apply');

  await page.goto(base + 'detections');
  await page.locator('li.ev', { hasText: 'version_pinning' }).first().waitFor();
  await noSecret('detections');
  await shot('detections');

  // Pins: side-by-side diff, Trust, and the next call passes.
  await page.goto(base + 'pins');
  const section = page.getByRole('region', { name: /everything__echo/ }).first();
  await page.locator('table.diff tr.d-changed').first().waitFor();
  await noSecret('pins');
  await shot('pins');
  await phoneShot('pins');
  await page.getByRole('button', { name: 'Trust the new definition of everything__echo' }).click();
  await page.locator('.done', { hasText: 'everything/echo: pinned sha256:' }).waitFor();
  const passed = await callTool('everything__echo', { message: 'hello' });
  if (passed.isError) { throw new Error('echo still refused after trust: ' + passed.text); }
  await page.goto(base + 'activity?tool=echo&decision=allow');
  await page.locator('li.ev', { hasText: 'everything__echo' }).filter({ has: page.locator('.badge-allow') }).first().waitFor();
  void section;
  log('trusted the changed pin with the button; the next call passed');

  await page.goto(base + paths.search);
  await page.getByRole('table', { name: 'Ranked tools' }).getByText('memory__add_observations').first().waitFor();
  const hidden = page.getByRole('table', { name: 'Tools hidden by filters' }).getByRole('row', { name: /memory__delete_entities/ });
  await hidden.getByRole('cell', { name: 'dev.toolgate/access_control' }).waitFor();
  await noSecret('search');
  await shot('search');
  await page.goto(base + 'search?q=canary+leak+' + encodeURIComponent(canary));
  await page.getByRole('table', { name: 'Ranked tools' }).waitFor();
  await noSecret('search for the secret');

  await page.goto(base + 'charts');
  await page.getByRole('heading', { name: 'Calls per second' }).waitFor();
  await page.getByRole('img', { name: /p50 and p99/ }).waitFor();
  await noSecret('charts');
  await shot('charts');
  await page.goto(base);
  await page.getByRole('rowheader', { name: 'everything', exact: true }).waitFor();
  await shot('servers');
  log('the search playground shows ranked tools and the ones access_control hid; charts and servers captured at 1280x800');

  // Phone width: every page (the Pins page was captured with its diff).
  for (const name of pages) {
    if (name !== 'pins') { await phoneShot(name); }
  }
  log('every page fits 390x844');

  // Every SSE message the console keeps, replayed from the start.
  const ctl = new AbortController();
  const res = await fetch(base + 'api/stream?after=0', { signal: ctl.signal });
  const reader = res.body.getReader();
  let text = '';
  const until = Date.now() + 3000;
  while (Date.now() < until) {
    const r = await Promise.race([reader.read(), new Promise((ok) => setTimeout(() => ok({ wait: true }), 500))]);
    if (r.done) { break; }
    if (r.value) { text += new TextDecoder().decode(r.value); }
  }
  ctl.abort();
  const n = (text.match(/^data: /gm) || []).length;
  if (n < 5) { throw new Error('the stream replayed only ' + n + ' messages'); }
  if (text.includes(canary)) { throw new Error('an SSE message holds the secret'); }
  if (!text.includes('[REDACTED')) { throw new Error('no SSE message shows a mask: the secret never reached the console, so the check proves nothing'); }
  log(n + ' SSE messages checked: no secret');

  if (errors.length) { throw new Error('browser errors: ' + errors.join('; ')); }
  log('PASS');
} catch (e) {
  failed = true;
  console.error('console-e2e: FAIL: ' + (e && e.stack ? e.stack : e));
} finally {
  await mcp.close().catch(() => {});
  await browser.close();
}
process.exit(failed ? 1 : 0);
