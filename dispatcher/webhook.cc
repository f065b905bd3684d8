#include "dispatcher/webhook.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "common/crypto.h"
#include "common/defaults.h"
#include "common/json.h"
#include "common/timefmt.h"

namespace eq::dispatch {
using json::putString;
using json::Writer;

std::string serviceSignature(const std::string& secret, const std::string& body) {
  return "sha256=" + crypto::hex(crypto::hmacSha256(secret, body));
}

std::string standardSignature(const std::string& secret, const std::string& msg_id,
                              int64_t timestamp, const std::string& body) {
  if (secret.rfind("whsec_", 0) != 0) return "";
  std::string key;
  if (!crypto::base64Decode(secret.substr(6), &key)) return "";
  std::string signed_content = msg_id + "." + std::to_string(timestamp) + "." + body;
  return "v1," + crypto::base64(crypto::hmacSha256(key, signed_content));
}

std::string webhookBody(const TaskRecord& task, const std::string& event, int64_t timestamp) {
  rapidjson::Document result;
  bool has_result = !task.result_json.empty() &&
                    json::parse(task.result_json, &result, defaults::kMaxJsonDepth).isOk() &&
                    result.IsObject();
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  putString(w, "event", event);
  putString(w, "task_id", task.task_id);
  putString(w, "status", taskStatusName(task.status));
  putString(w, "mode", task.mode);
  putString(w, "request_id", task.request_id);
  w.Key("replies");
  if (has_result && result.HasMember("replies") && result["replies"].IsArray()) {
    result["replies"].Accept(w);
  } else {
    w.StartArray();
    w.EndArray();
  }
  w.Key("tokens_used");
  w.Int64(has_result && result.HasMember("tokens_used") && result["tokens_used"].IsInt64()
              ? result["tokens_used"].GetInt64()
              : 0);
  w.Key("error");
  if (task.status == TaskStatus::kFailed) {
    w.StartObject();
    w.Key("code");
    w.Int(task.error_code);
    putString(w, "msg", task.error_msg);
    w.EndObject();
  } else {
    w.Null();
  }
  putString(w, "created_at", iso8601(task.created_at));
  putString(w, "finished_at", iso8601(task.finished_at));
  w.Key("timestamp");
  w.Int64(timestamp);
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

std::string testEventBody(const DeliveryRecord& d, int64_t timestamp) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  putString(w, "event", "test");
  putString(w, "delivery_id", d.delivery_id);
  putString(w, "created_at", iso8601(d.created_at));
  w.Key("timestamp");
  w.Int64(timestamp);
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

std::vector<std::string> webhookHeaders(const WebhookRequest& req) {
  std::vector<std::string> h;
  h.push_back("Content-Type: application/json; charset=utf-8");
  h.push_back("X-Service-Signature: " + serviceSignature(req.secret, req.body));
  h.push_back("X-Service-Event: " + req.event);
  h.push_back("X-Service-Delivery: " + req.delivery_id);
  h.push_back("webhook-id: " + req.delivery_id);
  h.push_back("webhook-timestamp: " + std::to_string(req.timestamp));
  // Standard Webhooks: several signatures are separated by spaces, and a
  // verifier accepts the message if any of them matches its secret.
  std::string std_sig = standardSignature(req.secret, req.delivery_id, req.timestamp, req.body);
  if (!req.previous_secret.empty()) {
    std::string old_sig =
        standardSignature(req.previous_secret, req.delivery_id, req.timestamp, req.body);
    if (!old_sig.empty()) std_sig += (std_sig.empty() ? "" : " ") + old_sig;
  }
  if (!std_sig.empty()) h.push_back("webhook-signature: " + std_sig);
  h.push_back("User-Agent: eq-reply-webhooks/1.0");
  h.push_back("Expect:");  // no 100-continue round trip
  return h;
}

}  // namespace eq::dispatch
