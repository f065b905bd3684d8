export { EqReply } from "./client.js";
export type { CallOptions, EqReplyOptions, ReplyAsyncOptions, ReplyOptions, WaitOptions } from "./client.js";
export { EqReplyError, TaskWaitTimeoutError, WebhookVerificationError } from "./errors.js";
export { verifyWebhook } from "./webhook.js";
export type { HeadersLike, VerifyWebhookOptions } from "./webhook.js";
export type * from "./types.js";
