#include "tools/mcp/server.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "common/defaults.h"
#include "common/json.h"
#include "common/log.h"

namespace eq::mcp {
namespace {

constexpr const char* kServerName = "eq-mcp";
constexpr const char* kServerVersion = "1.0.0";
constexpr const char* kInstructions =
    "Tools of EQ Reply, a service that suggests emotionally intelligent replies to a message the "
    "user received and analyzes a message's emotion and intent (Chinese first, English too). "
    "Pass the other person's message verbatim. Use analyze_message to understand a message, "
    "generate_reply for replies (mode fast answers in seconds), generate_reply_async plus "
    "get_task for mode perfect, and get_quota to see how many calls remain.";

const rapidjson::Value& nullValue() {
  static const rapidjson::Value kNull;
  return kNull;
}

std::string_view sv(const rapidjson::Value& v) {
  return std::string_view(v.GetString(), v.GetStringLength());
}

// A JSON-RPC id as MCP allows it: a string or a number (never null).
bool validId(const rapidjson::Value& id) { return id.IsString() || id.IsNumber(); }

// {"jsonrpc":"2.0","id":id,"<member>":<write(w)>}: one frame for results
// and errors.
template <typename F>
std::string response(const rapidjson::Value& id, const char* member, F write) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("jsonrpc");
  w.String("2.0");
  w.Key("id");
  id.Accept(w);
  w.Key(member);
  write(w);
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

std::string errorResponse(const rapidjson::Value& id, int code, std::string_view message) {
  return response(id, "error", [&](JsonWriter& w) {
    w.StartObject();
    w.Key("code");
    w.Int(code);
    w.Key("message");
    w.String(message.data(), static_cast<rapidjson::SizeType>(message.size()));
    w.EndObject();
  });
}

template <typename F>
std::string resultResponse(const rapidjson::Value& id, F write_result) {
  return response(id, "result", write_result);
}

}  // namespace

std::string McpServer::oversizedLineError(size_t max_bytes) {
  return errorResponse(
      nullValue(), rpc::kInvalidRequest,
      "message larger than " + std::to_string(max_bytes) + " bytes; it was not read");
}

std::string McpServer::handleLine(std::string_view line) {
  rapidjson::Document doc;
  Status parsed = json::parse(line, &doc, defaults::kMcpMaxJsonDepth);
  if (!parsed.isOk()) {
    // The shared parser words its errors for HTTP bodies; here the body is
    // one JSON-RPC message.
    std::string why = parsed.msg();
    if (why.starts_with("request body ")) why.replace(0, 13, "the message ");
    return errorResponse(nullValue(), rpc::kParseError, "parse error: " + why);
  }
  if (!doc.IsArray()) return handleMessage(doc, false).value_or("");

  // A batch. Only 2025-03-26 has them: 2024-11-05 never defined them and
  // 2025-06-18 removed them. Before initialize no revision is agreed, and
  // initialize itself must not be batched, so a batch then is refused too.
  if (doc.Empty()) return errorResponse(nullValue(), rpc::kInvalidRequest, "empty batch");
  if (!version_ || !allowsBatches(*version_)) {
    std::string why = version_ ? "JSON-RPC batches are not supported in protocol version " +
                                     std::string(toString(*version_))
                               : std::string(
                                     "JSON-RPC batches are not accepted before "
                                     "initialize");
    return errorResponse(nullValue(), rpc::kInvalidRequest, why);
  }
  std::string out = "[";
  bool any = false;
  for (const rapidjson::Value& m : doc.GetArray()) {
    std::optional<std::string> r = handleMessage(m, true);
    if (!r) continue;
    if (any) out += ",";
    out += *r;
    any = true;
  }
  // A batch of notifications gets no answer at all (JSON-RPC 2.0 §6).
  return any ? out + "]" : "";
}

std::optional<std::string> McpServer::handleMessage(const rapidjson::Value& m, bool in_batch) {
  if (!m.IsObject()) {
    return errorResponse(nullValue(), rpc::kInvalidRequest, "a message must be a JSON object");
  }
  auto id_it = m.FindMember("id");
  auto method_it = m.FindMember("method");
  bool has_id = id_it != m.MemberEnd();
  bool has_method = method_it != m.MemberEnd() && method_it->value.IsString();

  // A notification (a method and no id) never gets a response, even when it
  // is malformed or unknown: the sender is not waiting for one.
  if (has_method && !has_id) {
    auto v = m.FindMember("jsonrpc");
    if (v == m.MemberEnd() || !v->value.IsString() || sv(v->value) != "2.0") {
      log::warn("ignored a notification without jsonrpc \"2.0\"",
                {{"method", sv(method_it->value)}});
      return std::nullopt;
    }
    onNotification(sv(method_it->value));
    return std::nullopt;
  }
  // A response to a request of ours. eq-mcp sends no requests (no sampling,
  // no roots, no elicitation), so there is nothing to match it with.
  if (!has_method && has_id && (m.HasMember("result") || m.HasMember("error"))) {
    log::warn("ignored a response to a request eq-mcp never sent");
    return std::nullopt;
  }

  const rapidjson::Value& id = (has_id && validId(id_it->value)) ? id_it->value : nullValue();
  if (has_id && !validId(id_it->value)) {
    return errorResponse(nullValue(), rpc::kInvalidRequest, "id must be a string or a number");
  }
  auto v = m.FindMember("jsonrpc");
  if (v == m.MemberEnd() || !v->value.IsString() || sv(v->value) != "2.0") {
    return errorResponse(id, rpc::kInvalidRequest, "jsonrpc must be \"2.0\"");
  }
  if (!has_method) {
    return errorResponse(id, rpc::kInvalidRequest, "method must be a string");
  }
  std::string_view method = sv(method_it->value);
  const rapidjson::Value* params = nullptr;
  if (auto p = m.FindMember("params"); p != m.MemberEnd()) {
    if (!p->value.IsObject()) {
      return errorResponse(id, rpc::kInvalidParams, "params must be an object");
    }
    params = &p->value;
  }

  if (method == "initialize") return initialize(id, params, in_batch);
  if (method == "ping") {
    return resultResponse(id, [](JsonWriter& w) {
      w.StartObject();
      w.EndObject();
    });
  }
  bool known = method == "tools/list" || method == "tools/call";
  if (!known) {
    return errorResponse(id, rpc::kMethodNotFound, "method not found: " + std::string(method));
  }
  if (!version_) {
    return errorResponse(id, rpc::kNotInitialized,
                         "not initialized: send initialize first (" + std::string(method) + ")");
  }
  if (method == "tools/list") {
    // One page holds all five tools; a cursor from the client is ignored.
    ProtocolVersion version = *version_;
    return resultResponse(id, [&](JsonWriter& w) {
      w.StartObject();
      w.Key("tools");
      tools_.writeList(w, version);
      w.EndObject();
    });
  }
  return callTool(id, params);
}

std::string McpServer::initialize(const rapidjson::Value& id, const rapidjson::Value* params,
                                  bool in_batch) {
  if (in_batch) {
    return errorResponse(id, rpc::kInvalidRequest, "initialize must not be part of a batch");
  }
  if (version_) {
    return errorResponse(
        id, rpc::kInvalidRequest,
        "already initialized (protocol version " + std::string(toString(*version_)) + ")");
  }
  const rapidjson::Value* requested = nullptr;
  if (params != nullptr) {
    auto it = params->FindMember("protocolVersion");
    if (it != params->MemberEnd() && it->value.IsString()) requested = &it->value;
  }
  if (requested == nullptr) {
    return errorResponse(id, rpc::kInvalidParams,
                         "params.protocolVersion is required (a string such as \"2025-06-18\")");
  }
  ProtocolVersion agreed = negotiate(sv(*requested));
  version_ = agreed;
  std::string client = "unknown";
  if (auto info = params->FindMember("clientInfo");
      info != params->MemberEnd() && info->value.IsObject()) {
    auto name = info->value.FindMember("name");
    if (name != info->value.MemberEnd() && name->value.IsString()) client = sv(name->value);
  }
  log::info(
      "initialize",
      {{"client", client}, {"requested", sv(*requested)}, {"protocol_version", toString(agreed)}});

  return resultResponse(id, [&](JsonWriter& w) {
    w.StartObject();
    w.Key("protocolVersion");
    std::string_view v = toString(agreed);
    w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
    w.Key("capabilities");
    w.StartObject();
    w.Key("tools");
    w.StartObject();
    w.Key("listChanged");
    w.Bool(false);  // the tool set is fixed for the life of the process
    w.EndObject();
    w.EndObject();
    w.Key("serverInfo");
    w.StartObject();
    w.Key("name");
    w.String(kServerName);
    if (hasStructuredOutput(agreed)) {  // Implementation.title arrived with 2025-06-18
      w.Key("title");
      w.String("EQ Reply");
    }
    w.Key("version");
    w.String(kServerVersion);
    w.EndObject();
    w.Key("instructions");
    w.String(kInstructions);
    w.EndObject();
  });
}

std::string McpServer::callTool(const rapidjson::Value& id, const rapidjson::Value* params) {
  const rapidjson::Value* name = nullptr;
  const rapidjson::Value* arguments = nullptr;
  if (params != nullptr) {
    auto n = params->FindMember("name");
    if (n != params->MemberEnd() && n->value.IsString()) name = &n->value;
    auto a = params->FindMember("arguments");
    if (a != params->MemberEnd()) arguments = &a->value;
  }
  if (name == nullptr) {
    return errorResponse(id, rpc::kInvalidParams, "params.name (the tool's name) is required");
  }
  ToolResult r = tools_.call(sv(*name), arguments);
  if (r.rpc_error != 0) return errorResponse(id, r.rpc_error, r.rpc_message);
  if (r.is_error) {
    log::warn("tool call failed", {{"tool", sv(*name)}, {"error", r.text}});
  } else {
    log::info("tool call", {{"tool", sv(*name)}});
  }

  bool structured = hasStructuredOutput(*version_) && !r.structured_json.empty();
  return resultResponse(id, [&](JsonWriter& w) {
    w.StartObject();
    w.Key("content");
    w.StartArray();
    w.StartObject();
    w.Key("type");
    w.String("text");
    w.Key("text");
    w.String(r.text.data(), static_cast<rapidjson::SizeType>(r.text.size()));
    w.EndObject();
    w.EndArray();
    if (structured) {
      w.Key("structuredContent");
      w.RawValue(r.structured_json.data(), r.structured_json.size(), rapidjson::kObjectType);
    }
    w.Key("isError");
    w.Bool(r.is_error);
    w.EndObject();
  });
}

void McpServer::onNotification(std::string_view method) {
  if (method == "notifications/initialized") {
    client_ready_ = true;
    return;
  }
  // notifications/cancelled: requests run one at a time and each is finished
  // before the next line is read, so whatever it names is already answered
  // (the specification lets a server ignore such a late cancellation).
  log::debug("notification", {{"method", method}});
}

}  // namespace eq::mcp
