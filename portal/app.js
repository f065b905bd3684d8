// EQ Reply developer center: one page, hash-routed, talking to
// /portal/api/ with the session cookie and the CSRF token. No framework and
// nothing from another origin: every element is built with the DOM API and
// every text goes in through textContent, so no server string is ever parsed
// as HTML.
'use strict';

// ---------------------------------------------------------------- texts

const TEXTS = {
  en: {
    overview: 'Overview',
    keys: 'Keys',
    usage: 'Usage',
    playground: 'Playground',
    webhooks: 'Webhooks',
    tasks: 'Tasks',
    account: 'Account',
    signin: 'Sign in',
    signout: 'Sign out',
    email: 'Email',
    password: 'Password',
    password_again: 'Password again',
    register: 'Create an account',
    register_hint: 'New here? Create an account: 100 free units per mode for 30 days.',
    invite_only: 'Accounts are by invitation: ask the operator for a sign-up link.',
    welcome: 'Welcome',
    welcome_hint: 'Choose a password for {email}.',
    reset: 'Reset your password',
    reset_hint: 'Choose a new password for {email}. Every session ends.',
    set_password: 'Set password and sign in',
    passwords_differ: 'The two passwords differ.',
    password_rule: 'At least 10 characters.',
    quota: 'Quota',
    remaining: 'remaining',
    expires: 'Expires',
    tier: 'Tier',
    monthly: 'This month',
    monthly_used: '{used} of {limit} units used; resets {day}',
    monthly_unlimited: '{used} units used, no monthly limit; counted again from {day}',
    calls_today: 'Reply calls today',
    refunded_today: 'refunded',
    recent_errors: 'Recent errors',
    no_errors: 'No failed tasks or deliveries. ',
    failed_task: 'Task {id} failed ({code}): {msg}',
    failed_delivery: 'Webhook {id} to {url} failed: {err}',
    key_name: 'Name',
    env: 'Environment',
    create_key: 'Create key',
    key_created: 'Your new key. Copy it now: it is shown only this once.',
    copy: 'Copy',
    copied: 'Copied.',
    copy_failed: 'Select the key and copy it by hand.',
    prefix: 'Prefix',
    status: 'Status',
    created: 'Created',
    last_used: 'Last used',
    never: 'never',
    actions: 'Actions',
    rotate: 'Rotate',
    revoke: 'Revoke',
    confirm_rotate: 'Rotate {prefix}? The old key stops working at once.',
    confirm_revoke: 'Revoke {prefix}? Calls with it will get 401.',
    no_keys: 'No keys yet: create one above.',
    usage_title: 'Reply calls per day, last 30 days',
    calls: 'Calls',
    errors: 'Errors (refunded)',
    tokens: 'Tokens',
    total: 'Total',
    date: 'Date',
    message: 'Message they sent you',
    context: 'Context (optional)',
    scene: 'Scene (optional)',
    mode: 'Mode',
    reply_count: 'Replies',
    send: 'Get replies',
    any: 'any',
    charged_note: 'A playground call is a real call: it charges 1 unit of the mode to your quota.',
    charged: 'Charged 1 {mode} unit. Request {rid}, {tokens} tokens.',
    analysis: 'Analysis',
    emotion: 'Emotion',
    intensity: 'Intensity',
    need: 'Underlying need',
    stage: 'Relationship stage',
    strategy: 'Suggested strategy',
    score: 'score',
    default_url: 'Default webhook URL',
    save: 'Save',
    saved: 'Saved.',
    url_password: 'Your password (to change the URL)',
    secret: 'Signing secret',
    show_secret: 'Show secret',
    rotate_secret: 'Rotate secret',
    secret_hint: 'Enter your password again to see or rotate the secret.',
    previous_secret: 'Previous secret (still signs until {until})',
    confirm_rotate_secret: 'Rotate the signing secret? For 24 h both secrets sign every webhook.',
    send_test: 'Send test event',
    test_sent: 'Test event {id}: {status}',
    test_waiting: 'Test event {id} sent, waiting for the answer…',
    deliveries: 'Delivery log',
    event: 'Event',
    attempts: 'Attempts',
    last_status: 'Last status',
    error: 'Error',
    replay: 'Replay',
    replayed: 'Replayed: due now.',
    details: 'Details',
    attempt: 'Attempt',
    at: 'At',
    latency: 'Latency',
    no_deliveries: 'No deliveries yet.',
    task: 'Task',
    finished: 'Finished',
    filter: 'Filter',
    no_tasks: 'No tasks match.',
    back: 'Back',
    change_password: 'Change password',
    current_password: 'Current password',
    new_password: 'New password',
    password_changed: 'Password changed; every other session ended.',
    loading: 'Loading…',
    network_error: 'The server did not answer: {msg}',
    signed_in_as: 'Signed in as {email}',
    language: 'Language',
    skip: 'Skip to content',
    signup_off: 'Sign-up is closed: only people who already have an account sign in.',
    usage_tokens: 'Tokens per day, last 30 days',
    usage_errors: 'Errors per day (refunded calls), last 30 days',
    errors_explained:
        'An error is a reply call that was charged and then refunded because it gave no ' +
        'replies: generation failed (500), timed out (504), the service became unavailable (503), an ' +
        'async task failed, or its server stopped before answering. Calls refused before any charge ' +
        '(400, 401, 402, 429) are not counted, nor are analyze calls, which are free.',
    chart_day: '{date} {mode}: {value}',
    err_signin: 'Wrong email or password.',
    err_signin_limit: 'Too many failed sign-ins. Try again in {s} s.',
    err_retry_after: 'Too many attempts. Try again in {s} s.',
    err_busy: 'The server is busy. Try again in {s} s.',
    err_email_taken: 'An account with this email exists: sign in instead.',
    err_invite_only: 'Accounts are by invitation: ask the operator for a sign-up link.',
    err_signup_closed:
        'Sign-up is closed on this server: no new accounts, and invitation links no longer work. People who already have an account sign in.',
    err_link_gone: 'This link was used, has expired or is unknown; ask for a new one.',
    err_account_disabled: 'This account is disabled.',
    err_link_has_account:
        'This email already has an account: sign in, or ask the operator for a password reset link.',
    err_password_needed: 'Enter your password to change the webhook URL.',
    err_email: 'Enter an email address like name@example.com.',
    err_password_rule: 'The password needs at least 10 characters.',
    err_required: 'Enter your email and password.',
    err_wrong_password: 'Wrong password.',
    err_key_name:
        'A key name has 1 to 64 characters, without control or bidirectional-formatting characters.',
    err_key_env: 'This server issues {env} keys only.',
    err_too_many_keys: 'This account has as many active keys as it may have: revoke one first.',
    err_key_not_active: 'Only an active key can be rotated.',
    err_key_revoked: 'The key is already revoked.',
    err_not_found: 'Not found: it may belong to another account or have been purged.',
    err_webhook_url: 'This webhook URL cannot be used ({msg}).',
    err_set_url_first: 'Save a webhook URL first.',
    err_test_pending: 'A test event is still on its way; wait for its answer.',
    err_replay_pending: 'This delivery is already pending.',
    err_forbidden:
        'The server refused a change from this page (another origin, or a stale page): reload it.',
    err_quota: 'No {mode} units left, or the quota has expired: see the Overview.',
    err_monthly:
        'This account\'s units for this month are used up; more needs a commercial arrangement. See the Overview.',
    err_timeout: 'Generation timed out; the unit was refunded. Try again.',
    err_generation: 'Generation failed; the unit was refunded. Try again.',
    err_bad_request: 'The server refused the request: {msg}',
    err_internal: 'Something went wrong on the server. Try again.',
    err_other: 'The server answered {status}: {msg}',
    task_error_500: 'generation failed; the unit was refunded',
  },
  zh: {
    overview: '概览',
    keys: '密钥',
    usage: '用量',
    playground: '试一试',
    webhooks: 'Webhook',
    tasks: '任务',
    account: '账户',
    signin: '登录',
    signout: '退出登录',
    email: '邮箱',
    password: '密码',
    password_again: '再输一次密码',
    register: '注册账户',
    register_hint: '第一次来？注册即得每种模式 100 次免费额度，30 天有效。',
    invite_only: '账户需邀请开通：请向运维人员索取注册链接。',
    welcome: '欢迎',
    welcome_hint: '为 {email} 设置密码。',
    reset: '重设密码',
    reset_hint: '为 {email} 设置新密码，所有会话将退出。',
    set_password: '设置密码并登录',
    passwords_differ: '两次输入的密码不一致。',
    password_rule: '至少 10 个字符。',
    quota: '额度',
    remaining: '剩余',
    expires: '到期',
    tier: '套餐',
    monthly: '本月用量',
    monthly_used: '已用 {used} / {limit} 次，{day}重置',
    monthly_unlimited: '已用 {used} 次，无月度上限，{day}重新计数',
    calls_today: '今日回复调用',
    refunded_today: '已退还',
    recent_errors: '最近的错误',
    no_errors: '没有失败的任务或推送。',
    failed_task: '任务 {id} 失败（{code}）：{msg}',
    failed_delivery: '推送 {id} 到 {url} 失败：{err}',
    key_name: '名称',
    env: '环境',
    create_key: '创建密钥',
    key_created: '新密钥如下。请立即复制：它只显示这一次。',
    copy: '复制',
    copied: '已复制。',
    copy_failed: '请手动选中密钥并复制。',
    prefix: '前缀',
    status: '状态',
    created: '创建时间',
    last_used: '最近使用',
    never: '从未',
    actions: '操作',
    rotate: '轮换',
    revoke: '吊销',
    confirm_rotate: '轮换 {prefix}？旧密钥会立即失效。',
    confirm_revoke: '吊销 {prefix}？之后用它的调用会得到 401。',
    no_keys: '还没有密钥：在上方创建一个。',
    usage_title: '近 30 天每日回复调用',
    calls: '调用',
    errors: '错误（已退还）',
    tokens: 'Token',
    total: '合计',
    date: '日期',
    message: '对方发来的消息',
    context: '背景（可选）',
    scene: '场景（可选）',
    mode: '模式',
    reply_count: '回复条数',
    send: '生成回复',
    any: '全部',
    charged_note: '试一试是真实调用：每次按所选模式扣 1 次额度。',
    charged: '已扣 1 次 {mode} 额度。请求 {rid}，{tokens} token。',
    analysis: '分析',
    emotion: '情绪',
    intensity: '强度',
    need: '深层需求',
    stage: '关系阶段',
    strategy: '建议策略',
    score: '评分',
    default_url: '默认 Webhook 地址',
    save: '保存',
    saved: '已保存。',
    url_password: '你的密码（修改地址时需要）',
    secret: '签名密钥',
    show_secret: '查看密钥',
    rotate_secret: '轮换密钥',
    secret_hint: '查看或轮换密钥前请再次输入密码。',
    previous_secret: '旧密钥（{until} 前仍参与签名）',
    confirm_rotate_secret: '轮换签名密钥？24 小时内新旧密钥都会签名每个 Webhook。',
    send_test: '发送测试事件',
    test_sent: '测试事件 {id}：{status}',
    test_waiting: '测试事件 {id} 已发出，等待对方应答……',
    deliveries: '推送记录',
    event: '事件',
    attempts: '尝试次数',
    last_status: '最近状态码',
    error: '错误',
    replay: '重发',
    replayed: '已重发：立即投递。',
    details: '详情',
    attempt: '尝试',
    at: '时间',
    latency: '耗时',
    no_deliveries: '还没有推送。',
    task: '任务',
    finished: '完成时间',
    filter: '筛选',
    no_tasks: '没有符合条件的任务。',
    back: '返回',
    change_password: '修改密码',
    current_password: '当前密码',
    new_password: '新密码',
    password_changed: '密码已修改，其他会话已退出。',
    loading: '加载中……',
    network_error: '服务器没有应答：{msg}',
    signed_in_as: '当前账户 {email}',
    language: '语言',
    skip: '跳到正文',
    signup_off: '注册已关闭：只有已有账户的人可以登录。',
    usage_tokens: '近 30 天每日 Token',
    usage_errors: '近 30 天每日错误（已退还的调用）',
    errors_explained:
        '错误指已扣额度、但因没有产出回复而退还的回复调用：生成失败（500）、超时（504）、' +
        '服务在扣费后不可用（503）、异步任务失败，或处理它的服务在应答前停止。扣费前就被拒绝的调用' +
        '（400、401、402、429）不计入，免费的分析调用也不计入。',
    chart_day: '{date} {mode}：{value}',
    err_signin: '邮箱或密码错误。',
    err_signin_limit: '登录失败次数过多，请 {s} 秒后再试。',
    err_retry_after: '尝试次数过多，请 {s} 秒后再试。',
    err_busy: '服务器繁忙，请 {s} 秒后再试。',
    err_email_taken: '该邮箱已有账户，请直接登录。',
    err_invite_only: '账户需邀请开通：请向运维人员索取注册链接。',
    err_signup_closed: '本服务已关闭注册：不再开通新账户，邀请链接也已失效。已有账户的人可以登录。',
    err_link_gone: '该链接已使用、已过期或无效，请索取新链接。',
    err_account_disabled: '该账户已停用。',
    err_link_has_account: '该邮箱已有账户：请直接登录，或向运维人员索取重设密码链接。',
    err_password_needed: '修改 Webhook 地址前请输入密码。',
    err_email: '请输入形如 name@example.com 的邮箱地址。',
    err_password_rule: '密码至少需要 10 个字符。',
    err_required: '请输入邮箱和密码。',
    err_wrong_password: '密码错误。',
    err_key_name: '密钥名称为 1 到 64 个字符，不能含控制字符或双向格式字符。',
    err_key_env: '本服务只签发 {env} 环境的密钥。',
    err_too_many_keys: '该账户的有效密钥已达上限：请先吊销一个。',
    err_key_not_active: '只有有效的密钥可以轮换。',
    err_key_revoked: '该密钥已被吊销。',
    err_not_found: '未找到：它可能属于其他账户，或已被清理。',
    err_webhook_url: '该 Webhook 地址不可用（{msg}）。',
    err_set_url_first: '请先保存 Webhook 地址。',
    err_test_pending: '上一个测试事件还在投递中，请等待它的应答。',
    err_replay_pending: '该推送已在等待投递。',
    err_forbidden: '服务器拒绝了来自本页面的修改（来源不同或页面已过期）：请刷新页面。',
    err_quota: '{mode} 模式额度已用完或已过期：请查看概览。',
    err_monthly: '本账户本月用量已满，如需更多请洽谈商务合作。请查看概览。',
    err_timeout: '生成超时，额度已退还。请重试。',
    err_generation: '生成失败，额度已退还。请重试。',
    err_bad_request: '服务器拒绝了请求：{msg}',
    err_internal: '服务器出错了，请重试。',
    err_other: '服务器返回 {status}：{msg}',
    task_error_500: '生成失败，额度已退还',
  },
};

const SCENES = ['chat', 'ambiguous', 'dating', 'humor', 'conflict', 'social', 'work', 'breakup',
  'proposal'];
const MODES = ['fast', 'standard', 'perfect'];
const MODE_COLORS = { fast: '#2f7d6d', standard: '#3a64b0', perfect: '#a0522d' };

function pickLanguage() {
  const saved = localStorage.getItem('eq.lang');
  if (saved === 'en' || saved === 'zh') return saved;
  const langs = navigator.languages && navigator.languages.length ? navigator.languages
    : [navigator.language || 'en'];
  for (const l of langs) {
    if (/^zh/i.test(l)) return 'zh';
    if (/^en/i.test(l)) return 'en';
  }
  return 'en';
}

let lang = pickLanguage();

function t(key, vars) {
  let s = (TEXTS[lang] && TEXTS[lang][key]) || TEXTS.en[key] || key;
  if (vars) {
    for (const [k, v] of Object.entries(vars)) s = s.split('{' + k + '}').join(String(v));
  }
  return s;
}

// ---------------------------------------------------------------- DOM

// h('tag', {attr: value, onclick: fn}, child...): children are nodes or
// strings (text nodes, never HTML).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

let fieldCounter = 0;
// A labelled field: <label for=id>text</label><input id=id ...>.
function field(labelText, control, hint) {
  const id = control.id || ('f' + (++fieldCounter));
  control.id = id;
  const parts = [h('label', { for: id }, labelText), control];
  if (hint) {
    const hid = id + '-hint';
    control.setAttribute('aria-describedby', hid);
    parts.push(h('small', { id: hid, class: 'hint' }, hint));
  }
  return h('div', { class: 'field' }, parts);
}

function select(name, options, value) {
  const s = h('select', { name });
  for (const [v, label] of options) {
    const o = h('option', { value: v }, label);
    if (v === value) o.selected = true;
    s.append(o);
  }
  return s;
}

function alertBox() { return h('p', { class: 'alert', role: 'alert', hidden: true }); }
function showAlert(box, text) { box.textContent = text; box.hidden = !text; }

function toast(text) {
  const el = document.getElementById('toast');
  el.textContent = text;
  el.classList.add('show');
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => el.classList.remove('show'), 4000);
}

function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (isNaN(d)) return iso;
  return d.toLocaleString(lang === 'zh' ? 'zh-CN' : 'en-GB', { dateStyle: 'medium', timeStyle: 'short' });
}

// A day, as UTC counts it (the monthly volume turns at 00:00 UTC).
function fmtDay(iso) {
  const d = new Date(iso);
  if (isNaN(d)) return iso;
  return d.toLocaleDateString(
             lang === 'zh' ? 'zh-CN' : 'en-GB', {dateStyle: 'medium', timeZone: 'UTC'}) +
      ' (UTC)';
}

function mount(...nodes) {
  const main = document.getElementById('main');
  main.replaceChildren(...nodes);
}

// ---------------------------------------------------------------- API

const state = { me: null, csrf: '', config: null };

// Every navigation (a render) gets the next number; a render, and anything
// a page it drew started, goes on only while its number is the latest and
// the address is still the one it was started for. A render that a newer
// navigation overtook must neither navigate nor draw: an invitation opened
// in a tab still loading another page would otherwise end on that page's
// sign-in redirect. The address is compared too because a new address
// comes before its hashchange event: an answer that arrives in between
// finds the number unchanged but the address not.
let navigation = 0;
let navigationHash = '';
function isCurrent(nav) { return nav === navigation && location.hash === navigationHash; }

async function api(path, body) {
  const nav = navigation;
  const opts = { method: body === undefined ? 'GET' : 'POST', credentials: 'same-origin',
    headers: {} };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.headers['X-CSRF-Token'] = state.csrf;
    opts.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch('/portal/api/' + path, opts);
  } catch (e) {
    return { ok: false, status: 0, msg: t('network_error', { msg: e.message }) };
  }
  let env = null;
  try { env = await res.json(); } catch (e) { env = null; }
  const out = { ok: res.ok && env && env.code === 0, status: res.status,
    data: env ? env.data : null, msg: env ? env.msg : res.statusText };
  if (!out.ok) {
    out.serverMsg = out.msg;
    out.msg = errorText(path, res.status, out.serverMsg, res.headers.get('Retry-After'));
  }
  if (res.status === 401 && !path.startsWith('signin') && !path.startsWith('links/')
      && !path.startsWith('password/set') && !path.startsWith('register') && isCurrent(nav)) {
    state.me = null;
    go('#/signin');
  }
  return out;
}

// The server's answers are English; the page says what they mean in its
// own language, chosen by the route and the HTTP status (and, where one
// status has two meanings, by what the page knows or the field the message
// names). The server's words are kept only as a detail the page cannot
// translate (why a webhook URL is refused, say).
function errorKey(route, status, msg) {
  const field = (msg.match(/^([a-z_]+): /) || [])[1];
  switch (status) {
    case 400:
      if (route === 'signin') return 'err_required';
      if (field === 'email') return 'err_email';
      if (field === 'password' || field === 'new_password') return 'err_password_rule';
      if (route === 'keys/create') return field === 'env' ? 'err_key_env' : 'err_key_name';
      if (route === 'webhooks/url') return field === 'password' ? 'err_password_needed' : 'err_webhook_url';
      return 'err_bad_request';
    case 401: return route === 'signin' ? 'err_signin' : 'err_other';
    case 402:
      return /monthly volume/.test(msg) ? 'err_monthly' : 'err_quota';
    case 403:
      if (route === 'links') return /sign-up is closed/.test(msg) ? 'err_signup_closed' : 'err_account_disabled';
      if (route === 'register') {
        return state.config && state.config.signup === 'off' ? 'err_signup_closed' : 'err_invite_only';
      }
      if (route === 'password/set') {
        return /sign-up is closed/.test(msg) ? 'err_signup_closed' : 'err_account_disabled';
      }
      if (route === 'webhooks/secret' || route === 'webhooks/rotate' || route === 'password'
          || route === 'webhooks/url') {
        return /^wrong password/.test(msg) ? 'err_wrong_password' : 'err_forbidden';
      }
      return 'err_forbidden';
    case 404:
      return route === 'links' || route === 'password/set' ? 'err_link_gone' : 'err_not_found';
    case 409:
      if (route === 'register') return 'err_email_taken';
      if (route === 'links' || route === 'password/set') return 'err_link_has_account';
      if (route === 'keys/create') return 'err_too_many_keys';
      if (route === 'keys/rotate') return 'err_key_not_active';
      if (route === 'keys/revoke') return 'err_key_revoked';
      if (route === 'webhooks/test') return /URL first/.test(msg) ? 'err_set_url_first' : 'err_test_pending';
      if (route === 'deliveries/replay') return 'err_replay_pending';
      return 'err_other';
    case 429: return route === 'signin' ? 'err_signin_limit' : 'err_retry_after';
    case 500: return route.startsWith('playground') ? 'err_generation' : 'err_internal';
    case 503: return 'err_busy';
    case 504: return 'err_timeout';
    default: return 'err_other';
  }
}

function errorText(path, status, msg, retryAfter) {
  let route = path.split('?')[0];
  for (const withId of ['links', 'tasks', 'deliveries']) {
    if (route.startsWith(withId + '/') && route !== 'deliveries/replay') route = withId;
  }
  const mode = (msg.match(/\b(fast|standard|perfect)\b/) || [])[1] || '';
  return t(errorKey(route, status, msg || ''), { s: retryAfter || '1', msg, status, mode,
    env: state.me ? state.me.env : '' });
}

// A failed task's error ({code, msg}, kept by the dispatcher in English):
// a failed generation (500, refunded like every failed task) in the page's
// words, anything else as it was recorded.
function taskError(code, msg) {
  return code === 500 ? t('task_error_500') : msg;
}

function go(hash) {
  if (location.hash === hash) render(); else location.hash = hash;
}

// Who is signed in: asked of /session, which answers 200 either way, so a
// signed-out visitor's first load makes no request that fails.
async function loadMe(nav) {
  const r = await api('session');
  if (!isCurrent(nav)) return false;
  if (!r.ok || !r.data.signed_in) { state.me = null; return false; }
  state.me = r.data;
  state.csrf = r.data.csrf;
  return true;
}

// ---------------------------------------------------------------- shell

const PAGES = ['overview', 'keys', 'usage', 'playground', 'webhooks', 'tasks', 'account'];

function renderNav(current) {
  const nav = document.getElementById('nav');
  nav.hidden = !state.me;
  if (!state.me) { nav.replaceChildren(); return; }
  nav.replaceChildren(h('ul', {}, PAGES.map((p) => h('li', {},
    h('a', { href: '#/' + p, 'aria-current': p === current ? 'page' : null }, t(p))))));
}

function page(title, ...content) {
  document.title = title + ' · EQ Reply';
  return h('section', { class: 'page' }, h('h1', {}, title), ...content);
}

// ---------------------------------------------------------------- sign-in and links

function signinPage() {
  const nav = navigation;
  const email = h('input', { type: 'email', name: 'email', autocomplete: 'username', required: true });
  const pass = h('input', { type: 'password', name: 'password', autocomplete: 'current-password',
    required: true });
  const alert = alertBox();
  const form = h('form', { class: 'card narrow', onsubmit: async (e) => {
    e.preventDefault();
    showAlert(alert, '');
    const r = await api('signin', { email: email.value, password: pass.value });
    if (!r.ok) { showAlert(alert, r.msg); return; }
    state.csrf = r.data.csrf;
    if (isCurrent(nav)) go('#/overview');
  } }, alert, field(t('email'), email), field(t('password'), pass),
  h('button', { type: 'submit' }, t('signin')));
  const extra = h('p', { class: 'muted' });
  (async () => {
    if (!state.config) {
      const c = await api('config');
      state.config = c.ok ? c.data : { signup: 'invite' };
    }
    if (state.config.signup === 'open') {
      extra.replaceChildren(t('register_hint') + ' ', h('a', { href: '#/register' }, t('register')));
    } else if (state.config.signup === 'invite') {
      extra.textContent = t('invite_only');
    } else {
      extra.textContent = t('signup_off');
    }
  })();
  return page(t('signin'), form, extra);
}

function passwordForm(submitText, onSubmit, withEmail) {
  const email = withEmail ? h('input', { type: 'email', name: 'email', autocomplete: 'username',
    required: true }) : null;
  const p1 = h('input', { type: 'password', name: 'password', autocomplete: 'new-password',
    required: true, minlength: '10' });
  const p2 = h('input', { type: 'password', name: 'password2', autocomplete: 'new-password',
    required: true, minlength: '10' });
  const alert = alertBox();
  return h('form', { class: 'card narrow', onsubmit: async (e) => {
    e.preventDefault();
    showAlert(alert, '');
    if (p1.value !== p2.value) { showAlert(alert, t('passwords_differ')); return; }
    const msg = await onSubmit(p1.value, email && email.value);
    if (msg) showAlert(alert, msg);
  } }, alert, email && field(t('email'), email), field(t('password'), p1, t('password_rule')),
  field(t('password_again'), p2), h('button', { type: 'submit' }, submitText));
}

// A link's token arrives in the fragment (#/welcome/TOKEN), which no browser
// sends to a server, and leaves the address bar before the page sends any
// request (render() calls this first). It is kept in this tab's
// sessionStorage until the link is used or refused, so a reload still
// finds it; the server sees it only in the body of a POST.
function takeLinkToken(kind, fromHash) {
  const key = 'eq.link.' + kind;
  if (fromHash) {
    sessionStorage.setItem(key, fromHash);
    history.replaceState(null, '', '#/' + kind);
  }
  return sessionStorage.getItem(key) || '';
}

function dropLinkToken(kind) { sessionStorage.removeItem('eq.link.' + kind); }

async function linkPage(kind, token, nav) {
  const title = kind === 'welcome' ? t('welcome') : t('reset');
  const r = token ? await api('links/check', { token })
    : { ok: false, status: 404, msg: t('err_link_gone') };
  if (!r.ok) {
    // Refused for good (used, unknown, disabled, taken): forget it. A busy
    // server (503) is worth a reload.
    if (isCurrent(nav) && [403, 404, 409].includes(r.status)) dropLinkToken(kind);
    return page(title, h('p', { class: 'alert', role: 'alert' }, r.msg));
  }
  const hint = kind === 'welcome' ? t('welcome_hint', { email: r.data.email })
    : t('reset_hint', { email: r.data.email });
  const form = passwordForm(t('set_password'), async (password) => {
    const s = await api('password/set', { token, password });
    if (!s.ok) return s.msg;
    dropLinkToken(kind);
    state.csrf = s.data.csrf;
    if (isCurrent(nav)) go('#/overview');
    return '';
  });
  return page(title, h('p', {}, hint), form);
}

function registerPage() {
  const nav = navigation;
  const form = passwordForm(t('register'), async (password, email) => {
    const s = await api('register', { email, password });
    if (!s.ok) return s.msg;
    state.csrf = s.data.csrf;
    if (isCurrent(nav)) go('#/overview');
    return '';
  }, true);
  return page(t('register'), h('p', {}, t('register_hint')), form);
}

// ---------------------------------------------------------------- overview

// The monthly volume of the account (docs/contract.md §11): used, of what
// limit (null: none), and the day it starts again.
function monthlyText(m) {
  const n = (x) => Number(x).toLocaleString(lang === 'zh' ? 'zh-CN' : 'en-GB');
  const day = fmtDay(m.resets_at);
  return m.limit === null ? t('monthly_unlimited', {used: n(m.used), day}) :
                            t('monthly_used', {used: n(m.used), limit: n(m.limit), day});
}

function overviewPage() {
  const me = state.me;
  const cards = h('div', { class: 'cards' }, MODES.map((m) => h('div', { class: 'card stat' },
    h('h2', {}, m), h('p', { class: 'big', 'data-mode': m }, String(me.quota[m])),
    h('p', { class: 'muted' }, t('remaining')))));
  const facts = h(
      'dl', {class: 'facts'}, h('dt', {}, t('tier')), h('dd', {}, me.tier),
      h('dt', {}, t('expires')), h('dd', {}, fmtTime(me.expire_at)), h('dt', {}, t('monthly')),
      h('dd', {id: 'monthly'}, monthlyText(me.monthly)), h('dt', {}, t('calls_today')),
      h('dd', {id: 'calls-today'},
        String(me.calls_today) +
            (me.refunded_today ? ' (' + t('refunded_today') + ' ' + me.refunded_today + ')' : '')));
  const errs = [];
  for (const x of me.recent_failed_tasks) {
    errs.push(h('li', {}, h('a', { href: '#/tasks/' + x.task_id },
      t('failed_task', { id: x.task_id, code: x.code, msg: taskError(x.code, x.msg) }))));
  }
  for (const d of me.recent_failed_deliveries) {
    errs.push(h('li', {}, t('failed_delivery', { id: d.delivery_id, url: d.url,
      err: d.last_error || d.last_status || '' })));
  }
  return page(t('overview'), h('p', { class: 'muted' }, t('signed_in_as', { email: me.email })),
    h('h2', {}, t('quota')), cards, facts, h('h2', {}, t('recent_errors')),
    errs.length ? h('ul', { class: 'errors' }, errs) : h('p', { class: 'muted' }, t('no_errors')));
}

// ---------------------------------------------------------------- keys

function copyBox(value) {
  const input = h('input', { type: 'text', readonly: true, value, class: 'mono secret-value',
    'aria-label': t('key_created') });
  const btn = h('button', { type: 'button', onclick: async () => {
    try {
      await navigator.clipboard.writeText(value);
      toast(t('copied'));
    } catch (e) {
      input.select();
      toast(t('copy_failed'));
    }
  } }, t('copy'));
  return h('div', { class: 'copy' }, input, btn);
}

async function keysPage() {
  const r = await api('keys');
  const shown = h('div', { id: 'new-key', 'aria-live': 'polite' });
  const showKey = (data) => {
    shown.replaceChildren(h('div', { class: 'card notice' }, h('p', {}, t('key_created')),
      copyBox(data.api_key)));
    shown.querySelector('input').focus();
  };
  const name = h('input', { type: 'text', name: 'name', required: true, maxlength: '64' });
  const env = select('env', [['production', 'production'], ['staging', 'staging']], state.me.env);
  const alert = alertBox();
  const form = h('form', { class: 'card row-form', onsubmit: async (e) => {
    e.preventDefault();
    showAlert(alert, '');
    const c = await api('keys/create', { name: name.value, env: env.value });
    if (!c.ok) { showAlert(alert, c.msg); return; }
    name.value = '';
    await refreshKeys();
    showKey(c.data);
  } }, alert, field(t('key_name'), name), field(t('env'), env),
  h('button', { type: 'submit' }, t('create_key')));
  const table = h('div', { id: 'key-table' });
  async function refreshKeys(data) {
    const list = data || (await api('keys')).data;
    if (!list || !list.keys.length) { table.replaceChildren(h('p', { class: 'muted' }, t('no_keys'))); return; }
    table.replaceChildren(h('div', { class: 'scroll' }, h('table', {},
      h('thead', {}, h('tr', {}, [t('key_name'), t('prefix'), t('env'), t('created'),
        t('last_used'), t('status'), t('actions')].map((x) => h('th', { scope: 'col' }, x)))),
      h('tbody', {}, list.keys.map((k) => h('tr', { 'data-key': k.key_id },
        h('td', {}, k.name || '—'), h('td', { class: 'mono' }, k.prefix + '…'), h('td', {}, k.env),
        h('td', {}, fmtTime(k.created_at)),
        h('td', {}, k.last_used_at ? fmtTime(k.last_used_at) : t('never')),
        h('td', {}, h('span', { class: 'badge ' + k.status }, k.status)),
        h('td', { class: 'actions' }, k.status === 'active' ? [
          h('button', { type: 'button', class: 'secondary', onclick: async () => {
            if (!confirm(t('confirm_rotate', { prefix: k.prefix }))) return;
            const x = await api('keys/rotate', { key_id: k.key_id });
            if (!x.ok) { toast(x.msg); return; }
            await refreshKeys();
            showKey(x.data);
          } }, t('rotate')),
          h('button', { type: 'button', class: 'danger', onclick: async () => {
            if (!confirm(t('confirm_revoke', { prefix: k.prefix }))) return;
            const x = await api('keys/revoke', { key_id: k.key_id });
            toast(x.ok ? t('revoke') + ' ✓' : x.msg);
            await refreshKeys();
          } }, t('revoke')),
        ] : '')))))));
  }
  await refreshKeys(r.ok ? r.data : null);
  return page(t('keys'), form, shown, table);
}

// ---------------------------------------------------------------- usage

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

// A stacked bar per day of one series (calls, tokens or errors) by mode,
// drawn as SVG: no chart library is needed for thirty bars, and nothing is
// loaded from anywhere. Each bar has a <title> with its day, mode and value.
function usageChart(days, series, label) {
  const W = 720, H = 200, padL = 44, padB = 28, padT = 10;
  const total = (d) => MODES.reduce((s, m) => s + d[m][series], 0);
  const max = Math.max(1, ...days.map(total));
  const step = (W - padL) / days.length;
  const bar = Math.max(2, step * 0.7);
  const y = (v) => H - padB - (v / max) * (H - padB - padT);
  const chart = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', class: 'chart',
    'data-series': series, 'aria-label': label });
  // Whole-number gridlines only: a count of 1 has no half.
  const marks = [...new Set([0, Math.round(max / 2), max])];
  for (const v of marks) {
    chart.append(svg('line', { x1: padL, x2: W, y1: y(v), y2: y(v), class: 'grid' }),
      svg('text', { x: padL - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'axis' }, v));
  }
  days.forEach((d, i) => {
    let base = 0;
    const x = padL + i * step + (step - bar) / 2;
    for (const m of MODES) {
      const v = d[m][series];
      if (v > 0) {
        const r = svg('rect', { x, y: y(base + v), width: bar, height: y(base) - y(base + v),
          fill: MODE_COLORS[m], 'data-mode': m, 'data-date': d.date });
        r.append(svg('title', {}, t('chart_day', { date: d.date, mode: m, value: v })));
        chart.append(r);
      }
      base += v;
    }
    if (i % 5 === 0 || i === days.length - 1) {
      const last = i === days.length - 1;
      chart.append(svg('text', { x: last ? W : x + bar / 2, y: H - 8,
        'text-anchor': last ? 'end' : 'middle', class: 'axis' }, d.date.slice(5)));
    }
  });
  return chart;
}

async function usagePage() {
  const r = await api('usage');
  if (!r.ok) return page(t('usage'), h('p', { class: 'alert', role: 'alert' }, r.msg));
  const days = r.data.days;
  const totals = {};
  for (const m of MODES) {
    totals[m] = days.reduce((s, d) => ({ calls: s.calls + d[m].calls, errors: s.errors + d[m].errors,
      tokens: s.tokens + d[m].tokens }), { calls: 0, errors: 0, tokens: 0 });
  }
  const legend = () => h('ul', { class: 'legend' }, MODES.map((m) => h('li', {},
    h('span', { class: 'swatch ' + m }), m)));
  const section = (title, series, ...notes) => [h('h2', {}, title), ...notes, legend(),
    h('div', { class: 'card chart-wrap' }, usageChart(days, series, title))];
  const table = h('div', { class: 'scroll' }, h('table', { id: 'usage-totals' },
    h('caption', {}, t('total')),
    h('thead', {}, h('tr', {}, [t('mode'), t('calls'), t('errors'), t('tokens')].map((x) =>
      h('th', { scope: 'col' }, x)))),
    h('tbody', {}, MODES.map((m) => h('tr', { 'data-mode': m }, h('th', { scope: 'row' }, m),
      h('td', {}, totals[m].calls), h('td', {}, totals[m].errors), h('td', {}, totals[m].tokens))))));
  return page(t('usage'), table,
    ...section(t('usage_title'), 'calls'),
    ...section(t('usage_tokens'), 'tokens'),
    ...section(t('usage_errors'), 'errors',
      h('p', { class: 'muted', id: 'errors-explained' }, t('errors_explained'))));
}

// ---------------------------------------------------------------- playground

function playgroundPage() {
  const message = h('textarea', { name: 'message', rows: '3', required: true, maxlength: '2000' });
  const context = h('input', { type: 'text', name: 'context', maxlength: '500' });
  const scene = select('scene', [['', t('any')], ...SCENES.map((s) => [s, s])], '');
  const mode = select('mode', MODES.map((m) => [m, m]), 'standard');
  const count = h('input', { type: 'number', name: 'reply_count', min: '1', max: '5', value: '3' });
  const alert = alertBox();
  const out = h('div', { id: 'playground-out', 'aria-live': 'polite' });
  const button = h('button', { type: 'submit' }, t('send'));
  const form = h('form', { class: 'card', onsubmit: async (e) => {
    e.preventDefault();
    showAlert(alert, '');
    button.disabled = true;
    out.replaceChildren(h('p', { class: 'muted' }, t('loading')));
    const body = { mode: mode.value, message: message.value, reply_count: Number(count.value) };
    if (context.value.trim()) body.context = context.value;
    if (scene.value) body.scene = scene.value;
    const analyzeBody = { message: message.value };
    if (context.value.trim()) analyzeBody.context = context.value;
    const [rep, ana] = await Promise.all([api('playground/reply', body),
      api('playground/analyze', analyzeBody)]);
    button.disabled = false;
    out.replaceChildren();
    if (!rep.ok) { showAlert(alert, rep.msg); return; }
    out.append(h('p', { class: 'notice' }, t('charged', { mode: rep.data.mode,
      rid: rep.data.request_id, tokens: rep.data.tokens_used })));
    out.append(h('ol', { class: 'replies' }, rep.data.replies.map((x) => h('li', { class: 'card' },
      h('p', { class: 'reply' }, x.text),
      h('p', { class: 'muted' }, t('score') + ' ' + Number(x.score).toFixed(2)),
      x.eq_analysis ? h('p', { class: 'analysis' }, x.eq_analysis) : null))));
    if (ana.ok) {
      const a = ana.data;
      out.append(h('h2', {}, t('analysis')), h('dl', { class: 'facts', id: 'analysis' },
        h('dt', {}, t('emotion')), h('dd', {}, a.emotion),
        h('dt', {}, t('intensity')), h('dd', {}, Number(a.intensity).toFixed(2)),
        h('dt', {}, t('need')), h('dd', {}, a.underlying_need),
        h('dt', {}, t('stage')), h('dd', {}, a.relationship_stage),
        h('dt', {}, t('strategy')), h('dd', {}, a.suggested_strategy)));
    }
  } }, alert, h('p', { class: 'notice' }, t('charged_note')), field(t('message'), message),
  field(t('context'), context),
  h('div', { class: 'row' }, field(t('scene'), scene), field(t('mode'), mode),
    field(t('reply_count'), count)), button);
  return page(t('playground'), form, out);
}

// ---------------------------------------------------------------- webhooks

function deliveryRows(list, onPick) {
  if (!list.length) return h('p', { class: 'muted' }, t('no_deliveries'));
  return h('div', { class: 'scroll' }, h('table', { id: 'deliveries' },
    h('thead', {}, h('tr', {}, [t('event'), t('created'), t('status'), t('attempts'),
      t('last_status'), t('error'), t('actions')].map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, list.map((d) => h('tr', { 'data-delivery': d.delivery_id },
      h('td', {}, d.event), h('td', {}, fmtTime(d.created_at)),
      h('td', {}, h('span', { class: 'badge ' + d.status }, d.status)), h('td', {}, d.attempts),
      h('td', {}, d.last_status === null ? '—' : d.last_status),
      h('td', { class: 'wrap' }, d.last_error || ''),
      h('td', {}, h('button', { type: 'button', class: 'secondary', onclick: () => onPick(d) },
        t('details'))))))));
}

async function webhooksPage() {
  const r = await api('webhooks');
  if (!r.ok) return page(t('webhooks'), h('p', { class: 'alert', role: 'alert' }, r.msg));
  const url = h('input', { type: 'url', name: 'url', value: r.data.default_url,
    placeholder: 'https://example.com/hooks/eq' });
  // Changing where every result goes asks for the password again.
  const urlPass = h('input', { type: 'password', name: 'url_password',
    autocomplete: 'current-password' });
  const urlAlert = alertBox();
  const urlForm = h('form', { class: 'card row-form', onsubmit: async (e) => {
    e.preventDefault();
    showAlert(urlAlert, '');
    const x = await api('webhooks/url', { url: url.value, password: urlPass.value });
    if (!x.ok) { showAlert(urlAlert, x.msg); return; }
    urlPass.value = '';
    toast(t('saved'));
  } }, urlAlert, field(t('default_url'), url), field(t('url_password'), urlPass),
  h('button', { type: 'submit' }, t('save')));

  const pass = h('input', { type: 'password', name: 'password', autocomplete: 'current-password' });
  const secretOut = h('div', { id: 'secret-out', 'aria-live': 'polite' });
  const secretAlert = alertBox();
  const showSecrets = (data) => {
    pass.value = '';
    secretOut.replaceChildren(h('p', {}, t('secret')), copyBox(data.secret),
      data.previous_secret ? h('p', { class: 'muted' },
        t('previous_secret', { until: fmtTime(data.previous_secret_until) })) : '',
      data.previous_secret ? copyBox(data.previous_secret) : '');
  };
  const secretForm = h('form', { class: 'card', onsubmit: (e) => e.preventDefault() },
    h('h2', {}, t('secret')), h('p', { class: 'muted' }, t('secret_hint')), secretAlert,
    field(t('password'), pass),
    h('div', { class: 'buttons' },
      h('button', { type: 'button', onclick: async () => {
        showAlert(secretAlert, '');
        const x = await api('webhooks/secret', { password: pass.value });
        if (!x.ok) { showAlert(secretAlert, x.msg); return; }
        showSecrets(x.data);
      } }, t('show_secret')),
      h('button', { type: 'button', class: 'secondary', onclick: async () => {
        showAlert(secretAlert, '');
        if (!confirm(t('confirm_rotate_secret'))) return;
        const x = await api('webhooks/rotate', { password: pass.value });
        if (!x.ok) { showAlert(secretAlert, x.msg); return; }
        showSecrets(x.data);
      } }, t('rotate_secret'))),
    secretOut);

  const testOut = h('p', { id: 'test-out', 'aria-live': 'polite' });
  const detail = h('div', { id: 'delivery-detail' });
  const log = h('div', {});
  async function pick(d) {
    const x = await api('deliveries/' + encodeURIComponent(d.delivery_id));
    if (!x.ok) { toast(x.msg); return; }
    const dd = x.data.delivery;
    detail.replaceChildren(h('div', { class: 'card' },
      h('h2', {}, dd.event + ' · ' + dd.delivery_id),
      h('p', { class: 'mono wrap' }, dd.url),
      h('div', { class: 'scroll' }, h('table', {},
        h('thead', {}, h('tr', {}, [t('attempt'), t('at'), t('status'), t('latency'),
          t('error')].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, x.data.attempts.map((a) => h('tr', {}, h('td', {}, a.number),
          h('td', {}, fmtTime(a.at)), h('td', {}, a.http_status === null ? '—' : a.http_status),
          h('td', {}, a.latency_ms + ' ms'), h('td', { class: 'wrap' }, a.error)))))),
      dd.status !== 'pending' ? h('button', { type: 'button', onclick: async () => {
        const y = await api('deliveries/replay', { delivery_id: dd.delivery_id });
        toast(y.ok ? t('replayed') : y.msg);
        await refreshLog();
      } }, t('replay')) : ''));
    detail.querySelector('h2').setAttribute('tabindex', '-1');
    detail.querySelector('h2').focus();
  }
  async function refreshLog() {
    const x = await api('webhooks');
    if (x.ok) log.replaceChildren(deliveryRows(x.data.deliveries, pick));
  }
  log.replaceChildren(deliveryRows(r.data.deliveries, pick));
  const testButton = h('button', { type: 'button', id: 'send-test', onclick: async () => {
    testButton.disabled = true;
    const x = await api('webhooks/test', {});
    if (!x.ok) { testButton.disabled = false; testOut.textContent = x.msg; return; }
    testOut.textContent = t('test_waiting', { id: x.data.delivery_id });
    let d = x.data;
    for (let i = 0; i < 30 && d.status === 'pending'; i++) {
      await new Promise((res) => setTimeout(res, 500));
      const y = await api('deliveries/' + encodeURIComponent(x.data.delivery_id));
      if (y.ok) d = y.data.delivery;
    }
    testButton.disabled = false;
    testOut.textContent = t('test_sent', { id: d.delivery_id, status: d.status
      + (d.last_status ? ' (HTTP ' + d.last_status + ')' : '')
      + (d.last_error ? ' — ' + d.last_error : '') });
    testOut.dataset.status = d.status;
    await refreshLog();
  } }, t('send_test'));
  return page(t('webhooks'), urlForm, secretForm,
    h('div', { class: 'card' }, testButton, testOut),
    h('h2', {}, t('deliveries')), log, detail);
}

// ---------------------------------------------------------------- tasks

async function tasksPage() {
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  const status = select('status', [['', t('any')], ['queued', 'queued'], ['running', 'running'],
    ['succeeded', 'succeeded'], ['failed', 'failed']], params.get('status') || '');
  const mode = select('mode', [['', t('any')], ...MODES.map((m) => [m, m])], params.get('mode') || '');
  const list = h('div', { id: 'task-list' });
  async function refresh() {
    const q = new URLSearchParams();
    if (status.value) q.set('status', status.value);
    if (mode.value) q.set('mode', mode.value);
    const r = await api('tasks' + (q.toString() ? '?' + q : ''));
    if (!r.ok) { list.replaceChildren(h('p', { class: 'alert', role: 'alert' }, r.msg)); return; }
    if (!r.data.tasks.length) { list.replaceChildren(h('p', { class: 'muted' }, t('no_tasks'))); return; }
    list.replaceChildren(h('div', { class: 'scroll' }, h('table', {},
      h('thead', {}, h('tr', {}, [t('task'), t('mode'), t('status'), t('created'), t('finished')]
        .map((x) => h('th', { scope: 'col' }, x)))),
      h('tbody', {}, r.data.tasks.map((x) => h('tr', {},
        h('td', { class: 'mono' }, h('a', { href: '#/tasks/' + x.task_id }, x.task_id)),
        h('td', {}, x.mode), h('td', {}, h('span', { class: 'badge ' + x.status }, x.status)),
        h('td', {}, fmtTime(x.created_at)), h('td', {}, fmtTime(x.finished_at))))))));
  }
  const form = h('form', { class: 'card row-form', onsubmit: (e) => { e.preventDefault(); refresh(); } },
    field(t('status'), status), field(t('mode'), mode), h('button', { type: 'submit' }, t('filter')));
  await refresh();
  return page(t('tasks'), form, list);
}

async function taskPage(id) {
  const r = await api('tasks/' + encodeURIComponent(id));
  const back = h('p', {}, h('a', { href: '#/tasks' }, '← ' + t('back')));
  if (!r.ok) return page(t('task'), back, h('p', { class: 'alert', role: 'alert' }, r.msg));
  const x = r.data;
  const parts = [back, h('dl', { class: 'facts' },
    h('dt', {}, t('task')), h('dd', { class: 'mono' }, x.task_id),
    h('dt', {}, t('status')), h('dd', {}, h('span', { class: 'badge ' + x.status }, x.status)),
    h('dt', {}, t('mode')), h('dd', {}, x.mode),
    h('dt', {}, t('created')), h('dd', {}, fmtTime(x.created_at)),
    h('dt', {}, t('finished')), h('dd', {}, fmtTime(x.finished_at)))];
  if (x.result) {
    parts.push(h('ol', { class: 'replies' }, x.result.replies.map((rep) => h('li', { class: 'card' },
      h('p', { class: 'reply' }, rep.text), h('p', { class: 'muted' }, t('score') + ' ' + rep.score)))));
  }
  if (x.error) {
    parts.push(h('p', { class: 'alert', role: 'alert' },
      x.error.code + ': ' + taskError(x.error.code, x.error.msg)));
  }
  if (x.webhook) {
    parts.push(h('h2', {}, t('webhooks')), h('dl', { class: 'facts' },
      h('dt', {}, 'URL'), h('dd', { class: 'mono wrap' }, x.webhook.url),
      h('dt', {}, t('status')), h('dd', {}, x.webhook.status),
      h('dt', {}, t('attempts')), h('dd', {}, x.webhook.attempts),
      h('dt', {}, t('last_status')), h('dd', {}, x.webhook.last_status === null ? '—'
        : x.webhook.last_status)));
  }
  return page(t('task') + ' ' + x.task_id, ...parts);
}

// ---------------------------------------------------------------- account

function accountPage() {
  const current = h('input', { type: 'password', name: 'current', autocomplete: 'current-password',
    required: true });
  const next = h('input', { type: 'password', name: 'new', autocomplete: 'new-password',
    required: true, minlength: '10' });
  const alert = alertBox();
  const form = h('form', { class: 'card narrow', onsubmit: async (e) => {
    e.preventDefault();
    showAlert(alert, '');
    const r = await api('password', { current_password: current.value, new_password: next.value });
    if (!r.ok) { showAlert(alert, r.msg); return; }
    // The session has a new id (its cookie came with the answer) and a new
    // CSRF token.
    state.csrf = r.data.csrf;
    current.value = '';
    next.value = '';
    toast(t('password_changed'));
  } }, h('h2', {}, t('change_password')), alert, field(t('current_password'), current),
  field(t('new_password'), next, t('password_rule')),
  h('button', { type: 'submit' }, t('change_password')));
  const nav = navigation;
  const out = h('button', { type: 'button', class: 'secondary', id: 'signout', onclick: async () => {
    await api('signout', {});
    state.me = null;
    state.csrf = '';
    if (isCurrent(nav)) go('#/signin');
  } }, t('signout'));
  return page(t('account'), h('p', {}, t('signed_in_as', { email: state.me.email })), form,
    h('div', { class: 'card narrow' }, out));
}

// ---------------------------------------------------------------- router

async function render() {
  const nav = ++navigation;
  document.getElementById('toast').classList.remove('show');  // it spoke of the last page
  const hash = location.hash || '#/overview';
  const [path] = hash.slice(2).split('?');
  const parts = path.split('/');
  const name = parts[0];
  let view;
  const linkKind = name === 'welcome' || name === 'reset';
  // First of all, before any request: a link's token leaves the address bar.
  const token = linkKind ? takeLinkToken(name, parts.slice(1).join('/')) : '';
  navigationHash = location.hash;
  if (linkKind) {
    state.me = null;
    renderNav('');
    view = await linkPage(name, token, nav);
  } else if (name === 'signin' || name === 'register') {
    renderNav('');
    view = name === 'signin' ? signinPage() : registerPage();
  } else {
    if (!(await loadMe(nav))) {
      if (isCurrent(nav)) go('#/signin');
      return;
    }
    renderNav(name);
    switch (name) {
      case 'keys': view = await keysPage(); break;
      case 'usage': view = await usagePage(); break;
      case 'playground': view = playgroundPage(); break;
      case 'webhooks': view = await webhooksPage(); break;
      case 'tasks': view = parts[1] ? await taskPage(parts[1]) : await tasksPage(); break;
      case 'account': view = accountPage(); break;
      default: view = overviewPage(); renderNav('overview');
    }
  }
  // Overtaken while it waited: the newer navigation draws, this one never.
  if (!isCurrent(nav)) return;
  mount(view);
  // The charts end today: where they scroll (375 px), the latest days are
  // the ones to show first.
  for (const wrap of document.querySelectorAll('.chart-wrap')) wrap.scrollLeft = wrap.scrollWidth;
  const heading = document.querySelector('main h1');
  if (heading && render.moved) { heading.setAttribute('tabindex', '-1'); heading.focus(); }
  render.moved = true;
}

// The texts of the static shell (index.html) in the current language.
function labelShell() {
  document.documentElement.lang = lang === 'zh' ? 'zh-CN' : 'en';
  document.querySelector('.skip').textContent = t('skip');
  document.getElementById('lang-label').textContent = t('language');
}

function setLanguage(l) {
  lang = l;
  localStorage.setItem('eq.lang', l);
  labelShell();
  render();
}

document.addEventListener('DOMContentLoaded', () => {
  const picker = document.getElementById('lang');
  picker.value = lang;
  picker.addEventListener('change', () => setLanguage(picker.value));
  labelShell();
  window.addEventListener('hashchange', render);
  render();
});
