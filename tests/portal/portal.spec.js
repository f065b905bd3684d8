// The developer center as a person uses it, in a real browser against a
// real stack (tests/portal/run starts it): invite → password → key → a real
// API call moves the quota and usage → rotate → old key 401 → revoke;
// playground; webhook test events verified with both signature schemes,
// also during a secret rotation; tasks with their filters and a failed
// task's error; the keyboard alone; a page opened as localhost; a
// cross-origin POST refused; wrong passwords reach the 429, in Chinese.
// Throughout, in every browser context the suite opens: no request leaves
// the origin and no console error. On every page every field has an
// accessible name. Screenshots of each page at desktop size and 375 px.
const { test, expect } = require('@playwright/test');
const crypto = require('node:crypto');
const http = require('node:http');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const BASE = process.env.EQ_PORTAL_BASE;
const INVITE = process.env.EQ_PORTAL_INVITE;
const SHOTS = process.env.EQ_PORTAL_SCREENSHOTS;
const EMAIL = 'ann@example.com';
const PASSWORD = 'a long enough passphrase';

// ---------------------------------------------------------------- helpers

// A webhook receiver on 127.0.0.1: keeps every request with its raw body.
function startReceiver() {
  const got = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      got.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.end('ok');
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () =>
    resolve({ server, got, url: `http://127.0.0.1:${server.address().port}/hook` })));
}

// X-Service-Signature: sha256=<hex HMAC of the body> keyed with the secret
// string as printed (GitHub style).
function serviceSignatureOk(secret, h, body) {
  const want = 'sha256=' + crypto.createHmac('sha256', secret).update(body).digest('hex');
  return h['x-service-signature'] === want;
}

// Standard Webhooks: v1,<base64 HMAC of "id.timestamp.body"> keyed with the
// base64-decoded part after whsec_; the header may hold several entries.
function standardSignatureOk(secret, h, body) {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const signed = `${h['webhook-id']}.${h['webhook-timestamp']}.${body}`;
  const want = 'v1,' + crypto.createHmac('sha256', key).update(signed).digest('base64');
  return h['webhook-signature'].split(' ').includes(want);
}

// Every browser context the suite opens is watched the same way: a
// request to anywhere but `origin` (the context's own page origin) or a
// console error, page error included, is a problem the afterEach hook
// reports. A test that provokes a refusal on purpose (Chromium logs a 4xx
// answer to fetch() as "Failed to load resource") lists the messages it
// expects in the watcher's `allowed`, for as long as it expects them.
const problems = [];
// Every link token the suite handles: none may ever appear in the path or
// query of a request (where proxies and access logs keep it), only in a
// fragment the browser never sends, or a POST body.
const linkTokens = [INVITE.split('/').pop()];

function watch(context, name, origin = BASE) {
  const watcher = { allowed: [] };
  context.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(origin + '/') && !u.startsWith('data:')) {
      problems.push(`${name}: a request left the origin: ${u}`);
    }
    if (!u.startsWith('data:')) {
      const sent = new URL(u);
      for (const token of linkTokens) {
        if ((sent.pathname + sent.search).includes(token)) {
          problems.push(`${name}: a link token in a request's URL: ${r.method()} ${sent.pathname}`);
        }
      }
    }
  });
  context.on('console', (m) => {
    if (m.type() !== 'error' || watcher.allowed.some((re) => re.test(m.text()))) return;
    problems.push(`${name}: console error: ${m.text()}`);
  });
  context.on('weberror', (e) => problems.push(`${name}: page error: ${e.error()}`));
  return watcher;
}

async function watchedContext(browser, name, options = {}, origin = BASE) {
  const context = await browser.newContext({ locale: 'en-US', ...options });
  return { context, watcher: watch(context, name, origin) };
}

const refused = (...statuses) =>
  new RegExp(`^Failed to load resource: the server responded with a status of (${statuses.join('|')})`);

// docs/contract.md §9: every field has a label. Every input, select and
// textarea on the page must have an accessible name as Chromium computes it
// (from a <label>, aria-label or aria-labelledby), not just a placeholder.
async function expectLabelled(page, name) {
  const fields = page.locator('input:not([type=hidden]), select, textarea');
  const n = await fields.count();
  for (let i = 0; i < n; i++) {
    const html = await fields.nth(i).evaluate((el) => el.outerHTML.slice(0, 120));
    await expect(fields.nth(i), `${name}: ${html} has no label`).toHaveAccessibleName(/\S/,
      { timeout: 1000 });
  }
}

async function shoot(page, name) {
  await expectLabelled(page, name);
  await page.screenshot({ path: path.join(SHOTS, `${name}-desktop.png`), fullPage: true });
  await page.setViewportSize({ width: 375, height: 812 });
  await page.screenshot({ path: path.join(SHOTS, `${name}-375.png`), fullPage: true });
  // Nothing may spill sideways at 375 px: the page itself never scrolls
  // horizontally (wide tables scroll inside their own box).
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth
    - document.documentElement.clientWidth);
  expect(overflow, `${name} is wider than 375 px`).toBeLessThanOrEqual(0);
  await page.setViewportSize({ width: 1280, height: 800 });
}

async function apiCall(request, key, pathname, body) {
  return request.post(BASE + pathname, {
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    data: body,
  });
}

// A fresh invitation from eqctl for `email`: its link, and its token
// registered with the watchers.
function invite(email) {
  const out = execFileSync(process.env.EQ_EQCTL, ['account', 'invite', email, '--json'],
    { env: process.env }).toString();
  const link = JSON.parse(out).link;
  linkTokens.push(link.split('/').pop());
  return link;
}

// ---------------------------------------------------------------- the suite

test.describe.serial('developer center', () => {
  let context;
  let mainWatch;
  let page;
  let receiver;
  let apiKey = '';
  let secret = '';

  test.beforeAll(async ({ browser }) => {
    receiver = await startReceiver();
    ({ context, watcher: mainWatch } = await watchedContext(browser, 'main'));
    page = await context.newPage();
  });

  test.afterAll(async () => {
    receiver.server.close();
    await context.close();
  });

  test.afterEach(() => {
    expect(problems, 'requests that left the origin, console errors').toEqual([]);
  });

  test('the root redirects to the developer center, which sends its security headers', async ({ request }) => {
    const root = await request.get(BASE + '/', { maxRedirects: 0 });
    expect(root.status()).toBe(302);
    expect(root.headers()['location']).toBe('/portal/');
    const pageRes = await request.get(BASE + '/portal/');
    expect(pageRes.headers()['content-security-policy']).toContain("default-src 'self'");
    expect(pageRes.headers()['x-frame-options']).toBe('DENY');
    expect(pageRes.headers()['referrer-policy']).toBe('same-origin');
    const json = await request.get(BASE + '/portal/api/me');
    expect(json.headers()['x-content-type-options']).toBe('nosniff');
    expect(json.headers()['cache-control']).toBe('no-store');
    await page.goto(BASE + '/portal/#/signin');
    await expect(page.getByRole('heading', { name: 'Sign in' })).toBeVisible();
    await shoot(page, 'signin');
  });

  test('a signed-out first load makes no request that fails', async ({ browser }) => {
    // The page asks who is signed in of /portal/api/session, which answers
    // 200 {signed_in: false}: a fresh visitor's console stays clean (the
    // watcher), and no answer is an error.
    const { context: ctx } = await watchedContext(browser, 'first load');
    const failed = [];
    ctx.on('response', (r) => { if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`); });
    ctx.on('requestfailed', (r) => failed.push(`failed: ${r.url()}`));
    const p = await ctx.newPage();
    const asked = p.waitForResponse((r) => r.url().endsWith('/portal/api/session'));
    await p.goto(BASE + '/portal/');
    expect((await asked).status()).toBe(200);
    await expect(p.getByRole('heading', { name: 'Sign in' })).toBeVisible();
    await expect(p.getByText('Accounts are by invitation')).toBeVisible();
    expect(failed).toEqual([]);
    await ctx.close();
  });

  test('an invitation opened in a tab still loading another page lands on its form, every time', async ({ browser }) => {
    // The tab opens the Overview signed out; before the answer to "who is
    // signed in?" arrives, the invitation is opened in it. The overtaken
    // render gets its answer afterwards and must neither navigate (to the
    // sign-in form) nor draw. Held: that answer waits until the invitation's
    // form is shown; free: the two race as they will.
    for (let run = 0; run < 8; run++) {
      const hold = run % 2 === 0;
      // Unique per run of the suite too (--repeat-each): an invitation is
      // refused for an email that has an account.
      const email = `tab${run}.${crypto.randomBytes(4).toString('hex')}@example.com`;
      const link = invite(email);
      const token = link.split('/').pop();
      const { context: ctx } = await watchedContext(browser, `tab ${run}`);
      const p = await ctx.newPage();
      let release = () => {};
      const gate = new Promise((resolve) => { release = resolve; });
      let held = false;
      await p.route(/\/portal\/api\/(me|session)$/, async (route) => {
        if (hold && !held) { held = true; await gate; }
        await route.continue();
      });
      // Where the address bar was when the page asked about the link.
      const addressAtCheck = [];
      await p.route(/\/portal\/api\/links\//, async (route) => {
        addressAtCheck.push(await p.evaluate(() => location.href));
        await route.continue();
      });
      await p.goto(BASE + '/portal/#/overview', { waitUntil: hold ? 'load' : 'commit' });
      await p.goto(link);
      await expect(p.getByText(`Choose a password for ${email}.`), `run ${run}`).toBeVisible();
      expect(p.url()).not.toContain(token);
      if (hold) {
        const late = p.waitForResponse(/\/portal\/api\/(me|session)$/);
        release();
        await late;
      }
      await p.waitForTimeout(200);
      await expect(p.getByText(`Choose a password for ${email}.`), `run ${run}`).toBeVisible();
      await expect(p.getByRole('heading', { name: 'Sign in' }), `run ${run}`).toHaveCount(0);
      expect(addressAtCheck.length, `run ${run}`).toBeGreaterThan(0);
      for (const href of addressAtCheck) expect(href, `run ${run}`).not.toContain(token);
      await p.getByLabel('Password', { exact: true }).fill(PASSWORD);
      await p.getByLabel('Password again').fill(PASSWORD);
      await p.getByRole('button', { name: 'Set password and sign in' }).click();
      await expect(p.getByRole('heading', { name: 'Overview' }), `run ${run}`).toBeVisible();
      await expect(p.locator('[data-mode=fast]')).toHaveText('100');
      await ctx.close();
    }
  });

  test('an invitation sets the password and signs in', async () => {
    await page.goto(INVITE);
    await expect(page.getByText(`Choose a password for ${EMAIL}.`)).toBeVisible();
    // The token left the address bar before the page sent anything.
    expect(page.url()).not.toContain(INVITE.split('/').pop());
    await shoot(page, 'welcome');
    await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
    await page.getByLabel('Password again').fill(PASSWORD);
    await page.getByRole('button', { name: 'Set password and sign in' }).click();
    await expect(page.getByRole('heading', { name: 'Overview' })).toBeVisible();
    expect(page.url()).not.toContain('welcome');
    await expect(page.locator('[data-mode=fast]')).toHaveText('100');
    // The session cookie is HttpOnly and SameSite=Strict, scoped to /portal.
    const cookie = (await context.cookies()).find((c) => c.name === 'eq_session');
    expect(cookie.httpOnly).toBe(true);
    expect(cookie.sameSite).toBe('Strict');
    expect(cookie.path).toBe('/portal');
    // The link is used up.
    const again = await page.request.post(BASE + '/portal/api/links/check', {
      headers: { Origin: BASE, 'Content-Type': 'application/json' },
      data: { token: INVITE.split('/').pop() },
    });
    expect(again.status()).toBe(404);
  });

  test('a key is shown once and a real call with it moves quota and usage', async ({ request }) => {
    await page.getByRole('link', { name: 'Keys' }).click();
    await page.getByLabel('Name').fill('laptop');
    await page.getByRole('button', { name: 'Create key' }).click();
    const shown = page.locator('#new-key input');
    await expect(shown).toHaveValue(/^eq_live_[A-Za-z0-9_-]{43}$/);
    apiKey = await shown.inputValue();
    await expect(page.locator('#key-table')).toContainText('laptop');
    await shoot(page, 'keys');
    // Only the prefix is listed, never the key.
    expect(await page.locator('#key-table').textContent()).not.toContain(apiKey);

    const r = await apiCall(request, apiKey, '/api/v1/reply',
      { mode: 'fast', message: '今天被老板骂了，好难过', reply_count: 2 });
    expect(r.status()).toBe(200);
    const a = await apiCall(request, apiKey, '/api/v1/reply/async',
      { mode: 'standard', message: '周末有空吗？想约你看电影', webhook_url: receiver.url });
    expect(a.status()).toBe(200);

    await page.getByRole('link', { name: 'Overview' }).click();
    await expect(page.locator('[data-mode=fast]')).toHaveText('99');
    await expect(page.locator('[data-mode=standard]')).toHaveText('99');
    await expect(page.locator('#calls-today')).toHaveText(/^2/);
    // The monthly volume (docs/contract.md §11): two units of a new
    // account's 100,000, and the first of next month (UTC) when it resets.
    const next = new Date();
    next.setUTCDate(1);
    next.setUTCMonth(next.getUTCMonth() + 1);
    const resets = next.toLocaleDateString('en-GB', {dateStyle: 'medium', timeZone: 'UTC'});
    await expect(page.locator('#monthly'))
        .toHaveText(`2 of 100,000 units used; resets ${resets} (UTC)`);
    await shoot(page, 'overview');

    await page.getByRole('link', { name: 'Usage' }).click();
    await expect(page.locator('#usage-totals tr[data-mode=fast] td').first()).toHaveText('1');
    await expect(page.locator('#usage-totals tr[data-mode=standard] td').first()).toHaveText('1');
    // Tokens of the sync call (recorded with the close of its charge) and of
    // the async task (with its success) reach the record too.
    await expect(page.locator('#usage-totals tr[data-mode=fast] td').nth(2)).not.toHaveText('0');
    await expect(page.locator('#usage-totals tr[data-mode=standard] td').nth(2)).not.toHaveText('0');
    // One bar per mode and day in the calls and tokens charts (today:
    // fast and standard), none in the errors chart yet.
    await expect(page.locator('svg.chart[data-series=calls] rect')).toHaveCount(2);
    await expect(page.locator('svg.chart[data-series=tokens] rect')).toHaveCount(2);
    await expect(page.locator('svg.chart[data-series=errors] rect')).toHaveCount(0);
    await expect(page.locator('svg.chart[data-series=calls] rect[data-mode=fast] title'))
      .toHaveText(/fast: 1$/);
  });

  test('rotating a key stops the old one; revoking stops the new one', async ({ request }) => {
    await page.getByRole('link', { name: 'Keys' }).click();
    page.once('dialog', (d) => d.accept());
    await page.locator('#key-table tr', { hasText: 'laptop' }).getByRole('button', { name: 'Rotate' }).click();
    const shown = page.locator('#new-key input');
    await expect(shown).not.toHaveValue(apiKey);
    await expect(shown).toHaveValue(/^eq_live_/);
    const rotated = await shown.inputValue();
    const old = await apiCall(request, apiKey, '/api/v1/analyze', { message: '你好' });
    expect(old.status()).toBe(401);
    const fresh = await apiCall(request, rotated, '/api/v1/analyze', { message: '你好' });
    expect(fresh.status()).toBe(200);

    page.once('dialog', (d) => d.accept());
    await page.locator('#key-table tr', { hasText: 'active' }).getByRole('button', { name: 'Revoke' }).click();
    await expect(page.locator('#key-table')).not.toContainText('active');
    const revoked = await apiCall(request, rotated, '/api/v1/analyze', { message: '你好' });
    expect(revoked.status()).toBe(401);
    // A new key for what follows. The box still shows the rotated (now
    // revoked) key until the new one replaces it: wait for that.
    await page.getByLabel('Name').fill('ci');
    await page.getByRole('button', { name: 'Create key' }).click();
    await expect(page.locator('#new-key input')).not.toHaveValue(rotated);
    await expect(page.locator('#new-key input')).toHaveValue(/^eq_live_/);
    apiKey = await page.locator('#new-key input').inputValue();
    expect((await apiCall(request, apiKey, '/api/v1/analyze', { message: '你好' })).status())
      .toBe(200);
  });

  test('the playground shows replies and the analysis, and charges the account', async () => {
    await page.getByRole('link', { name: 'Playground' }).click();
    await expect(page.getByText('charges 1 unit')).toBeVisible();
    await page.getByLabel('Message they sent you').fill('我们还是做朋友吧');
    await page.getByLabel('Scene (optional)').selectOption('breakup');
    await page.getByLabel('Mode').selectOption('standard');
    await page.getByLabel('Replies').fill('3');
    await page.getByRole('button', { name: 'Get replies' }).click();
    await expect(page.locator('ol.replies li')).toHaveCount(3);
    await expect(page.locator('#analysis')).toContainText('Emotion');
    await expect(page.getByText(/Charged 1 standard unit/)).toBeVisible();
    await shoot(page, 'playground');
    await page.getByRole('link', { name: 'Overview' }).click();
    await expect(page.locator('[data-mode=standard]')).toHaveText('98');
  });

  test('webhook test events verify with both schemes, also during a secret rotation', async () => {
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.getByLabel('Default webhook URL').fill(receiver.url);
    // Where every result goes changes only with the password.
    await page.getByLabel('Your password (to change the URL)').fill(PASSWORD);
    await page.getByRole('button', { name: 'Save' }).click();
    await expect(page.locator('#toast')).toHaveText('Saved.');
    // The secret is shown only after the password; a wrong one is refused.
    mainWatch.allowed = [refused(403)];
    await page.getByLabel('Password', { exact: true }).fill('not my password at all');
    await page.getByRole('button', { name: 'Show secret' }).click();
    await expect(page.getByRole('alert')).toHaveText('Wrong password.');
    mainWatch.allowed = [];
    await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
    await page.getByRole('button', { name: 'Show secret' }).click();
    const secretBox = page.locator('#secret-out input').first();
    await expect(secretBox).toHaveValue(/^whsec_/);
    secret = await secretBox.inputValue();

    const before = receiver.got.length;
    await page.getByRole('button', { name: 'Send test event' }).click();
    await expect(page.locator('#test-out')).toHaveAttribute('data-status', 'delivered');
    const test1 = receiver.got.slice(before).find((g) => JSON.parse(g.body).event === 'test');
    expect(test1).toBeTruthy();
    expect(serviceSignatureOk(secret, test1.headers, test1.body)).toBe(true);
    expect(standardSignatureOk(secret, test1.headers, test1.body)).toBe(true);

    // Rotation: the new secret signs X-Service-Signature; webhook-signature
    // carries both, so a receiver holding either still verifies.
    page.once('dialog', (d) => d.accept());
    await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    await expect(page.locator('#secret-out input')).toHaveCount(2);
    const fresh = await page.locator('#secret-out input').first().inputValue();
    expect(fresh).not.toBe(secret);
    expect(await page.locator('#secret-out input').nth(1).inputValue()).toBe(secret);
    const mark = receiver.got.length;
    await page.getByRole('button', { name: 'Send test event' }).click();
    await expect(page.locator('#test-out')).toContainText('delivered');
    await expect.poll(() => receiver.got.length).toBeGreaterThan(mark);
    const test2 = receiver.got[receiver.got.length - 1];
    expect(test2.headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(serviceSignatureOk(fresh, test2.headers, test2.body)).toBe(true);
    expect(standardSignatureOk(fresh, test2.headers, test2.body)).toBe(true);
    expect(standardSignatureOk(secret, test2.headers, test2.body)).toBe(true);

    // The delivery log shows every delivery, with attempts; replay sends again.
    await expect(page.locator('#deliveries tbody tr')).toHaveCount(3);  // two tests + the task's
    await page.locator('#deliveries tbody tr').first().getByRole('button', { name: 'Details' }).click();
    await expect(page.locator('#delivery-detail')).toContainText('200');
    const mark2 = receiver.got.length;
    await page.getByRole('button', { name: 'Replay' }).click();
    await expect(page.locator('#toast')).toHaveText('Replayed: due now.');
    await expect.poll(() => receiver.got.length).toBeGreaterThan(mark2);
    await shoot(page, 'webhooks');
  });

  test('tasks filter by status and mode; a task shows its result and webhook, or its error', async ({ request }) => {
    // A perfect task fails for real: this stack's perfect worker runs the
    // llm engine against a model server that is not there.
    const created = await apiCall(request, apiKey, '/api/v1/reply/async',
      { mode: 'perfect', message: '我们分手吧' });
    expect(created.status()).toBe(200);
    const failedId = (await created.json()).data.task_id;
    await expect.poll(async () => {
      const r = await request.get(BASE + '/api/v1/task/' + failedId,
        { headers: { Authorization: `Bearer ${apiKey}` } });
      return (await r.json()).data.status;
    }, { timeout: 30_000 }).toBe('failed');

    await page.getByRole('link', { name: 'Tasks' }).click();
    const rows = page.locator('#task-list tbody tr');
    await expect(rows).toHaveCount(2);
    const filter = async (status, mode) => {
      await page.getByLabel('Status').selectOption(status);
      await page.getByLabel('Mode').selectOption(mode);
      await page.getByRole('button', { name: 'Filter' }).click();
    };
    await filter('', 'perfect');
    await expect(rows).toHaveCount(1);
    await expect(rows.first()).toContainText(failedId);
    await expect(rows.first()).toContainText('failed');
    await filter('', 'standard');
    await expect(rows).toHaveCount(1);
    await expect(rows.first()).toContainText('succeeded');
    await filter('', 'fast');
    await expect(page.getByText('No tasks match.')).toBeVisible();
    await filter('failed', 'standard');
    await expect(page.getByText('No tasks match.')).toBeVisible();
    await filter('failed', '');
    await expect(rows).toHaveCount(1);
    await expect(rows.first()).toContainText(failedId);
    await filter('', '');
    await expect(rows).toHaveCount(2);
    await shoot(page, 'tasks');

    await page.locator('#task-list tr', { hasText: 'succeeded' }).getByRole('link').click();
    await expect(page.locator('ol.replies li').first()).toBeVisible();
    await expect(page.getByText(receiver.url)).toBeVisible();
    await shoot(page, 'task');

    // The failed task: its status, and its error said in the page's words
    // (the unit came back), with the code.
    await page.getByRole('link', { name: /Back/ }).click();
    await page.locator('#task-list a', { hasText: failedId }).click();
    await expect(page.locator('.badge.failed')).toBeVisible();
    await expect(page.getByRole('alert')).toHaveText('500: generation failed; the unit was refunded');
    await expect(page.locator('ol.replies')).toHaveCount(0);
    await shoot(page, 'task-failed');

    // The Overview lists it among the recent errors, and the Usage page
    // counts it as an error of today: charged, then refunded.
    await page.getByRole('link', { name: 'Overview' }).click();
    await expect(page.locator('ul.errors')).toContainText(failedId);
    await page.getByRole('link', { name: 'Usage' }).click();
    const perfect = page.locator('#usage-totals tr[data-mode=perfect] td');
    await expect(perfect.nth(0)).toHaveText('1');
    await expect(perfect.nth(1)).toHaveText('1');
    await expect(page.locator('svg.chart[data-series=errors] rect')).toHaveCount(1);
    await expect(page.locator('svg.chart[data-series=errors] rect[data-mode=perfect]')).toHaveCount(1);
    await expect(page.locator('#errors-explained')).toContainText('refunded');
    await shoot(page, 'usage');
  });

  test('the page speaks Chinese and keeps working at 375 px with the keyboard', async () => {
    await page.getByLabel('Language').selectOption('zh');
    await page.getByRole('link', { name: '概览' }).click();
    await expect(page.getByRole('heading', { name: '概览' })).toBeVisible();
    await shoot(page, 'overview-zh');
    await page.setViewportSize({ width: 375, height: 812 });
    // Keyboard only: tab to the Keys link and follow it.
    await page.getByRole('link', { name: '密钥' }).focus();
    await page.keyboard.press('Enter');
    await expect(page.getByRole('heading', { name: '密钥' })).toBeVisible();
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.getByLabel('语言').selectOption('en');
  });

  test('with the keyboard alone: Tab through the navigation, create a key with Enter, copy it', async () => {
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: BASE });
    await page.goto(BASE + '/portal/#/overview');
    await expect(page.getByRole('heading', { name: 'Overview' })).toBeVisible();
    await page.reload();  // focus back at the top of a fresh document
    await expect(page.getByRole('heading', { name: 'Overview' })).toBeVisible();
    const focused = () => page.evaluate(() => {
      const e = document.activeElement;
      return e.tagName === 'SELECT' ? '#' + e.id : e.textContent.trim();
    });
    const order = [];
    for (let i = 0; i < 10; i++) {
      await page.keyboard.press('Tab');
      order.push(await focused());
    }
    expect(order).toEqual(['Skip to content', 'EQ Reply', 'Overview', 'Keys', 'Usage',
      'Playground', 'Webhooks', 'Tasks', 'Account', '#lang']);

    // Back to Keys and follow it: the new page's heading takes the focus,
    // and the next Tab is the form's first field.
    for (let i = 0; i < 6; i++) await page.keyboard.press('Shift+Tab');
    expect(await focused()).toBe('Keys');
    await page.keyboard.press('Enter');
    await expect(page.getByRole('heading', { name: 'Keys' })).toBeFocused();
    await page.keyboard.press('Tab');
    await expect(page.getByLabel('Name')).toBeFocused();
    await page.keyboard.type('keyboard only');
    await page.keyboard.press('Tab');
    await expect(page.getByLabel('Environment')).toBeFocused();
    await page.keyboard.press('Tab');
    await expect(page.getByRole('button', { name: 'Create key' })).toBeFocused();
    await page.keyboard.press('Shift+Tab');
    await page.keyboard.press('Shift+Tab');
    await expect(page.getByLabel('Name')).toBeFocused();
    await page.keyboard.press('Enter');

    // The new key takes the focus; Tab, Enter copies it.
    const shown = page.locator('#new-key input');
    await expect(shown).toBeFocused();
    await expect(shown).toHaveValue(/^eq_live_/);
    await expect(page.locator('#key-table')).toContainText('keyboard only');
    await page.keyboard.press('Tab');
    await expect(page.locator('#new-key').getByRole('button', { name: 'Copy' })).toBeFocused();
    await page.keyboard.press('Enter');
    await expect(page.locator('#toast')).toHaveText('Copied.');
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(await shown.inputValue());
  });

  test('a cross-origin POST and a POST without the CSRF token are refused', async () => {
    const me = await page.request.get(BASE + '/portal/api/me');
    const csrf = (await me.json()).data.csrf;
    const foreign = await page.request.post(BASE + '/portal/api/keys/create', {
      headers: { Origin: 'http://evil.example', 'X-CSRF-Token': csrf, 'Content-Type': 'application/json' },
      data: { name: 'stolen' },
    });
    expect(foreign.status()).toBe(403);
    const noToken = await page.request.post(BASE + '/portal/api/keys/create', {
      headers: { Origin: BASE, 'Content-Type': 'application/json' },
      data: { name: 'stolen' },
    });
    expect(noToken.status()).toBe(403);
    const keys = await (await page.request.get(BASE + '/portal/api/keys')).json();
    expect(keys.data.keys.map((k) => k.name)).not.toContain('stolen');
    // A key name with a bidirectional override or a terminal escape would
    // rewrite how the page, the logs and eqctl's output read.
    for (const name of ['invoice\u202Etxt.exe', 'clear\u001b[2J', 'bell\u0007']) {
      const odd = await page.request.post(BASE + '/portal/api/keys/create', {
        headers: { Origin: BASE, 'X-CSRF-Token': csrf, 'Content-Type': 'application/json' },
        data: { name },
      });
      expect(odd.status()).toBe(400);
      expect((await odd.json()).msg).toContain('control');
    }
  });

  test('a password change ends other sessions; sign-out ends this one', async ({ browser }) => {
    const { context: other } = await watchedContext(browser, 'second session');
    const p2 = await other.newPage();
    await p2.goto(BASE + '/portal/#/signin');
    await p2.getByLabel('Email').fill(EMAIL);
    await p2.getByLabel('Password').fill(PASSWORD);
    await p2.getByRole('button', { name: 'Sign in' }).click();
    await expect(p2.getByRole('heading', { name: 'Overview' })).toBeVisible();

    await page.getByRole('link', { name: 'Account' }).click();
    await page.getByLabel('Current password').fill(PASSWORD);
    await page.getByLabel('New password').fill(PASSWORD + ' two');
    await page.getByRole('button', { name: 'Change password' }).click();
    await expect(page.locator('#toast')).toContainText('Password changed');
    await shoot(page, 'account');
    expect((await p2.request.get(BASE + '/portal/api/me')).status()).toBe(401);
    await other.close();

    await page.getByRole('button', { name: 'Sign out' }).click();
    await expect(page.getByRole('heading', { name: 'Sign in' })).toBeVisible();
    expect((await page.request.get(BASE + '/portal/api/me')).status()).toBe(401);
  });

  test('a page opened as localhost signs in and makes changes (scripts/run prints 127.0.0.1)', async ({ browser }) => {
    // EQ_PORTAL_URL names 127.0.0.1 (tests/portal/run, like scripts/run);
    // the README's examples say localhost. Both are this machine.
    const LOCAL = BASE.replace('://127.0.0.1:', '://localhost:');
    expect(LOCAL).not.toBe(BASE);
    const { context: ctx } = await watchedContext(browser, 'localhost', {}, LOCAL);
    const p = await ctx.newPage();
    await p.goto(LOCAL + '/portal/#/signin');
    await p.getByLabel('Email').fill(EMAIL);
    await p.getByLabel('Password').fill(PASSWORD + ' two');
    await p.getByRole('button', { name: 'Sign in' }).click();
    await expect(p.getByRole('heading', { name: 'Overview' })).toBeVisible();
    await p.getByRole('link', { name: 'Keys' }).click();
    await p.getByLabel('Name').fill('from localhost');
    await p.getByRole('button', { name: 'Create key' }).click();
    await expect(p.locator('#new-key input')).toHaveValue(/^eq_live_/);
    await p.getByRole('link', { name: 'Account' }).click();
    await p.getByRole('button', { name: 'Sign out' }).click();
    await expect(p.getByRole('heading', { name: 'Sign in' })).toBeVisible();
    await ctx.close();
  });

  test('wrong passwords reach the 429, for a known and an unknown email alike, said in Chinese', async ({ browser }) => {
    // Its own context, in Chinese: the refusals (401, then 429) are
    // expected, and the page says them in its own language.
    const { context: ctx, watcher } = await watchedContext(browser, '429', { locale: 'zh-CN' });
    watcher.allowed = [refused(401, 429)];
    const p = await ctx.newPage();
    await p.goto(BASE + '/portal/#/signin');
    await expect(p.getByRole('heading', { name: '登录' })).toBeVisible();
    const answers = [];
    for (let i = 0; i < 5; i++) {
      await p.getByLabel('邮箱').fill(EMAIL);
      await p.getByLabel('密码').fill('wrong password ' + i);
      const res = p.waitForResponse((r) => r.url().endsWith('/portal/api/signin'));
      await p.getByRole('button', { name: '登录' }).click();
      answers.push((await res).status());
    }
    expect(answers).toEqual(Array(5).fill(401));
    await expect(p.getByRole('alert')).toHaveText('邮箱或密码错误。');
    // Ten more at once: each is counted before its password is checked, so
    // only the five left under the limit may reach the check (401, or 503
    // when the hashing slots are full); the others are refused at once.
    const burst = await Promise.all(Array.from({ length: 10 }, (_, i) =>
      p.request.post(BASE + '/portal/api/signin', {
        headers: { Origin: BASE, 'Content-Type': 'application/json' },
        data: { email: EMAIL, password: 'parallel guess ' + i },
      }).then((r) => r.status())));
    expect(burst.filter((s) => s === 401 || s === 503).length).toBeLessThanOrEqual(5);
    expect(burst.filter((s) => s === 429).length).toBeGreaterThanOrEqual(5);
    expect(burst.every((s) => [401, 429, 503].includes(s))).toBe(true);
    await p.getByLabel('邮箱').fill(EMAIL);
    await p.getByLabel('密码').fill('one more guess');
    const last = p.waitForResponse((r) => r.url().endsWith('/portal/api/signin'));
    await p.getByRole('button', { name: '登录' }).click();
    const limited = await last;
    expect(limited.status()).toBe(429);
    const wait = limited.headers()['retry-after'];
    await expect(p.getByRole('alert')).toHaveText(`登录失败次数过多，请 ${wait} 秒后再试。`);
    // An unknown email gets the same answer as a wrong password.
    const unknown = await p.request.post(BASE + '/portal/api/signin', {
      headers: { Origin: BASE, 'Content-Type': 'application/json' },
      data: { email: 'nobody@example.com', password: 'whatever it is' },
    });
    expect(unknown.status()).toBe(429);  // the address is limited too now
    expect(Number(unknown.headers()['retry-after'])).toBeGreaterThan(0);
    await ctx.close();
  });

  test('a reset link from the operator sets a new password and signs in', async ({ browser }) => {
    const out = execFileSync(process.env.EQ_EQCTL, ['account', 'reset-password', EMAIL, '--json'],
      { env: process.env }).toString();
    const link = JSON.parse(out).link;
    expect(link).toContain('/portal/#/reset/');
    const { context: ctx, watcher } = await watchedContext(browser, 'reset');
    const p = await ctx.newPage();
    await p.goto(link);
    await expect(p.getByText(`Choose a new password for ${EMAIL}.`)).toBeVisible();
    await p.getByLabel('Password', { exact: true }).fill('a brand new passphrase');
    await p.getByLabel('Password again').fill('a brand new passphrase');
    await p.getByRole('button', { name: 'Set password and sign in' }).click();
    await expect(p.getByRole('heading', { name: 'Overview' })).toBeVisible();
    // Used once: the same link is refused now.
    watcher.allowed = [refused(404)];
    await p.goto(link);
    await expect(p.getByRole('alert')).toContainText('used, has expired or is unknown');

    // A signed-in session guessing the password (to see the webhook secret)
    // meets the sign-in limit too: ten wrong ones in 15 minutes (one was
    // made in the webhook test), then 429 even for the right one.
    const csrf = (await (await p.request.get(BASE + '/portal/api/me')).json()).data.csrf;
    const reveal = (password) => p.request.post(BASE + '/portal/api/webhooks/secret', {
      headers: { Origin: BASE, 'X-CSRF-Token': csrf, 'Content-Type': 'application/json' },
      data: { password },
    });
    const seen = [];
    for (let i = 0; i < 10; i++) seen.push((await reveal('guess ' + i)).status());
    expect(seen.slice(0, 9)).toEqual(Array(9).fill(403));
    expect(seen[9]).toBe(429);
    const right = await reveal('a brand new passphrase');
    expect(right.status()).toBe(429);
    expect(Number(right.headers()['retry-after'])).toBeGreaterThan(0);
    await ctx.close();
  });
});
