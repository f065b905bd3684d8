// A TypeScript program using the package as its users do; `npm run typecheck`
// (tsc --noEmit) checks it against the built package's .d.ts, so the types
// generated from schema/openapi.yaml are what a user's editor sees. The lines
// marked as expected errors must stay errors: they prove the types are not `any`.
import {
  EqReply,
  EqReplyError,
  TaskWaitTimeoutError,
  verifyWebhook,
  type AnalyzeResult,
  type Quota,
  type ReplyResponse,
  type Task,
  type WebhookBody,
} from "eq-reply";

export async function tour(baseUrl: string, apiKey: string): Promise<string> {
  const client = new EqReply({ baseUrl, apiKey, maxRetries: 2, maxRetryWaitMs: 10_000 });

  const reply: ReplyResponse = await client.reply({ mode: "fast", message: "今天被老板骂了", reply_count: 2 });
  const best: string = reply.replies[0]?.text ?? "";
  const score: number | undefined = reply.replies[0]?.score;

  const analysis: AnalyzeResult = await client.analyze({ message: "你最近是不是很忙？" });
  const emotion: "joy" | "affection" | "anger" | "sadness" | "anxiety" | "disgust" | "surprise" | "neutral" =
    analysis.emotion;

  const quota: Quota = await client.quota();
  const fastLeft: number = quota.quota.fast;

  const created = await client.replyAsync({ mode: "perfect", message: "周末一起看电影？", webhook_url: "https://hooks.example/eq" });
  const key: string = created.idempotency_key;
  let task: Task;
  try {
    task = await client.waitForTask(created.task_id, { intervalMs: 500, timeoutMs: 60_000 });
  } catch (e) {
    if (e instanceof TaskWaitTimeoutError) return `still ${e.lastStatus}`;
    if (e instanceof EqReplyError) return `${e.status} ${e.code} ${e.msg} ${e.requestId ?? ""}`;
    throw e;
  }
  const replies = task.status === "succeeded" ? task.result?.replies : undefined;

  // @ts-expect-error: not a mode
  await client.reply({ mode: "slow", message: "hi" });
  // @ts-expect-error: message is required
  await client.reply({ mode: "fast" });
  // @ts-expect-error: webhook_url belongs to the async call only
  await client.reply({ mode: "fast", message: "hi", webhook_url: "https://hooks.example/eq" });

  return [best, score, emotion, fastLeft, key, replies?.length].join(" ");
}

export async function receive(rawBody: Uint8Array, headers: Record<string, string>, secret: string): Promise<string> {
  const event: WebhookBody = await verifyWebhook(rawBody, headers, secret, { toleranceSeconds: 300 });
  if (event.event === "test") return event.delivery_id;
  return `${event.task_id} ${event.status} ${event.replies.length}`;
}
