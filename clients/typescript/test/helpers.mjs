// What the live tests share: the stack tests/clients/run.sh started, and a
// fetch that records every exchange so that a test can count attempts.
import { createHmac } from "node:crypto";
import { createServer } from "node:http";

export function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests with tests/clients/run.sh`);
  return value;
}

export const baseUrl = () => env("EQ_API_URL");

/** fetch that records, for each exchange, its status and the headers a test checks. */
export function recordingFetch() {
  const calls = [];
  const recording = async (url, init) => {
    const response = await fetch(url, init);
    calls.push({
      url: String(url),
      status: response.status,
      idempotencyKey: new Headers(init.headers).get("Idempotency-Key"),
      retryAfter: response.headers.get("Retry-After"),
    });
    return response;
  };
  return { fetch: recording, calls };
}

/** A webhook receiver on 127.0.0.1, a free port: each request's raw body and headers. */
export async function startReceiver() {
  const waiting = [];
  const received = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      res.writeHead(204).end();
      const delivery = { body: Buffer.concat(chunks), headers: req.headers, url: req.url };
      const waiter = waiting.shift();
      if (waiter) waiter(delivery);
      else received.push(delivery);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}/hook`,
    /** The next delivery; rejects after timeoutMs (a delivery that never came). */
    next(timeoutMs = 20_000) {
      if (received.length) return Promise.resolve(received.shift());
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no webhook within ${timeoutMs} ms`)), timeoutMs);
        waiting.push((d) => {
          clearTimeout(timer);
          resolve(d);
        });
      });
    },
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/**
 * Both signatures over a body, made here with node:crypto (not the library),
 * as docs/contract.md §6 describes them.
 */
export function signBoth(secret, id, timestamp, body) {
  const service = createHmac("sha256", secret).update(body).digest("hex");
  const key = Buffer.from(secret.slice("whsec_".length), "base64");
  const standard = createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest("base64");
  return {
    "x-service-signature": `sha256=${service}`,
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": `v1,${standard}`,
  };
}
