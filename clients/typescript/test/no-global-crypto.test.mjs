// Node.js 18 has no global `crypto`: there the package takes node:crypto's
// webcrypto. This file (its own process under node --test) removes the
// global before the package is loaded, then verifies a webhook and makes an
// Idempotency-Key, which both need Web Crypto.
import assert from "node:assert/strict";
import { test } from "node:test";
import { signBoth } from "./helpers.mjs";

Object.defineProperty(globalThis, "crypto", { value: undefined, configurable: true, writable: true });
const { EqReply, verifyWebhook } = await import("eq-reply");

test("without a global crypto, webhooks verify and async calls get their key", async () => {
  assert.equal(globalThis.crypto, undefined);
  const secret = "whsec_" + Buffer.alloc(32, 3).toString("base64");
  const now = Math.floor(Date.now() / 1000);
  const body = JSON.stringify({ event: "test", delivery_id: "dlv_x", created_at: "", timestamp: now });
  const event = await verifyWebhook(body, signBoth(secret, "dlv_x", now, body), secret);
  assert.equal(event.event, "test");

  let sent;
  const fetch = async (_url, init) => {
    sent = new Headers(init.headers).get("Idempotency-Key");
    return new Response(JSON.stringify({ code: 0, msg: "ok", data: { task_id: "tsk_x", status: "queued" } }));
  };
  const created = await new EqReply({ baseUrl: "http://svc.test", apiKey: "k", fetch }).replyAsync({
    mode: "fast",
    message: "hi",
  });
  assert.match(sent, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(created.idempotency_key, sent);
});
