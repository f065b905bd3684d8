// Verifies one EQ Reply webhook with two independent, off-the-shelf
// verifiers, so the integration tests do not only check our signing against
// our own idea of it:
//   - @octokit/webhooks-methods verify(secret, body, X-Service-Signature):
//     GitHub-style "sha256=<hex HMAC-SHA256(secret, body)>", keyed with the
//     secret string exactly as printed (whsec_ included);
//   - standardwebhooks new Webhook(secret).verify(body, headers): the
//     Standard Webhooks scheme; the library strips "whsec_" and base64-decodes
//     the rest itself, so it is given the secret as printed, too. It also
//     refuses a webhook-timestamp more than 5 minutes away from now.
//
// Input on stdin: {"secret": "whsec_...", "headers": {name: value}, "body": "raw body"}.
// Exit status: 0 when both accept, 1 when either refuses (reason on stderr),
// 2 on malformed input.
import { verify } from "@octokit/webhooks-methods";
import { Webhook } from "standardwebhooks";

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

async function main() {
  let input;
  try {
    input = JSON.parse(await readStdin());
  } catch (e) {
    console.error(`verify: stdin is not JSON: ${e.message}`);
    return 2;
  }
  const { secret, headers, body } = input;
  if (typeof secret !== "string" || typeof body !== "string" || typeof headers !== "object") {
    console.error("verify: expected {secret, headers, body}");
    return 2;
  }
  const lower = {};
  for (const [k, v] of Object.entries(headers)) lower[k.toLowerCase()] = v;

  let failed = false;
  const octokitOk = await verify(secret, body, lower["x-service-signature"] ?? "").catch((e) => {
    console.error(`@octokit/webhooks-methods: ${e.message}`);
    return false;
  });
  if (!octokitOk) {
    console.error("@octokit/webhooks-methods refused X-Service-Signature");
    failed = true;
  }
  try {
    new Webhook(secret).verify(body, lower);
  } catch (e) {
    console.error(`standardwebhooks refused: ${e.message}`);
    failed = true;
  }
  if (failed) return 1;
  console.log("ok: @octokit/webhooks-methods and standardwebhooks both accept");
  return 0;
}

process.exitCode = await main();
