import { EqReplyError, TaskWaitTimeoutError } from "./errors.js";
import type {
  AnalyzeRequest,
  AnalyzeResult,
  AsyncReplyRequest,
  AsyncReplyResult,
  Quota,
  ReplyRequest,
  ReplyResponse,
  Task,
  TaskCreated,
} from "./types.js";
import { webCrypto } from "./webcrypto.js";

export interface EqReplyOptions {
  /** Where the service is, e.g. `https://api.eq-reply.example` or `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** An API key (`eq_live_…` or `eq_test_…`). */
  apiKey: string;
  /** Retries of a 429 or 503 answer, each after its `Retry-After` (default 3). */
  maxRetries?: number;
  /**
   * The most time one call spends waiting between its retries, in ms (default
   * 60000: a rate-limit window is one minute, so a 429's wait is at most 60 s).
   * A retry whose wait would go past it is not made: the error is thrown at once.
   */
  maxRetryWaitMs?: number;
  /**
   * Time for one HTTP exchange, in ms (default 190000: above the service's own
   * deadline for the slowest sync mode, perfect's 180 s, so the service's 504
   * arrives before the client gives up).
   */
  timeoutMs?: number;
  /** The fetch to use (default the global one): for a proxy agent, logging or tests. */
  fetch?: typeof fetch;
}

export interface CallOptions {
  /** Aborts the call, its retries and its waits. */
  signal?: AbortSignal;
}

export interface ReplyOptions extends CallOptions {
  /** Sent as `Idempotency-Key` (1 to 255 printable ASCII characters); none by default. */
  idempotencyKey?: string;
}

export interface ReplyAsyncOptions extends CallOptions {
  /**
   * Sent as `Idempotency-Key`. Without it one is made for the call, used for
   * each of its retries and returned as `idempotency_key`, so repeating the
   * call later with it cannot create a second task.
   */
  idempotencyKey?: string;
}

export interface WaitOptions extends CallOptions {
  /** Time between polls, in ms (default 1000). Each poll counts against the key's rate limit. */
  intervalMs?: number;
  /** How long to poll before throwing TaskWaitTimeoutError, in ms (default 120000). */
  timeoutMs?: number;
}

interface Answer<T> {
  data: T;
  headers: Headers;
}

const RETRIED_STATUSES = new Set([429, 503]);
// A 503 always carries Retry-After (docs/contract.md §2); a proxy's may not.
const DEFAULT_RETRY_WAIT_MS = 1000;
const IDEMPOTENCY_KEY = /^[\x20-\x7e]{1,255}$/;

/** A client of one EQ Reply service with one API key. */
export class EqReply {
  readonly baseUrl: string;
  private readonly apiKey: string;
  private readonly maxRetries: number;
  private readonly maxRetryWaitMs: number;
  private readonly timeoutMs: number;
  private readonly fetchImpl: typeof fetch;

  constructor(options: EqReplyOptions) {
    if (!options || typeof options !== "object") {
      throw new TypeError("EqReply: pass {baseUrl, apiKey}");
    }
    this.baseUrl = checkBaseUrl(options.baseUrl);
    if (typeof options.apiKey !== "string" || options.apiKey.trim() === "") {
      throw new TypeError("EqReply: apiKey must be a non-empty string (a key from eqctl key create)");
    }
    this.apiKey = options.apiKey;
    this.maxRetries = wholeNumber("maxRetries", options.maxRetries, 3);
    this.maxRetryWaitMs = wholeNumber("maxRetryWaitMs", options.maxRetryWaitMs, 60_000);
    this.timeoutMs = wholeNumber("timeoutMs", options.timeoutMs, 190_000);
    const fetchImpl = options.fetch ?? (globalThis as { fetch?: typeof fetch }).fetch;
    if (typeof fetchImpl !== "function") {
      throw new TypeError("EqReply: no global fetch here (Node.js 18 or later has one); pass options.fetch");
    }
    this.fetchImpl = fetchImpl;
  }

  /** POST /api/v1/reply: replies generated now (charges one unit of the mode). */
  async reply(request: ReplyRequest, options: ReplyOptions = {}): Promise<ReplyResponse> {
    const headers: Record<string, string> = {};
    if (options.idempotencyKey !== undefined) {
      headers["Idempotency-Key"] = checkIdempotencyKey(options.idempotencyKey);
    }
    const answer = await this.call<ReplyResponse>("POST", "/api/v1/reply", request, headers, options.signal);
    return answer.data;
  }

  /**
   * POST /api/v1/reply/async: a task, answered once the job is queued. Its
   * result comes to `webhook_url` (or the account's default webhook URL) and
   * from `task()` / `waitForTask()`. Always sent with an Idempotency-Key.
   */
  async replyAsync(request: AsyncReplyRequest, options: ReplyAsyncOptions = {}): Promise<AsyncReplyResult> {
    const key =
      options.idempotencyKey !== undefined
        ? checkIdempotencyKey(options.idempotencyKey)
        : await newIdempotencyKey();
    const answer = await this.call<TaskCreated>(
      "POST",
      "/api/v1/reply/async",
      request,
      { "Idempotency-Key": key },
      options.signal,
    );
    return {
      ...answer.data,
      idempotency_key: key,
      replayed: answer.headers.get("Idempotent-Replayed") === "true",
    };
  }

  /** POST /api/v1/analyze: the message's emotion and intent (charges nothing). */
  async analyze(request: AnalyzeRequest, options: CallOptions = {}): Promise<AnalyzeResult> {
    return (await this.call<AnalyzeResult>("POST", "/api/v1/analyze", request, {}, options.signal)).data;
  }

  /** GET /api/v1/quota: the key's remaining units per mode, their expiry and tier. */
  async quota(options: CallOptions = {}): Promise<Quota> {
    return (await this.call<Quota>("GET", "/api/v1/quota", undefined, {}, options.signal)).data;
  }

  /** GET /api/v1/task/{taskId}: the task's state, and its result once it succeeded. */
  async task(taskId: string, options: CallOptions = {}): Promise<Task> {
    if (typeof taskId !== "string" || taskId === "") {
      throw new TypeError("task: taskId must be the task_id replyAsync returned");
    }
    const path = `/api/v1/task/${encodeURIComponent(taskId)}`;
    return (await this.call<Task>("GET", path, undefined, {}, options.signal)).data;
  }

  /**
   * Polls a task until it has `succeeded` or `failed` and returns it (a failed
   * task is returned too, with its `error`). Throws TaskWaitTimeoutError when
   * it has not ended within `timeoutMs`.
   */
  async waitForTask(taskId: string, options: WaitOptions = {}): Promise<Task> {
    const intervalMs = wholeNumber("intervalMs", options.intervalMs, 1000);
    const timeoutMs = wholeNumber("timeoutMs", options.timeoutMs, 120_000);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const task = await this.task(taskId, options);
      if (task.status === "succeeded" || task.status === "failed") return task;
      if (Date.now() + intervalMs > deadline) {
        throw new TaskWaitTimeoutError(taskId, task.status, timeoutMs);
      }
      await sleep(intervalMs, options.signal);
    }
  }

  /**
   * One call, with its retries: a 429 or 503 is tried again after its
   * Retry-After, at most maxRetries times and while the waits stay within
   * maxRetryWaitMs. The same headers (so the same Idempotency-Key) go with
   * every attempt.
   */
  private async call<T>(
    method: "GET" | "POST",
    path: string,
    body: unknown,
    extraHeaders: Record<string, string>,
    signal: AbortSignal | undefined,
  ): Promise<Answer<T>> {
    const headers: Record<string, string> = {
      Accept: "application/json",
      Authorization: `Bearer ${this.apiKey}`,
      ...extraHeaders,
    };
    let payload: string | undefined;
    if (body !== undefined) {
      if (body === null || typeof body !== "object" || Array.isArray(body)) {
        throw new TypeError(`${method} ${path}: the request must be an object`);
      }
      payload = JSON.stringify(body);
      headers["Content-Type"] = "application/json; charset=utf-8";
    }
    let waitedMs = 0;
    for (let retry = 0; ; retry++) {
      const response = await this.send(method, path, headers, payload, signal);
      const text = await response.text();
      const envelope = parseEnvelope(text);
      if (response.ok && envelope !== null && envelope.code === 0) {
        return { data: envelope.data as T, headers: response.headers };
      }
      const error = toError(response, envelope);
      if (!RETRIED_STATUSES.has(response.status) || retry >= this.maxRetries) throw error;
      const waitMs =
        error.retryAfterSeconds !== null ? error.retryAfterSeconds * 1000 : DEFAULT_RETRY_WAIT_MS;
      if (waitedMs + waitMs > this.maxRetryWaitMs) throw error;
      await sleep(waitMs, signal);
      waitedMs += waitMs;
    }
  }

  private async send(
    method: string,
    path: string,
    headers: Record<string, string>,
    body: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<Response> {
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const init: RequestInit = {
      method,
      headers,
      redirect: "error", // the key must never follow a redirect to another host
      signal: signal ? anySignal([signal, timeout]) : timeout,
    };
    if (body !== undefined) init.body = body;
    return this.fetchImpl(this.baseUrl + path, init);
  }
}

interface Envelope {
  code: number;
  msg: string;
  data: unknown;
}

function parseEnvelope(text: string): Envelope | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (value === null || typeof value !== "object") return null;
  const { code, msg, data } = value as Record<string, unknown>;
  if (typeof code !== "number" || typeof msg !== "string") return null;
  return { code, msg, data };
}

function toError(response: Response, envelope: Envelope | null): EqReplyError {
  const requestId = response.headers.get("X-Request-Id");
  const retryAfterSeconds = parseRetryAfter(response.headers.get("Retry-After"));
  if (envelope === null) {
    // Not the service's envelope: a proxy's or load balancer's page.
    return new EqReplyError({
      code: response.status,
      msg: `HTTP ${response.status} ${response.statusText} without the service's JSON envelope`.replace(/ +/g, " "),
      status: response.status,
      requestId,
      retryAfterSeconds,
    });
  }
  const msg =
    response.ok && envelope.code !== 0
      ? `HTTP ${response.status} with code ${envelope.code}: ${envelope.msg}`
      : envelope.msg;
  return new EqReplyError({ code: envelope.code, msg, status: response.status, requestId, retryAfterSeconds });
}

/** Retry-After as seconds: a number of seconds, or an HTTP date (RFC 9110). */
function parseRetryAfter(value: string | null): number | null {
  if (value === null) return null;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return null;
  return Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

function checkBaseUrl(value: unknown): string {
  if (typeof value !== "string" || value === "") {
    throw new TypeError("EqReply: baseUrl must be the service's URL, e.g. http://127.0.0.1:8080");
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new TypeError(`EqReply: baseUrl ${JSON.stringify(value)} is not an absolute URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new TypeError(`EqReply: baseUrl must be http or https, not ${url.protocol}`);
  }
  if (url.search || url.hash) {
    throw new TypeError("EqReply: baseUrl must not carry a query or fragment");
  }
  return url.href.replace(/\/+$/, "");
}

function wholeNumber(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 0) {
    throw new TypeError(`${name} must be a whole number from 0, got ${String(value)}`);
  }
  return value;
}

function checkIdempotencyKey(key: unknown): string {
  if (typeof key !== "string" || !IDEMPOTENCY_KEY.test(key)) {
    throw new TypeError("idempotencyKey must be 1 to 255 printable ASCII characters");
  }
  return key;
}

/** 128 random bits as a UUID-shaped key (getRandomValues: fine outside secure contexts too). */
async function newIdempotencyKey(): Promise<string> {
  const bytes = (await webCrypto()).getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6]! & 0x0f) | 0x40; // version 4
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // RFC 4122 variant
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** AbortSignal.any where it exists (Node 20, current browsers), else the same by hand (Node 18). */
function anySignal(signals: AbortSignal[]): AbortSignal {
  const any = (AbortSignal as { any?: (s: AbortSignal[]) => AbortSignal }).any;
  if (any) return any(signals);
  const controller = new AbortController();
  for (const s of signals) {
    if (s.aborted) {
      controller.abort(s.reason);
      break;
    }
    s.addEventListener("abort", () => controller.abort(s.reason), { once: true });
  }
  return controller.signal;
}
