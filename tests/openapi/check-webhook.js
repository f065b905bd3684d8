// Checks one webhook request EQ Reply sent against the taskFinished callback
// of schema/openapi.yaml, with ajv (a general JSON Schema validator that
// knows OpenAPI 3.0's `nullable`), so the callback part of the document is
// proven by a tool like the rest of it (prism covers the paths, but a proxy
// never sees the requests our dispatcher makes).
//
// Checked: the body against the callback's requestBody schema
// (WebhookEvent), the Content-Type against its media type, and every header
// parameter of the callback: present when required, and matching its schema.
//
// Input on stdin: {"headers": {name: value}, "body": "raw body"} (other
// members, such as the secret tests/webhook-verify uses, are ignored).
// Exit status: 0 when the request matches, 1 when it does not (each problem
// on stderr), 2 on malformed input or an unreadable document.
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const YAML = require("yaml");
const Ajv = require("ajv");
const addFormats = require("ajv-formats");

const kDocument = path.join(__dirname, "..", "..", "schema", "openapi.yaml");
const kOperation = ["paths", "/api/v1/reply/async", "post", "callbacks", "taskFinished",
                    "{$request.body#/webhook_url}", "post"];

function readStdin() {
  return fs.readFileSync(0, "utf8");
}

function callback(doc) {
  let node = doc;
  for (const key of kOperation) {
    node = node && node[key];
  }
  return node;
}

function main() {
  let input;
  try {
    input = JSON.parse(readStdin());
  } catch (e) {
    console.error(`check-webhook: stdin is not JSON: ${e.message}`);
    return 2;
  }
  if (typeof input.body !== "string" || typeof input.headers !== "object") {
    console.error("check-webhook: expected {headers, body}");
    return 2;
  }
  const doc = YAML.parse(fs.readFileSync(kDocument, "utf8"));
  const op = callback(doc);
  if (!op || !op.requestBody) {
    console.error(`check-webhook: no callback at ${kOperation.join(" > ")} in ${kDocument}`);
    return 2;
  }

  // strict: false lets OpenAPI's own keywords (example, description on
  // $ref siblings) pass; "float" is OpenAPI's format name for a number.
  const ajv = new Ajv({ allErrors: true, strict: false });
  addFormats(ajv);
  ajv.addFormat("float", { type: "number", validate: () => true });
  // The components become one schema resource, so "#/components/..."
  // references inside them resolve.
  ajv.addSchema({ $id: "openapi.yaml", components: doc.components });

  const problems = [];
  const headers = {};
  for (const [k, v] of Object.entries(input.headers)) headers[k.toLowerCase()] = v;

  const media = Object.keys(op.requestBody.content);
  const type = (headers["content-type"] || "").split(";")[0].trim().toLowerCase();
  if (!media.includes(type)) {
    problems.push(`Content-Type '${headers["content-type"]}' is not one of ${media.join(", ")}`);
  }

  for (const p of op.parameters || []) {
    if (p.in !== "header") continue;
    const value = headers[p.name.toLowerCase()];
    if (value === undefined) {
      if (p.required) problems.push(`header ${p.name} is missing`);
      continue;
    }
    const check = ajv.compile(p.schema);
    if (!check(value)) {
      problems.push(`header ${p.name} '${value}': ${ajv.errorsText(check.errors)}`);
    }
  }

  let body;
  try {
    body = JSON.parse(input.body);
  } catch (e) {
    problems.push(`body is not JSON: ${e.message}`);
  }
  if (body !== undefined) {
    const schema = op.requestBody.content["application/json"].schema;
    const ref = schema.$ref ? { $ref: `openapi.yaml${schema.$ref}` } : schema;
    const check = ajv.compile(ref);
    if (!check(body)) {
      for (const err of check.errors) {
        problems.push(`body${err.instancePath || ""} ${err.message} (${err.schemaPath})`);
      }
    }
  }

  if (problems.length > 0) {
    console.error("the webhook does not match the taskFinished callback of schema/openapi.yaml:");
    for (const p of problems) console.error(`  ${p}`);
    return 1;
  }
  console.log("openapi: the webhook matches the taskFinished callback");
  return 0;
}

process.exitCode = main();
