// The TypeScript client against a live stack (tests/clients/run.sh): every
// endpoint an API key calls, the error type, idempotency, task polling and
// the webhook verifier on a real delivery.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { EqReply, EqReplyError, verifyWebhook, WebhookVerificationError } from "eq-reply";
import { baseUrl, env, recordingFetch, signBoth, startReceiver } from "./helpers.mjs";

const client = () => new EqReply({ baseUrl: baseUrl(), apiKey: env("EQ_API_KEY") });
const EMOTIONS = ["joy", "affection", "anger", "sadness", "anxiety", "disgust", "surprise", "neutral"];

test("reply returns reply_count replies, best first", async () => {
  const data = await client().reply({ mode: "fast", message: "今天被老板骂了，好难过", reply_count: 3 });
  assert.equal(data.mode, "fast");
  assert.equal(data.replies.length, 3);
  assert.match(data.request_id, /^req_/);
  for (const r of data.replies) {
    assert.ok(r.text.length > 0 && r.eq_analysis.length > 0);
    assert.ok(r.score >= 0 && r.score <= 1);
  }
  const scores = data.replies.map((r) => r.score);
  assert.deepEqual(scores, [...scores].sort((a, b) => b - a));
});

test("analyze reads the emotion and charges nothing", async () => {
  const c = client();
  const before = await c.quota();
  const a = await c.analyze({ message: "你最近是不是很忙？都不怎么回我消息了", context: "暧昧期" });
  assert.ok(EMOTIONS.includes(a.emotion), a.emotion);
  assert.ok(a.intensity >= 0 && a.intensity <= 1);
  assert.ok(a.underlying_need && a.suggested_strategy && a.relationship_stage);
  assert.deepEqual((await c.quota()).quota, before.quota);
});

test("quota reports units per mode; a sync reply takes one unit of its mode", async () => {
  const c = client();
  const q = await c.quota();
  assert.ok(["free", "pro", "ultra"].includes(q.tier));
  assert.match(q.expire_at, /^\d{4}-\d\d-\d\dT/);
  // The month's volume (docs/contract.md §11): a new account's limit, one
  // more unit used after the call, over all modes.
  assert.equal(q.monthly.limit, 100000);
  assert.match(q.monthly.resets_at, /^\d{4}-\d\d-01T00:00:00/);
  await c.reply({ mode: "standard", message: "明天面试，有点紧张" });
  const after = await c.quota();
  assert.equal(after.quota.standard, q.quota.standard - 1);
  assert.equal(after.quota.fast, q.quota.fast);
  assert.equal(after.monthly.used, q.monthly.used + 1);
});

test("an exhausted mode is a 402 EqReplyError, not retried", async () => {
  const rec = recordingFetch();
  const c = new EqReply({ baseUrl: baseUrl(), apiKey: env("EQ_API_KEY_NO_PERFECT"), fetch: rec.fetch });
  const error = await c.reply({ mode: "perfect", message: "你好" }).then(
    () => assert.fail("a mode with 0 units answered"),
    (e) => e,
  );
  assert.ok(error instanceof EqReplyError);
  assert.equal(error.status, 402);
  assert.equal(error.code, 402);
  assert.match(error.msg, /quota/);
  assert.match(error.requestId, /^req_[0-9A-Z]{26}$/);
  assert.equal(rec.calls.length, 1);
  // The other modes of that key still answer.
  assert.equal((await c.reply({ mode: "fast", message: "你好" })).replies.length, 1);
});

test("an unknown key is a 401 and a missing task a 404", async () => {
  const bad = new EqReply({ baseUrl: baseUrl(), apiKey: "eq_live_" + "A".repeat(43) });
  await assert.rejects(bad.quota(), (e) => e instanceof EqReplyError && e.status === 401 && e.code === 401);
  await assert.rejects(
    client().task("tsk_00000000000000000000000000"),
    (e) => e instanceof EqReplyError && e.status === 404 && /^req_/.test(e.requestId),
  );
});

test("a bad request is a 400 naming the field", async () => {
  await assert.rejects(
    client().reply({ mode: "fast", message: "hi", reply_count: 9 }),
    (e) => e instanceof EqReplyError && e.status === 400 && /reply_count/.test(e.msg),
  );
});

test("the same Idempotency-Key twice gives the same task", async () => {
  const c = client();
  const request = { mode: "fast", message: "周末要不要一起去看电影？", scene: "dating" };
  const key = `ts-idem-${Date.now()}-${Math.random()}`;
  const first = await c.replyAsync(request, { idempotencyKey: key });
  const second = await c.replyAsync(request, { idempotencyKey: key });
  assert.equal(second.task_id, first.task_id);
  assert.equal(first.idempotency_key, key);
  assert.equal(first.replayed, false);
  assert.equal(second.replayed, true);
  // Without one, each call gets a key of its own, returned for repeating it.
  const made = await c.replyAsync(request);
  assert.match(made.idempotency_key, /^[0-9a-f-]{36}$/);
  assert.notEqual(made.task_id, first.task_id);
  const again = await c.replyAsync(request, { idempotencyKey: made.idempotency_key });
  assert.equal(again.task_id, made.task_id);
  assert.equal(again.replayed, true);
});

let receiver;
before(async () => {
  receiver = await startReceiver();
});
after(() => receiver?.close());

test("an async reply is delivered by webhook, verified, and waitForTask sees it succeed", async () => {
  const secret = env("EQ_WEBHOOK_SECRET");
  const c = client();
  const created = await c.replyAsync({
    mode: "fast",
    message: "我升职了！",
    reply_count: 2,
    webhook_url: receiver.url,
  });
  assert.match(created.task_id, /^tsk_[0-9A-Z]{26}$/);

  const task = await c.waitForTask(created.task_id, { intervalMs: 100, timeoutMs: 30_000 });
  assert.equal(task.status, "succeeded");
  assert.equal(task.result?.replies.length, 2);

  const delivery = await receiver.next();
  const event = await verifyWebhook(delivery.body, delivery.headers, secret);
  assert.equal(event.event, "task.succeeded");
  assert.ok("task_id" in event && event.task_id === created.task_id);
  assert.deepEqual(event.replies, task.result.replies);

  // Each scheme alone is enough: with the other's headers gone.
  const { "x-service-signature": service, ...standardOnly } = delivery.headers;
  await verifyWebhook(delivery.body, standardOnly, secret);
  await verifyWebhook(delivery.body, { "X-Service-Signature": service }, secret);
  // A Headers object, a string body and a list of secrets (a rotation) work too.
  await verifyWebhook(delivery.body.toString("utf8"), new Headers(standardOnly), [
    "whsec_" + Buffer.alloc(32, 7).toString("base64"),
    secret,
  ]);

  // One byte changed: both signatures fail.
  const tampered = Buffer.from(delivery.body);
  tampered[tampered.indexOf("succeeded")] ^= 1;
  await assert.rejects(verifyWebhook(tampered, delivery.headers, secret), (e) => {
    assert.ok(e instanceof WebhookVerificationError);
    assert.match(e.message, /webhook-signature does not match; X-Service-Signature does not match/);
    return true;
  });
  // Another account's secret: rejected.
  const otherSecret = "whsec_" + Buffer.alloc(32, 1).toString("base64");
  await assert.rejects(verifyWebhook(delivery.body, delivery.headers, otherSecret), WebhookVerificationError);
  // No signature at all: rejected.
  await assert.rejects(verifyWebhook(delivery.body, { "content-type": "application/json" }, secret), /no signature/);
});

test("a correctly signed but stale webhook is rejected under either scheme", async () => {
  const secret = env("EQ_WEBHOOK_SECRET");
  const stale = Math.floor(Date.now() / 1000) - 600;
  const body = JSON.stringify({ event: "test", delivery_id: "dlv_01JAAAAAAAAAAAAAAAAAAAAAAA", created_at: "2026-01-01T00:00:00Z", timestamp: stale });
  const headers = signBoth(secret, "dlv_01JAAAAAAAAAAAAAAAAAAAAAAA", stale, body);
  const { "x-service-signature": service, ...standardOnly } = headers;
  await assert.rejects(verifyWebhook(body, standardOnly, secret), /webhook-timestamp is 6\d\d s away/);
  await assert.rejects(verifyWebhook(body, { "x-service-signature": service }, secret), /body's timestamp is 6\d\d s away/);
  await assert.rejects(verifyWebhook(body, headers, secret), WebhookVerificationError);
  // The same request within a wider tolerance passes: what failed was the age.
  const event = await verifyWebhook(body, headers, secret, { toleranceSeconds: 3600 });
  assert.equal(event.event, "test");
});
