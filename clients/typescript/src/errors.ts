/**
 * An answer of the service other than success: the error envelope
 * `{code, msg, data: null}` of docs/contract.md §2, with the HTTP status and
 * the request's `X-Request-Id` (quote it when reporting a problem).
 */
export class EqReplyError extends Error {
  /** The envelope's `code`; equals the HTTP status for the service's own errors. */
  readonly code: number;
  /** The envelope's `msg`: what went wrong, naming the field or mode at fault. */
  readonly msg: string;
  /** The HTTP status. */
  readonly status: number;
  /** `X-Request-Id` of the response, or null when it carried none (e.g. a proxy's answer). */
  readonly requestId: string | null;
  /** `Retry-After` in seconds, when the response carried one (429, 503, a 409 in progress). */
  readonly retryAfterSeconds: number | null;

  constructor(init: {
    code: number;
    msg: string;
    status: number;
    requestId: string | null;
    retryAfterSeconds: number | null;
  }) {
    const where = init.requestId ? ` (request ${init.requestId})` : "";
    super(`EQ Reply ${init.status}: ${init.msg}${where}`);
    this.name = "EqReplyError";
    this.code = init.code;
    this.msg = init.msg;
    this.status = init.status;
    this.requestId = init.requestId;
    this.retryAfterSeconds = init.retryAfterSeconds;
  }
}

/** `waitForTask` gave up: the task had not ended within its time bound. */
export class TaskWaitTimeoutError extends Error {
  readonly taskId: string;
  /** The status the task had at the last poll (`queued` or `running`). */
  readonly lastStatus: string;

  constructor(taskId: string, lastStatus: string, timeoutMs: number) {
    super(`task ${taskId} still ${lastStatus} after ${timeoutMs} ms`);
    this.name = "TaskWaitTimeoutError";
    this.taskId = taskId;
    this.lastStatus = lastStatus;
  }
}

/** A webhook request that must not be trusted: no valid signature, or a stale one. */
export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WebhookVerificationError";
  }
}
