// End-to-end check of eq-mcp with the official MCP TypeScript SDK client
// (@modelcontextprotocol/sdk, pinned in package.json), over stdio, against a
// running EQ Reply stack. Run by tests/integration/mcp_test.cc:
//
//   EQ_MCP_BIN=build/eq-mcp EQ_API_URL=http://127.0.0.1:PORT EQ_API_KEY=eq_live_... \
//     node tests/mcp/client.mjs
//
// Every mismatch is fatal (exit 1, reason on stderr). On success the last
// line of stdout is one JSON object the C++ test checks against the API:
// {"ok":true,"task_id":...,"quota_before":{...},"quota_after":{...}}.
// eq-mcp's own logs (stderr) pass through to our stderr.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { spawn } from 'node:child_process';
import net from 'node:net';
import assert from 'node:assert/strict';

const bin = process.env.EQ_MCP_BIN;
const apiUrl = process.env.EQ_API_URL;
const apiKey = process.env.EQ_API_KEY;
if (!bin || !apiUrl || !apiKey) {
  console.error('client.mjs: set EQ_MCP_BIN, EQ_API_URL and EQ_API_KEY');
  process.exit(2);
}

const TOOLS = ['generate_reply', 'generate_reply_async', 'get_task', 'analyze_message', 'get_quota'];
const EMOTIONS = ['joy', 'affection', 'anger', 'sadness', 'anxiety', 'disgust', 'surprise', 'neutral'];

function step(name) {
  console.log(`mcp-e2e: ${name}`);
}

// Connects an SDK client to a fresh eq-mcp with the given environment and
// returns it with the protocol version the SDK agreed to.
async function connect(env) {
  const transport = new StdioClientTransport({ command: bin, args: [], env, stderr: 'inherit' });
  let negotiated = null;
  // The SDK hands the agreed version to transports that want it (HTTP ones
  // put it in a header); stdio does not, so we catch it here.
  transport.setProtocolVersion = (v) => { negotiated = v; };
  const client = new Client({ name: 'eq-mcp-e2e', version: '1.0.0' });
  await client.connect(transport);
  return { client, negotiated: () => negotiated };
}

function textOf(result) {
  assert.ok(Array.isArray(result.content) && result.content.length >= 1, 'content blocks');
  assert.equal(result.content[0].type, 'text');
  return result.content[0].text;
}

// A successful call: structuredContent present (the SDK has already
// validated it against the tool's outputSchema) and the text block is the
// same JSON.
async function callOk(client, name, args) {
  const r = await client.callTool({ name, arguments: args });
  assert.notEqual(r.isError, true, `${name} failed: ${JSON.stringify(r.content)}`);
  assert.ok(r.structuredContent && typeof r.structuredContent === 'object', `${name}: structuredContent`);
  assert.deepEqual(JSON.parse(textOf(r)), r.structuredContent, `${name}: text block = structuredContent`);
  return r.structuredContent;
}

async function callErr(client, name, args, ...needles) {
  const r = await client.callTool({ name, arguments: args });
  assert.equal(r.isError, true, `${name} should fail: ${JSON.stringify(r)}`);
  assert.equal(r.structuredContent, undefined, `${name}: no structuredContent on errors`);
  const text = textOf(r);
  for (const n of needles) assert.ok(text.includes(n), `${name}: '${n}' not in: ${text}`);
  return text;
}

// Runs eq-mcp as a bare child process, writes `lines`, optionally sends a
// signal, and returns {code, signal, stdout, stderr}.
function raw(env, lines, { signal = null, endInput = true, waitMs = 300 } = {}) {
  return new Promise((resolve, reject) => {
    const p = spawn(bin, [], { env: { PATH: process.env.PATH, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    p.on('error', reject);
    const timer = setTimeout(() => { p.kill('SIGKILL'); reject(new Error(`eq-mcp did not exit; stderr: ${stderr}`)); }, 10000);
    p.on('close', (code, sig) => { clearTimeout(timer); resolve({ code, signal: sig, stdout, stderr }); });
    for (const l of lines) p.stdin.write(l + '\n');
    if (signal) {
      setTimeout(() => p.kill(signal), waitMs);
    } else if (endInput) {
      p.stdin.end();
    }
  });
}

function jsonLines(stdout) {
  assert.ok(stdout === '' || stdout.endsWith('\n'), 'stdout ends with a newline');
  return stdout.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l));  // throws on a non-JSON line
}

const env = { EQ_API_URL: apiUrl, EQ_API_KEY: apiKey, EQ_LOG_LEVEL: 'warn' };

async function main() {
  // --- initialize, version negotiation (the SDK asks for its latest, newer than ours)
  step('initialize');
  const { client, negotiated } = await connect(env);
  assert.equal(client.getServerVersion().name, 'eq-mcp');
  assert.equal(negotiated(), '2025-06-18');
  assert.ok(client.getServerCapabilities().tools, 'tools capability');
  assert.ok(client.getInstructions()?.includes('generate_reply'), 'instructions');
  await client.ping();

  // --- tools/list with schemas
  step('tools/list');
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOLS].sort());
  for (const t of tools) {
    assert.equal(t.inputSchema.type, 'object', `${t.name} inputSchema`);
    assert.equal(t.outputSchema?.type, 'object', `${t.name} outputSchema`);
    assert.ok(t.description.length > 20, `${t.name} description`);
  }
  const reply = tools.find((t) => t.name === 'generate_reply');
  assert.deepEqual([...reply.inputSchema.required].sort(), ['message', 'mode']);
  assert.deepEqual(reply.inputSchema.properties.mode.enum, ['fast', 'standard', 'perfect']);
  assert.equal(reply.inputSchema.properties.reply_count.maximum, 5);
  assert.ok(tools.find((t) => t.name === 'generate_reply_async').inputSchema.properties.webhook_url);
  assert.equal(tools.find((t) => t.name === 'get_quota').annotations?.readOnlyHint, true);
  // Only the tool taking a webhook_url reaches the open world (issue 27).
  for (const t of tools) {
    assert.equal(t.annotations?.openWorldHint, t.name === 'generate_reply_async', `${t.name} openWorldHint`);
  }

  // --- quota before
  step('get_quota');
  const before = await callOk(client, 'get_quota', {});
  for (const m of ['fast', 'standard', 'perfect']) assert.equal(typeof before.quota[m], 'number');

  // --- sync reply: exactly one fast call in this script
  step('generate_reply');
  const r = await callOk(client, 'generate_reply', {
    mode: 'fast', message: '今天被老板骂了，好难过', reply_count: 3, scene: 'work',
  });
  assert.equal(r.mode, 'fast');
  assert.equal(r.replies.length, 3);
  for (let i = 1; i < r.replies.length; i++) assert.ok(r.replies[i - 1].score >= r.replies[i].score, 'sorted by score');
  assert.ok(r.tokens_used > 0);

  // --- async reply, then get_task until it is final: exactly one perfect call
  step('generate_reply_async');
  const created = await callOk(client, 'generate_reply_async', {
    mode: 'perfect', message: 'I waited an hour and you never showed up.', reply_count: 2,
  });
  assert.match(created.task_id, /^tsk_/);
  assert.ok(['queued', 'running'].includes(created.status));
  step('get_task');
  let task;
  const deadline = Date.now() + 60000;
  // Backs off from 100 ms to 2 s: polls count against the key's rate limit.
  for (let wait = 100; ; wait = Math.min(wait * 2, 2000)) {
    task = await callOk(client, 'get_task', { task_id: created.task_id });
    assert.equal(task.task_id, created.task_id);
    if (task.status === 'succeeded' || task.status === 'failed') break;
    assert.ok(Date.now() < deadline, `task still ${task.status} after 60 s`);
    await new Promise((res) => setTimeout(res, wait));
  }
  assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  assert.equal(task.mode, 'perfect');
  assert.equal(task.result.replies.length, 2);
  assert.equal(task.error, null);

  // --- analyze (charges nothing)
  step('analyze_message');
  const a = await callOk(client, 'analyze_message', { message: '你怎么又迟到了！我等了你一个小时' });
  assert.ok(EMOTIONS.includes(a.emotion), a.emotion);
  assert.ok(a.intensity >= 0 && a.intensity <= 1);

  // --- quota after: one fast unit and one perfect unit gone
  step('quota decreases');
  const after = await callOk(client, 'get_quota', {});
  assert.equal(after.quota.fast, before.quota.fast - 1, 'fast quota');
  assert.equal(after.quota.perfect, before.quota.perfect - 1, 'perfect quota');
  assert.equal(after.quota.standard, before.quota.standard, 'standard quota');

  // --- errors come back as isError results with the API's message
  step('tool errors');
  await callErr(client, 'generate_reply', { mode: 'fast', message: 'hi', reply_count: 9 },
    'EQ Reply API error 400', "field 'reply_count' must be an integer from 1 to 5");
  await callErr(client, 'generate_reply', { mode: 'fast', message: 'hi', reply_cnt: 2 },
    "field 'reply_cnt' is not a known field");
  await callErr(client, 'analyze_message', { message: '   ' }, "field 'message'");
  await callErr(client, 'get_task', { task_id: 'tsk_01ARZ3NDEKTSV4RRFFQ69G5FAV' }, '404', 'not found');
  await callErr(client, 'get_task', {}, "'task_id' is required");
  // An unknown tool is a protocol error, not a tool result.
  await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }),
    (e) => e.code === -32602 && /unknown tool/.test(e.message));
  const unchanged = await callOk(client, 'get_quota', {});
  assert.deepEqual(unchanged.quota, after.quota, 'failed calls charge nothing');
  await client.close();

  // --- a wrong key: the API's 401 message, as a tool error
  step('wrong key');
  const bad = await connect({ ...env, EQ_API_KEY: 'eq_live_' + 'A'.repeat(43) });
  await callErr(bad.client, 'get_quota', {}, 'EQ Reply API error 401', 'invalid API key', 'EQ_API_KEY');
  await callErr(bad.client, 'generate_reply', { mode: 'fast', message: 'hi' }, '401');
  await bad.client.close();

  // --- nothing listening at EQ_API_URL
  step('unreachable API');
  const down = await connect({ ...env, EQ_API_URL: 'http://127.0.0.1:1' });
  await callErr(down.client, 'get_quota', {}, 'cannot reach the EQ Reply API at http://127.0.0.1:1', 'EQ_API_URL');
  await down.client.close();

  // --- raw stdio: what the SDK hides
  step('missing EQ_API_KEY');
  const noKey = await raw({ EQ_API_URL: apiUrl }, []);
  assert.equal(noKey.code, 2);
  assert.match(noKey.stderr, /EQ_API_KEY is not set/);
  assert.equal(noKey.stdout, '', 'nothing on stdout');

  step('2024-11-05 and 2025-03-26 sessions, batches, EOF');
  const init = (v) => JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: v, capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
  const initialized = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' });
  const old = await raw(env, [init('2024-11-05'), initialized,
    JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'get_quota', arguments: {} } }),
    JSON.stringify([{ jsonrpc: '2.0', id: 3, method: 'ping' }])]);
  assert.equal(old.code, 0, 'EOF is a clean exit');
  let msgs = jsonLines(old.stdout);
  assert.equal(msgs.length, 3);
  assert.equal(msgs[0].result.protocolVersion, '2024-11-05');
  assert.equal(msgs[1].result.isError, false);
  assert.equal(msgs[1].result.structuredContent, undefined, 'no structuredContent before 2025-06-18');
  assert.equal(JSON.parse(msgs[1].result.content[0].text).quota.fast, after.quota.fast);
  assert.equal(msgs[2].error.code, -32600, 'no batches in 2024-11-05');

  const mid = await raw(env, [init('2025-03-26'), initialized,
    JSON.stringify([{ jsonrpc: '2.0', id: 'a', method: 'ping' },
      { jsonrpc: '2.0', method: 'notifications/whatever' },
      { jsonrpc: '2.0', id: 'b', method: 'tools/call', params: { name: 'get_quota' } },
      { jsonrpc: '2.0', id: 'c', method: 'nope' }]),
    '{oops']);
  assert.equal(mid.code, 0);
  msgs = jsonLines(mid.stdout);
  assert.equal(msgs.length, 3);
  assert.ok(Array.isArray(msgs[1]) && msgs[1].length === 3, 'batch answered as one array');
  assert.deepEqual(msgs[1].map((m) => m.id), ['a', 'b', 'c']);
  assert.equal(msgs[1][1].result.isError, false);
  assert.equal(msgs[1][2].error.code, -32601);
  assert.equal(msgs[2].error.code, -32700);
  assert.equal(msgs[2].id, null);

  step('SIGTERM');
  const term = await raw(env, [init('2025-06-18')], { signal: 'SIGTERM', waitMs: 500 });
  assert.equal(term.code, 0, `exit after SIGTERM: ${term.code} ${term.signal}`);
  assert.equal(jsonLines(term.stdout).length, 1);

  // SIGTERM while a call is in flight: an API that accepts the connection
  // and never answers. eq-mcp must abandon the call and exit 0 at once, not
  // wait out its 200 s request timeout.
  step('SIGTERM during a call');
  const held = [];
  const silent = net.createServer((sock) => { held.push(sock); });
  await new Promise((res) => silent.listen(0, '127.0.0.1', res));
  const t0 = Date.now();
  const busy = await raw({ ...env, EQ_API_URL: `http://127.0.0.1:${silent.address().port}` },
    [init('2025-06-18'), initialized,
      JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'get_quota', arguments: {} } })],
    { signal: 'SIGTERM', waitMs: 800 });
  const tookMs = Date.now() - t0;
  for (const s of held) s.destroy();
  silent.close();
  assert.ok(held.length >= 1, 'the call reached the silent API');
  assert.equal(busy.code, 0, `exit after SIGTERM mid-call: ${busy.code} ${busy.signal}`);
  assert.ok(tookMs < 5000, `exit took ${tookMs} ms`);
  msgs = jsonLines(busy.stdout);
  assert.equal(msgs.length, 2);
  assert.equal(msgs[1].id, 2);
  assert.equal(msgs[1].result.isError, true, 'the abandoned call is answered as a tool error');
  assert.match(msgs[1].result.content[0].text, /cancelled/);

  console.log(JSON.stringify({ ok: true, task_id: created.task_id, quota_before: before.quota, quota_after: after.quota }));
}

main().catch((e) => {
  console.error(`mcp-e2e FAILED: ${e.stack || e}`);
  process.exit(1);
});
