// A 429's Retry-After honoured, against a live stack (tests/clients/run.sh):
// a key allowed 1 request a minute (EQ_API_KEY_RATE1). The proof is the
// count of exchanges, never a measured time: a retry before the window
// turned would have been refused again and counted.
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { EqReply, EqReplyError } from "eq-reply";
import { baseUrl, env, recordingFetch } from "./helpers.mjs";

/** Requests until the key's window refuses one; returns that 429. */
async function exhaustWindow(apiKey) {
  const c = new EqReply({ baseUrl: baseUrl(), apiKey, maxRetries: 0 });
  for (let i = 0; i < 3; i++) {
    try {
      await c.quota();
    } catch (e) {
      if (e instanceof EqReplyError && e.status === 429) return e;
      throw e;
    }
  }
  assert.fail("three requests a minute apart from a 1-a-minute key were all answered");
}

test("a 429 is retried after its Retry-After, with the call's one Idempotency-Key", { timeout: 150_000 }, async () => {
  const apiKey = env("EQ_API_KEY_RATE1");
  let refused = await exhaustWindow(apiKey);
  if (refused.retryAfterSeconds <= 2) {
    // The window ends now: the next steps would land in the next one. Start there.
    await sleep((refused.retryAfterSeconds + 1) * 1000);
    refused = await exhaustWindow(apiKey);
  }
  assert.equal(refused.code, 429);
  assert.match(refused.msg, /rate limit/);
  assert.match(refused.requestId, /^req_/);
  assert.ok(refused.retryAfterSeconds >= 1 && refused.retryAfterSeconds <= 60, String(refused.retryAfterSeconds));

  // A wait budget below Retry-After: the error at once, one exchange.
  const hasty = recordingFetch();
  const bounded = new EqReply({ baseUrl: baseUrl(), apiKey, maxRetryWaitMs: 0, fetch: hasty.fetch });
  await assert.rejects(
    bounded.replyAsync({ mode: "fast", message: "在吗？" }),
    (e) => e instanceof EqReplyError && e.status === 429 && e.retryAfterSeconds >= 1,
  );
  assert.equal(hasty.calls.length, 1);

  // Within the budget: one wait of Retry-After, then the next window answers.
  const patient = recordingFetch();
  const c = new EqReply({ baseUrl: baseUrl(), apiKey, maxRetryWaitMs: 61_000, fetch: patient.fetch });
  const created = await c.replyAsync({ mode: "fast", message: "在吗？" });
  assert.deepEqual(
    patient.calls.map((x) => x.status),
    [429, 200],
  );
  assert.ok(Number(patient.calls[0].retryAfter) >= 1);
  assert.match(created.task_id, /^tsk_/);
  // Both attempts carried the same key, the one returned.
  assert.equal(patient.calls[0].idempotencyKey, created.idempotency_key);
  assert.equal(patient.calls[1].idempotencyKey, created.idempotency_key);
  assert.equal(created.replayed, false);
});
