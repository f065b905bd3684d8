#include "tools/mcp/tools.h"

#include <array>

#include "common/defaults.h"
#include "common/json.h"

namespace eq::mcp {
namespace {

// JSON Schemas, written out as JSON so they read like the OpenAPI document
// they mirror (schema/openapi.yaml). Bounds are the API's (docs/contract.md §3);
// a unit test parses every one of them. Nullable fields use JSON Schema's
// type arrays, which is what MCP clients validate with (not OpenAPI's
// `nullable`).
#define EQ_MODE_SCHEMA                                                                       \
  R"({"type":"string","enum":["fast","standard","perfect"],"description":"fast: one )"       \
  R"(strategy; standard: the two or three best strategies ranked together; perfect: every )" \
  R"(strategy that applies, compared (with a language model the slowest; prefer )"           \
  R"(generate_reply_async for it). Each call uses one unit of this mode's quota."})"

#define EQ_REPLY_REQUEST_PROPERTIES                                                           \
  R"("mode":)" EQ_MODE_SCHEMA R"(,)"                                                          \
  R"("message":{"type":"string","minLength":1,"maxLength":2000,"description":"The message )"  \
  R"(the user received from the other person, verbatim (at most 2000 characters after )"      \
  R"(trimming)."},)"                                                                          \
  R"("context":{"type":"string","maxLength":4000,"description":"Optional: relationship )"     \
  R"(stage and background, e.g. 'colleague, we met last month'."},)"                          \
  R"("scene":{"type":"string","enum":["chat","ambiguous","dating","humor","conflict",)"       \
  R"("social","work","breakup","proposal"],"description":"Optional scene category."},)"       \
  R"("reply_count":{"type":"integer","minimum":1,"maximum":5,"default":1,)"                   \
  R"("description":"How many candidate replies to return (1 to 5)."},)"                       \
  R"("idempotency_key":{"type":"string","minLength":1,"maxLength":255,"pattern":"^[ -~]+$",)" \
  R"("description":"Optional: the same key with the same arguments within 24 h returns the )" \
  R"(first answer again without using quota (safe retries); sent as the Idempotency-Key )"    \
  R"(header."})"

#define EQ_REPLY_RESPONSE_SCHEMA                                                                \
  R"({"type":"object","required":["replies","request_id","mode","tokens_used"],"properties":{)" \
  R"("replies":{"type":"array","minItems":1,"maxItems":5,"items":{"type":"object",)"            \
  R"("required":["text","score","eq_analysis"],"properties":{"text":{"type":"string"},)"        \
  R"("score":{"type":"number","minimum":0,"maximum":1},"eq_analysis":{"type":"string"}}},)"     \
  R"("description":"Candidate replies, best first (sorted by score)."},)"                       \
  R"("request_id":{"type":"string"},)"                                                          \
  R"("mode":{"type":"string","enum":["fast","standard","perfect"]},)"                           \
  R"("tokens_used":{"type":"integer","minimum":0}}})"

constexpr const char* kGenerateReplyInput =
    R"({"type":"object","additionalProperties":false,"required":["mode","message"],)"
    R"("properties":{)" EQ_REPLY_REQUEST_PROPERTIES R"(}})";

constexpr const char* kGenerateReplyAsyncInput =
    R"({"type":"object","additionalProperties":false,"required":["mode","message"],)"
    R"("properties":{)" EQ_REPLY_REQUEST_PROPERTIES
    R"(,"webhook_url":{"type":"string","format":"uri","maxLength":2048,"description":)"
    R"("Optional absolute http(s) URL that receives the signed result when the task )"
    R"(finishes; without it the key's default webhook URL is used, if any. The result can )"
    R"(always be fetched with get_task."}}})";

constexpr const char* kTaskCreatedOutput =
    R"({"type":"object","required":["task_id","status"],"properties":{)"
    R"("task_id":{"type":"string","description":"Pass it to get_task."},)"
    R"("status":{"type":"string","enum":["queued","running"]}}})";

constexpr const char* kGetTaskInput =
    R"({"type":"object","additionalProperties":false,"required":["task_id"],"properties":{)"
    R"("task_id":{"type":"string","pattern":"^tsk_[0-9A-HJKMNP-TV-Z]{26}$","description":)"
    R"("The task_id that generate_reply_async returned."}}})";

constexpr const char* kTaskOutput =
    R"({"type":"object","required":["task_id","status","mode","created_at","started_at",)"
    R"("finished_at","result","error","webhook"],"properties":{)"
    R"("task_id":{"type":"string"},)"
    R"("status":{"type":"string","enum":["queued","running","succeeded","failed"],)"
    R"("description":"queued -> running -> succeeded or failed; poll until final."},)"
    R"("mode":{"type":"string","enum":["fast","standard","perfect"]},)"
    R"("created_at":{"type":"string","format":"date-time"},)"
    R"("started_at":{"type":["string","null"],"format":"date-time"},)"
    R"("finished_at":{"type":["string","null"],"format":"date-time"},)"
    R"("result":{"anyOf":[)" EQ_REPLY_RESPONSE_SCHEMA R"(,{"type":"null"}],)"
    R"("description":"The replies once the task succeeded, else null."},)"
    R"("error":{"anyOf":[{"type":"object","required":["code","msg"],"properties":{)"
    R"("code":{"type":"integer"},"msg":{"type":"string"}}},{"type":"null"}],)"
    R"("description":"Why the task failed, else null."},)"
    R"("webhook":{"anyOf":[{"type":"object","required":["url","status","attempts",)"
    R"("last_attempt_at","last_status"],"properties":{"url":{"type":"string"},)"
    R"("status":{"type":"string","enum":["none","pending","delivered","failed"]},)"
    R"("attempts":{"type":"integer","minimum":0},)"
    R"("last_attempt_at":{"type":["string","null"],"format":"date-time"},)"
    R"("last_status":{"type":["integer","null"]}}},{"type":"null"}]}}})";

constexpr const char* kAnalyzeInput =
    R"({"type":"object","additionalProperties":false,"required":["message"],"properties":{)"
    R"("message":{"type":"string","minLength":1,"maxLength":2000,"description":"The message )"
    R"(to analyze, verbatim (at most 2000 characters after trimming)."},)"
    R"("context":{"type":"string","maxLength":4000,"description":"Optional context or scene )"
    R"(description."}}})";

constexpr const char* kAnalyzeOutput =
    R"({"type":"object","required":["emotion","intensity","underlying_need",)"
    R"("relationship_stage","suggested_strategy"],"properties":{)"
    R"("emotion":{"type":"string","enum":["joy","affection","anger","sadness","anxiety",)"
    R"("disgust","surprise","neutral"]},)"
    R"("intensity":{"type":"number","minimum":0,"maximum":1},)"
    R"("underlying_need":{"type":"string"},)"
    R"("relationship_stage":{"type":"string","enum":["stranger","acquaintance","ambiguous",)"
    R"("dating","committed","strained","post_breakup","colleague","family","unknown"]},)"
    R"("suggested_strategy":{"type":"string"}}})";

constexpr const char* kQuotaInput =
    R"({"type":"object","additionalProperties":false,"properties":{}})";

constexpr const char* kQuotaOutput =
    R"({"type":"object","required":["quota","expire_at","tier","monthly"],"properties":{)"
    R"("quota":{"type":"object","required":["standard","fast","perfect"],"properties":{)"
    R"("standard":{"type":"integer"},"fast":{"type":"integer"},"perfect":{"type":"integer"}},)"
    R"("description":"Remaining units per mode."},)"
    R"("expire_at":{"type":"string","format":"date-time"},)"
    R"("tier":{"type":"string","enum":["free","pro","ultra"]},)"
    R"("monthly":{"type":"object","required":["limit","used","resets_at"],"properties":{)"
    R"("limit":{"type":["integer","null"]},"used":{"type":"integer"},)"
    R"("resets_at":{"type":"string","format":"date-time"}},)"
    R"("description":"Units this calendar month (UTC) over all modes; limit null: none."}}})";

constexpr const char* kReplyOutput = EQ_REPLY_RESPONSE_SCHEMA;

struct ToolDef {
  const char* name;
  const char* title;
  const char* description;
  const char* input_schema;
  const char* output_schema;
  bool read_only;   // no effect on the account (analyze charges nothing)
  bool idempotent;  // calling again with the same arguments has no further effect
  bool open_world;  // takes a URL the service will reach out to (a webhook)
};

constexpr std::array<ToolDef, 5> kTools = {{
    {"generate_reply", "Generate replies",
     "Suggests emotionally intelligent replies to a message the user received (Chinese first, "
     "English too), each with a score in [0, 1] and a short explanation of why it works. Waits "
     "for the result: fast takes seconds, standard and perfect can take minutes with a language "
     "model behind the service. Uses one unit of the mode's quota.",
     kGenerateReplyInput, kReplyOutput, false, false, false},
    {"generate_reply_async", "Generate replies (background task)",
     "Starts reply generation as a background task and returns its task_id at once; fetch the "
     "result with get_task (poll until status is succeeded or failed), or receive it at "
     "webhook_url. Recommended for perfect mode. Uses one unit of the mode's quota (refunded if "
     "the task fails).",
     kGenerateReplyAsyncInput, kTaskCreatedOutput, false, false, true},
    {"get_task", "Get task",
     "Returns the state of a task created by generate_reply_async: status, the replies once it "
     "succeeded, the error once it failed, and the webhook delivery state.",
     kGetTaskInput, kTaskOutput, true, true, false},
    {"analyze_message", "Analyze message",
     "Analyzes the emotion and intent of a message without generating replies: main emotion, "
     "intensity in [0, 1], underlying need, relationship stage and a suggested reply strategy. "
     "Uses no quota.",
     kAnalyzeInput, kAnalyzeOutput, true, true, false},
    {"get_quota", "Get quota",
     "Returns the remaining quota units per mode (fast, standard, perfect) of the configured API "
     "key, when they expire, and the key's tier.",
     kQuotaInput, kQuotaOutput, true, true, false},
}};

std::string_view sv(const rapidjson::Value& v) {
  return std::string_view(v.GetString(), v.GetStringLength());
}

ToolResult toolError(std::string text) {
  ToolResult r;
  r.is_error = true;
  r.text = std::move(text);
  return r;
}

// Percent-encodes everything but RFC 3986 unreserved characters, so a task
// id can never change the path it is put in ("../quota", "?", "#").
std::string encodePathSegment(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

// An argument a tool does not know is refused here for the tools whose
// arguments do not go to the API as a body (the API refuses unknown body
// fields itself, naming them).
std::string unknownArgument(const rapidjson::Value& args,
                            std::initializer_list<std::string_view> known) {
  for (auto& m : args.GetObject()) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || k == sv(m.name);
    if (!ok) return std::string(sv(m.name));
  }
  return "";
}

}  // namespace

void ToolCatalog::writeList(JsonWriter& w, ProtocolVersion version) const {
  w.StartArray();
  for (const ToolDef& t : kTools) {
    w.StartObject();
    w.Key("name");
    w.String(t.name);
    if (hasStructuredOutput(version)) {
      w.Key("title");
      w.String(t.title);
    }
    w.Key("description");
    w.String(t.description);
    w.Key("inputSchema");
    w.RawValue(t.input_schema, std::char_traits<char>::length(t.input_schema),
               rapidjson::kObjectType);
    if (hasStructuredOutput(version)) {
      w.Key("outputSchema");
      w.RawValue(t.output_schema, std::char_traits<char>::length(t.output_schema),
                 rapidjson::kObjectType);
    }
    if (hasToolAnnotations(version)) {
      w.Key("annotations");
      w.StartObject();
      w.Key("title");
      w.String(t.title);
      w.Key("readOnlyHint");
      w.Bool(t.read_only);
      if (!t.read_only) {
        // Replies change nothing but the quota count: not destructive.
        w.Key("destructiveHint");
        w.Bool(false);
      }
      w.Key("idempotentHint");
      w.Bool(t.idempotent);
      // Most tools reach one configured EQ Reply service and nothing else.
      // generate_reply_async takes any webhook_url, which the service then
      // POSTs the result to: that is the open world, and a client must be
      // told so before it lets a model choose the address.
      w.Key("openWorldHint");
      w.Bool(t.open_world);
      w.EndObject();
    }
    w.EndObject();
  }
  w.EndArray();
}

ToolResult ToolCatalog::call(std::string_view name, const rapidjson::Value* arguments) {
  const ToolDef* def = nullptr;
  for (const ToolDef& t : kTools) {
    if (name == t.name) def = &t;
  }
  if (def == nullptr) {
    ToolResult r;
    r.rpc_error = -32602;
    r.rpc_message = "unknown tool '" + std::string(name) +
                    "' (tools: generate_reply, generate_reply_async, get_task, analyze_message, "
                    "get_quota)";
    return r;
  }
  rapidjson::Value empty(rapidjson::kObjectType);
  if (arguments == nullptr || arguments->IsNull()) arguments = &empty;
  if (!arguments->IsObject()) {
    ToolResult r;
    r.rpc_error = -32602;
    r.rpc_message = "params.arguments must be an object";
    return r;
  }
  const rapidjson::Value& args = *arguments;
  std::string tool = def->name;

  if (tool == "get_quota") {
    if (std::string bad = unknownArgument(args, {}); !bad.empty()) {
      return toolError("argument '" + bad + "' is not known: get_quota takes no arguments");
    }
    return forward("GET", "/api/v1/quota", "", {});
  }
  if (tool == "get_task") {
    if (std::string bad = unknownArgument(args, {"task_id"}); !bad.empty()) {
      return toolError("argument '" + bad + "' is not known (allowed: task_id)");
    }
    auto id = args.FindMember("task_id");
    if (id == args.MemberEnd() || !id->value.IsString() || id->value.GetStringLength() == 0) {
      return toolError(
          "argument 'task_id' is required: the task_id string that "
          "generate_reply_async returned");
    }
    return forward("GET", "/api/v1/task/" + encodePathSegment(sv(id->value)), "", {});
  }

  // generate_reply, generate_reply_async, analyze_message: the arguments are
  // the request body, so the API validates them and its message names the
  // field at fault. Only idempotency_key is ours: it becomes a header.
  std::vector<std::string> headers;
  rapidjson::StringBuffer body;
  JsonWriter w(body);
  w.StartObject();
  for (auto& m : args.GetObject()) {
    if (tool != "analyze_message" && sv(m.name) == "idempotency_key") {
      bool ok =
          m.value.IsString() && m.value.GetStringLength() >= 1 && m.value.GetStringLength() <= 255;
      // Printable ASCII only: anything else could end the header line and
      // start another one (header injection).
      for (char c : ok ? sv(m.value) : std::string_view()) ok = ok && c >= 0x20 && c < 0x7F;
      if (!ok) {
        return toolError(
            "argument 'idempotency_key' must be a string of 1 to 255 printable "
            "ASCII characters (a UUID is a good choice)");
      }
      headers.push_back("Idempotency-Key: " + std::string(sv(m.value)));
      continue;
    }
    w.Key(m.name.GetString(), m.name.GetStringLength());
    m.value.Accept(w);
  }
  w.EndObject();
  std::string body_text(body.GetString(), body.GetSize());
  if (tool == "generate_reply") return forward("POST", "/api/v1/reply", body_text, headers);
  if (tool == "generate_reply_async") {
    return forward("POST", "/api/v1/reply/async", body_text, headers);
  }
  return forward("POST", "/api/v1/analyze", body_text, headers);
}

ToolResult ToolCatalog::forward(const std::string& method, const std::string& path,
                                const std::string& body, const std::vector<std::string>& headers) {
  Result<ApiResponse> sent = api_.send(method, path, body, headers);
  if (!sent.isOk()) return toolError(sent.status().msg());
  const ApiResponse& res = sent.value();

  rapidjson::Document doc;
  Status parsed = json::parse(res.body, &doc, defaults::kMcpMaxJsonDepth);
  bool envelope = parsed.isOk() && doc.IsObject() && doc.HasMember("code") && doc["code"].IsInt() &&
                  doc.HasMember("msg") && doc["msg"].IsString() && doc.HasMember("data");
  if (!envelope) {
    return toolError("the EQ Reply API at " + api_url_ + " (EQ_API_URL) answered HTTP " +
                     std::to_string(res.status) +
                     " with a body that is not its {code, data, msg} envelope; is EQ_API_URL "
                     "the address of eq-api?");
  }
  int code = doc["code"].GetInt();
  std::string msg(sv(doc["msg"]));
  if (res.status == 200 && code == 0 && doc["data"].IsObject()) {
    ToolResult r;
    r.structured_json = json::toString(doc["data"]);
    r.text = r.structured_json;
    return r;
  }
  if (code == 0) {
    return toolError("the EQ Reply API answered HTTP " + std::to_string(res.status) +
                     " with code 0 but no data object");
  }
  // The API's own words first (they name the field or the mode), then what
  // the caller can do about it.
  std::string text = "EQ Reply API error " + std::to_string(code) + ": " + msg;
  if (res.status != code) text += " (HTTP " + std::to_string(res.status) + ")";
  if (code == 401) text += ". Check EQ_API_KEY in the MCP client's configuration.";
  if (!res.retry_after.empty()) text += ". Retry after " + res.retry_after + " s.";
  if (!res.request_id.empty()) text += " [request_id " + res.request_id + "]";
  return toolError(text);
}

}  // namespace eq::mcp
