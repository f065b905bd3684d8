// The client's own rules, with a scripted fetch instead of a service: which
// answers are retried and how often, waitForTask's bound, bad arguments.
import assert from "node:assert/strict";
import { test } from "node:test";
import { EqReply, EqReplyError, TaskWaitTimeoutError } from "eq-reply";

/** A fetch answering from a list of [status, body, headers]; records each request. */
function scripted(answers) {
  const requests = [];
  const f = async (url, init) => {
    requests.push({ url, init, headers: new Headers(init.headers) });
    const [status, body, headers = {}] = answers[Math.min(requests.length, answers.length) - 1];
    const text = typeof body === "string" ? body : JSON.stringify(body);
    return new Response(text, { status, headers: { "X-Request-Id": `req_${requests.length}`, ...headers } });
  };
  return { fetch: f, requests };
}

const ok = (data) => [200, { code: 0, msg: "ok", data }];
const err = (status, headers = {}) => [status, { code: status, msg: `error ${status}`, data: null }, headers];
const created = { task_id: "tsk_01JAAAAAAAAAAAAAAAAAAAAAAA", status: "queued" };
const make = (s, options = {}) => new EqReply({ baseUrl: "http://svc.test/", apiKey: "k", fetch: s.fetch, ...options });

test("503 and 429 are retried, at most maxRetries times, with the same Idempotency-Key", async () => {
  const s = scripted([err(503, { "Retry-After": "0" }), err(429, { "Retry-After": "0" }), ok(created)]);
  const result = await make(s).replyAsync({ mode: "fast", message: "hi" });
  assert.equal(s.requests.length, 3);
  const keys = s.requests.map((r) => r.headers.get("Idempotency-Key"));
  assert.equal(new Set(keys).size, 1);
  assert.equal(keys[0], result.idempotency_key);
  assert.equal(s.requests[0].url, "http://svc.test/api/v1/reply/async");

  const always = scripted([err(503, { "Retry-After": "0" })]);
  await assert.rejects(make(always).quota(), (e) => e instanceof EqReplyError && e.status === 503);
  assert.equal(always.requests.length, 4); // the call and 3 retries

  const once = scripted([err(429, { "Retry-After": "0" })]);
  await assert.rejects(make(once, { maxRetries: 1 }).quota(), (e) => e.status === 429 && e.requestId === "req_2");
  assert.equal(once.requests.length, 2);
});

test("a Retry-After beyond the wait budget is not waited for", async () => {
  const s = scripted([err(429, { "Retry-After": "30" })]);
  await assert.rejects(make(s, { maxRetryWaitMs: 29_999 }).quota(), (e) => e.retryAfterSeconds === 30);
  assert.equal(s.requests.length, 1);
  const date = scripted([err(503, { "Retry-After": new Date(Date.now() + 3_600_000).toUTCString() })]);
  await assert.rejects(make(date).quota(), (e) => e.retryAfterSeconds >= 3590);
  assert.equal(date.requests.length, 1);
});

test("other errors are not retried; a page that is no envelope is still an EqReplyError", async () => {
  for (const status of [400, 401, 402, 404, 409, 500, 504]) {
    const s = scripted([err(status, { "Retry-After": "0" })]);
    await assert.rejects(make(s).reply({ mode: "fast", message: "hi" }), (e) => e.status === status);
    assert.equal(s.requests.length, 1, `status ${status}`);
  }
  const proxy = scripted([[502, "<html>Bad Gateway</html>", { "Content-Type": "text/html" }]]);
  await assert.rejects(make(proxy).quota(), (e) => {
    assert.ok(e instanceof EqReplyError);
    assert.equal(e.status, 502);
    assert.equal(e.code, 502);
    assert.match(e.msg, /without the service's JSON envelope/);
    return true;
  });
});

test("requests carry the key, JSON and no Idempotency-Key on a sync reply unless given", async () => {
  const s = scripted([ok({ replies: [], request_id: "req_x", mode: "fast", tokens_used: 1 })]);
  await make(s).reply({ mode: "fast", message: "hi" });
  const { init, headers } = s.requests[0];
  assert.equal(init.method, "POST");
  assert.equal(headers.get("Authorization"), "Bearer k");
  assert.match(headers.get("Content-Type"), /^application\/json/);
  assert.equal(headers.get("Idempotency-Key"), null);
  assert.deepEqual(JSON.parse(init.body), { mode: "fast", message: "hi" });
  await make(s).reply({ mode: "fast", message: "hi" }, { idempotencyKey: "abc" });
  assert.equal(s.requests[1].headers.get("Idempotency-Key"), "abc");
  await make(s).task("tsk_a/b");
  assert.equal(s.requests[2].url, "http://svc.test/api/v1/task/tsk_a%2Fb");
});

test("waitForTask polls to the end, and gives up at its bound", async () => {
  const task = (status) => ok({ ...created, status, mode: "fast" });
  const s = scripted([task("queued"), task("running"), task("succeeded")]);
  const done = await make(s).waitForTask(created.task_id, { intervalMs: 0 });
  assert.equal(done.status, "succeeded");
  assert.equal(s.requests.length, 3);

  const failed = scripted([task("failed")]);
  assert.equal((await make(failed).waitForTask(created.task_id)).status, "failed");

  const stuck = scripted([task("running")]);
  await assert.rejects(make(stuck).waitForTask(created.task_id, { timeoutMs: 0 }), (e) => {
    assert.ok(e instanceof TaskWaitTimeoutError);
    assert.equal(e.lastStatus, "running");
    assert.equal(e.taskId, created.task_id);
    return true;
  });
  assert.equal(stuck.requests.length, 1);
});

test("bad arguments are TypeErrors naming what is wrong", async () => {
  const s = scripted([ok(created)]);
  assert.throws(() => new EqReply({ baseUrl: "svc.test", apiKey: "k" }), /not an absolute URL/);
  assert.throws(() => new EqReply({ baseUrl: "ftp://svc.test", apiKey: "k" }), /http or https/);
  assert.throws(() => new EqReply({ baseUrl: "http://svc.test", apiKey: "" }), /apiKey/);
  assert.throws(() => new EqReply({ baseUrl: "http://svc.test", apiKey: "k", maxRetries: -1 }), /maxRetries/);
  await assert.rejects(make(s).replyAsync({ mode: "fast", message: "hi" }, { idempotencyKey: "é" }), /idempotencyKey/);
  await assert.rejects(make(s).task(""), TypeError);
  await assert.rejects(make(s).waitForTask("t", { intervalMs: -5 }), /intervalMs/);
  assert.equal(s.requests.length, 0);
});
