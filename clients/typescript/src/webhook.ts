import { WebhookVerificationError } from "./errors.js";
import type { WebhookBody } from "./types.js";
import { webCrypto } from "./webcrypto.js";

/** Request headers as a fetch `Headers`, or a plain object (Node's `req.headers`, any case). */
export type HeadersLike = Headers | Record<string, string | string[] | undefined>;

export interface VerifyWebhookOptions {
  /**
   * How far the signed timestamp may be from now, in seconds (default 300, as
   * Standard Webhooks suggests). The service signs every attempt afresh, so a
   * retry hours later passes; a captured request replayed later does not.
   */
  toleranceSeconds?: number;
  /** "Now" in unix seconds (default the clock's). */
  now?: number;
}

const SECRET_PREFIX = "whsec_";
const DEFAULT_TOLERANCE_S = 300;
// Bytes on an ArrayBuffer of their own, as Web Crypto takes them.
type Bytes = Uint8Array<ArrayBuffer>;

/**
 * Checks a webhook request of EQ Reply (docs/contract.md §6) and returns its
 * parsed body. Either signature scheme the service sends is enough:
 *
 * - Standard Webhooks: `webhook-signature: v1,<base64>` over
 *   `<webhook-id>.<webhook-timestamp>.<body>`, keyed with the base64-decoded
 *   part of the secret after `whsec_`; the timestamp is `webhook-timestamp`.
 * - `X-Service-Signature: sha256=<hex>` over the body, keyed with the secret
 *   as printed (`whsec_` included); the timestamp is the body's `timestamp`.
 *
 * `body` must be the raw body exactly as received (bytes, or the text they
 * decode to), not re-serialised JSON. `secret` may be a list: during a secret
 * rotation, the new and the previous one. Signatures are compared by
 * `crypto.subtle.verify`, in constant time. Throws WebhookVerificationError
 * when no signature matches or the timestamp is outside the tolerance.
 */
export async function verifyWebhook(
  body: string | Uint8Array | ArrayBuffer,
  headers: HeadersLike,
  secret: string | readonly string[],
  options: VerifyWebhookOptions = {},
): Promise<WebhookBody> {
  const raw = bodyBytes(body);
  const secrets = checkSecrets(secret);
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_S;
  if (!Number.isFinite(tolerance) || tolerance < 0) {
    throw new TypeError("toleranceSeconds must be a number from 0");
  }
  const now = options.now ?? Math.floor(Date.now() / 1000);
  const subtle = (await webCrypto()).subtle;

  const standard = header(headers, "webhook-signature");
  const service = header(headers, "x-service-signature");
  if (standard === null && service === null) {
    throw new WebhookVerificationError("no signature: neither webhook-signature nor X-Service-Signature");
  }
  const failures: string[] = [];
  if (standard !== null) {
    const id = header(headers, "webhook-id");
    const timestamp = header(headers, "webhook-timestamp");
    if (id === null || timestamp === null) {
      failures.push("webhook-signature without webhook-id and webhook-timestamp");
    } else if (await standardMatches(subtle, secrets, raw, id, timestamp, standard)) {
      checkTimestamp(timestamp, "webhook-timestamp", now, tolerance);
      return parseBody(raw);
    } else {
      failures.push("webhook-signature does not match");
    }
  }
  if (service !== null) {
    if (await serviceMatches(subtle, secrets, raw, service)) {
      // This scheme signs the body only: the body's own timestamp is what
      // keeps an old request from being replayed.
      const payload = parseBody(raw);
      checkTimestamp((payload as { timestamp?: unknown }).timestamp, "the body's timestamp", now, tolerance);
      return payload;
    }
    failures.push("X-Service-Signature does not match");
  }
  throw new WebhookVerificationError(failures.join("; "));
}

async function standardMatches(
  subtle: SubtleCrypto,
  secrets: readonly string[],
  raw: Bytes,
  id: string,
  timestamp: string,
  headerValue: string,
): Promise<boolean> {
  const signed = concat(utf8(`${id}.${timestamp}.`), raw);
  // Several space-separated entries: during a rotation one per secret.
  const signatures: Bytes[] = [];
  for (const entry of headerValue.split(/\s+/)) {
    const comma = entry.indexOf(",");
    if (comma < 0 || entry.slice(0, comma) !== "v1") continue;
    const decoded = fromBase64(entry.slice(comma + 1));
    if (decoded) signatures.push(decoded);
  }
  for (const secret of secrets) {
    const key = await hmacKey(subtle, fromBase64(secret.slice(SECRET_PREFIX.length))!);
    for (const signature of signatures) {
      if (await subtle.verify("HMAC", key, signature, signed)) return true;
    }
  }
  return false;
}

async function serviceMatches(
  subtle: SubtleCrypto,
  secrets: readonly string[],
  raw: Bytes,
  headerValue: string,
): Promise<boolean> {
  const match = /^sha256=([0-9a-fA-F]{64})$/.exec(headerValue.trim());
  if (!match) return false;
  const signature = fromHex(match[1]!);
  for (const secret of secrets) {
    const key = await hmacKey(subtle, utf8(secret));
    if (await subtle.verify("HMAC", key, signature, raw)) return true;
  }
  return false;
}

function hmacKey(subtle: SubtleCrypto, bytes: Bytes): Promise<CryptoKey> {
  return subtle.importKey("raw", bytes, { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
}

function checkTimestamp(value: unknown, what: string, now: number, tolerance: number): void {
  const seconds =
    typeof value === "number" ? value : typeof value === "string" && /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isInteger(seconds)) {
    throw new WebhookVerificationError(`${what} is not unix seconds`);
  }
  if (Math.abs(now - seconds) > tolerance) {
    throw new WebhookVerificationError(
      `${what} is ${now - seconds} s away from now (tolerance ${tolerance} s): a stale or replayed request`,
    );
  }
}

function parseBody(raw: Bytes): WebhookBody {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(raw));
  } catch {
    throw new WebhookVerificationError("the signed body is not JSON in UTF-8");
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new WebhookVerificationError("the signed body is not a JSON object");
  }
  return value as WebhookBody;
}

function checkSecrets(secret: string | readonly string[]): readonly string[] {
  const list = typeof secret === "string" ? [secret] : secret;
  if (!Array.isArray(list) || list.length === 0) {
    throw new TypeError("verifyWebhook: secret must be the account's whsec_ secret (or a list of them)");
  }
  for (const s of list) {
    if (typeof s !== "string" || !s.startsWith(SECRET_PREFIX) || !fromBase64(s.slice(SECRET_PREFIX.length))) {
      throw new TypeError("verifyWebhook: a secret is whsec_ and base64, as eqctl key create prints it");
    }
  }
  return list;
}

function header(headers: HeadersLike, name: string): string | null {
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name);
  for (const [key, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (key.toLowerCase() !== name || value === undefined) continue;
    return Array.isArray(value) ? value.join(" ") : value;
  }
  return null;
}

function bodyBytes(body: string | Uint8Array | ArrayBuffer): Bytes {
  if (typeof body === "string") return utf8(body);
  if (body instanceof Uint8Array) return new Uint8Array(body); // a copy on a plain ArrayBuffer
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  throw new TypeError("verifyWebhook: body must be the raw body, a string, Uint8Array or ArrayBuffer");
}

function utf8(text: string): Bytes {
  return new TextEncoder().encode(text);
}

function concat(a: Bytes, b: Bytes): Bytes {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

function fromBase64(text: string): Bytes | null {
  if (text === "" || !/^[A-Za-z0-9+/]+={0,2}$/.test(text)) return null;
  try {
    return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}

function fromHex(hex: string): Bytes {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}
