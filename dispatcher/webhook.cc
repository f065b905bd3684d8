#include "dispatcher/webhook.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/socket.h>


#include "common/crypto.h"
#include "common/json.h"
#include "common/timefmt.h"

namespace eq::dispatch {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void putString(Writer& w, const char* key, const std::string& v) {
  w.Key(key);
  w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
}

size_t writeDiscard(char*, size_t size, size_t n, void*) { return size * n; }

}  // namespace

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
  bool has_result = !task.result_json.empty() && !result.Parse(task.result_json.c_str()).HasParseError() &&
                    result.IsObject();
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  putString(w, "event", event);
  putString(w, "task_id", task.task_id);
  putString(w, "status", task.status);
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
  if (task.status == "failed") {
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

// ------------------------------------------------------------------ sender

CurlWebhookSender::CurlWebhookSender(net::CidrSet allowed, long timeout_ms)
    : curl_(curl_easy_init()), allowed_(std::move(allowed)), timeout_ms_(timeout_ms) {}

CurlWebhookSender::~CurlWebhookSender() { curl_easy_cleanup(curl_); }

// libcurl calls this with the address it is about to connect to, after DNS
// resolution: the only place where a check cannot be raced by a DNS answer
// that changes between check and use.
curl_socket_t CurlWebhookSender::openSocket(void* self_ptr, curlsocktype purpose,
                                            struct curl_sockaddr* addr) {
  auto* self = static_cast<CurlWebhookSender*>(self_ptr);
  if (purpose != CURLSOCKTYPE_IPCXN) return CURL_SOCKET_BAD;
  const sockaddr* sa = &addr->addr;
  if (net::isNonPublicAddress(sa) && !self->allowed_.contains(sa)) {
    self->blocked_ = true;
    return CURL_SOCKET_BAD;
  }
  return ::socket(addr->family, addr->socktype, addr->protocol);
}

WebhookResult CurlWebhookSender::send(const WebhookRequest& req) {
  WebhookResult out;
  blocked_ = false;
  std::string ts = std::to_string(req.timestamp);
  struct curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/json; charset=utf-8");
  headers = curl_slist_append(headers, ("X-Service-Signature: " +
                                        serviceSignature(req.secret, req.body)).c_str());
  headers = curl_slist_append(headers, ("X-Service-Event: " + req.event).c_str());
  headers = curl_slist_append(headers, ("X-Service-Delivery: " + req.delivery_id).c_str());
  headers = curl_slist_append(headers, ("webhook-id: " + req.delivery_id).c_str());
  headers = curl_slist_append(headers, ("webhook-timestamp: " + ts).c_str());
  std::string std_sig = standardSignature(req.secret, req.delivery_id, req.timestamp, req.body);
  if (!std_sig.empty()) {
    headers = curl_slist_append(headers, ("webhook-signature: " + std_sig).c_str());
  }
  headers = curl_slist_append(headers, "User-Agent: eq-reply-webhooks/1.0");
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip

  curl_easy_reset(curl_);
  curl_easy_setopt(curl_, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(curl_, CURLOPT_POST, 1L);
  curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, req.body.c_str());
  curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE, static_cast<long>(req.body.size()));
  curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS, timeout_ms_);
  curl_easy_setopt(curl_, CURLOPT_FOLLOWLOCATION, 0L);  // redirects are not followed
  curl_easy_setopt(curl_, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
  // No proxy, not even one from http_proxy/ALL_PROXY in the environment:
  // through a proxy, openSocket would vet the proxy's address instead of
  // the receiver's and the SSRF guard would be bypassed.
  curl_easy_setopt(curl_, CURLOPT_PROXY, "");
  curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, writeDiscard);
  curl_easy_setopt(curl_, CURLOPT_OPENSOCKETFUNCTION, &CurlWebhookSender::openSocket);
  curl_easy_setopt(curl_, CURLOPT_OPENSOCKETDATA, this);

  int64_t start = nowMs();
  CURLcode rc = curl_easy_perform(curl_);
  out.latency_ms = nowMs() - start;
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    out.error = blocked_ ? "refused: webhook host resolves to a non-public address"
                         : curl_easy_strerror(rc);
    return out;
  }
  long code = 0;
  curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &code);
  out.http_status = static_cast<int>(code);
  out.delivered = code >= 200 && code < 300;
  if (!out.delivered) out.error = "receiver answered HTTP " + std::to_string(code);
  return out;
}

}  // namespace eq::dispatch
