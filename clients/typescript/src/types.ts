// The records of the API, named. Every shape comes from src/openapi.ts, which
// `npm run build` generates from schema/openapi.yaml (openapi-typescript), so
// a field added to the interface reaches these types without an edit here.
import type { components } from "./openapi.js";

type Schemas = components["schemas"];

export type Mode = Schemas["Mode"];
export type Scene = Schemas["Scene"];
export type ReplyRequest = Schemas["ReplyRequest"];
export type AsyncReplyRequest = Schemas["AsyncReplyRequest"];
export type Reply = Schemas["Reply"];
export type ReplyResponse = Schemas["ReplyResponse"];
export type AnalyzeRequest = Schemas["AnalyzeRequest"];
export type AnalyzeResult = Schemas["AnalyzeResult"];
export type Quota = Schemas["Quota"];
export type TaskCreated = Schemas["TaskCreated"];
export type Task = Schemas["Task"];
export type TaskStatus = Task["status"];
export type TaskError = Schemas["TaskError"];
export type WebhookBody = Schemas["WebhookBody"];
export type WebhookEvent = Schemas["WebhookEvent"];
export type WebhookTestEvent = Schemas["WebhookTestEvent"];
export type ErrorEnvelope = Schemas["ErrorEnvelope"];

/** What `replyAsync` returns: the created task and how to repeat the call safely. */
export type AsyncReplyResult = TaskCreated & {
  /** The Idempotency-Key sent (the caller's, or the one made for this call). */
  idempotency_key: string;
  /** True when the service answered with the stored first answer to this key. */
  replayed: boolean;
};
