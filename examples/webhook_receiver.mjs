// A webhook receiver built on the TypeScript client (clients/typescript):
// verifyWebhook checks either signature and the timestamp, the receiver
// dedupes on the delivery id and answers before doing any work (the service
// waits at most 10 s for a 2xx).
//
//   EQ_WEBHOOK_SECRET=whsec_... node examples/webhook_receiver.mjs [PORT]
//
// (with the package installed: npm install ./clients/typescript after its
// `npm run build`). PORT 0 picks a free one; one JSON line per request.
import { createServer } from "node:http";
import { verifyWebhook, WebhookVerificationError } from "eq-reply";

const secret = process.env.EQ_WEBHOOK_SECRET ?? "";
const seen = new Set(); // a real receiver keeps these in its database, with an expiry

const server = createServer((req, res) => {
  if (req.method !== "POST" || req.url !== "/hook") return void res.writeHead(404).end();
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", async () => {
    let event;
    try {
      event = await verifyWebhook(Buffer.concat(chunks), req.headers, secret);
    } catch (e) {
      if (!(e instanceof WebhookVerificationError)) throw e;
      res.writeHead(401).end();
      return log({ verdict: "rejected", reason: e.message });
    }
    res.writeHead(204).end();
    const id = req.headers["webhook-id"] ?? req.headers["x-service-delivery"];
    if (seen.has(id)) return log({ verdict: "duplicate", delivery_id: id });
    seen.add(id);
    // Here an application stores the replies or notifies someone.
    log({ verdict: "accepted", delivery_id: id, event: event.event, task_id: event.task_id ?? null });
  });
});

function log(record) {
  process.stdout.write(JSON.stringify(record) + "\n");
}

server.listen(Number(process.argv[2] ?? 9000), "127.0.0.1", () => {
  log({ listening: `http://127.0.0.1:${server.address().port}/hook` });
});
