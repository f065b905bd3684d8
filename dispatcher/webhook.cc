#include "dispatcher/webhook.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/socket.h>

#include <cstring>

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

bool prefixMatch(const unsigned char* a, const unsigned char* b, int bits) {
  int whole = bits / 8, rest = bits % 8;
  if (std::memcmp(a, b, static_cast<size_t>(whole)) != 0) return false;
  if (rest == 0) return true;
  unsigned char mask = static_cast<unsigned char>(0xFF << (8 - rest));
  return (a[whole] & mask) == (b[whole] & mask);
}

// Ranges no webhook may reach unless the operator allows them.
struct Blocked {
  const char* cidr;
};
constexpr Blocked kBlocked[] = {
    {"0.0.0.0/8"},       {"10.0.0.0/8"},     {"100.64.0.0/10"},  {"127.0.0.0/8"},
    {"169.254.0.0/16"},  {"172.16.0.0/12"},  {"192.0.0.0/24"},   {"192.168.0.0/16"},
    {"198.18.0.0/15"},   {"224.0.0.0/4"},    {"240.0.0.0/4"},    {"::/128"},
    {"::1/128"},         {"fc00::/7"},       {"fe80::/10"},      {"ff00::/8"},
    {"64:ff9b::/96"},    {"100::/64"},
};

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

// ------------------------------------------------------------------ CIDRs

Result<CidrSet> CidrSet::parse(const std::string& list) {
  CidrSet set;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? list.size() + 1 : comma + 1;
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.empty()) continue;
    size_t slash = item.find('/');
    std::string ip = item.substr(0, slash);
    Range r{};
    if (inet_pton(AF_INET, ip.c_str(), r.bytes) == 1) {
      r.family = AF_INET;
      r.prefix = 32;
    } else if (inet_pton(AF_INET6, ip.c_str(), r.bytes) == 1) {
      r.family = AF_INET6;
      r.prefix = 128;
    } else {
      return Status(500, "bad CIDR '" + item + "'");
    }
    if (slash != std::string::npos) {
      std::string bits = item.substr(slash + 1);
      char* end = nullptr;
      long n = std::strtol(bits.c_str(), &end, 10);
      if (bits.empty() || *end != '\0' || n < 0 || n > r.prefix) {
        return Status(500, "bad CIDR prefix in '" + item + "'");
      }
      r.prefix = static_cast<int>(n);
    }
    set.ranges_.push_back(r);
  }
  return set;
}

bool CidrSet::contains(const struct sockaddr* addr) const {
  for (const Range& r : ranges_) {
    if (addr->sa_family == AF_INET && r.family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
      if (prefixMatch(reinterpret_cast<const unsigned char*>(&in->sin_addr), r.bytes, r.prefix)) {
        return true;
      }
    } else if (addr->sa_family == AF_INET6 && r.family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
      if (prefixMatch(in6->sin6_addr.s6_addr, r.bytes, r.prefix)) return true;
    }
  }
  return false;
}

bool isNonPublicAddress(const struct sockaddr* addr) {
  static const CidrSet blocked = [] {
    std::string list;
    for (const Blocked& b : kBlocked) list += std::string(b.cidr) + ",";
    return CidrSet::parse(list).value();
  }();
  if (addr->sa_family == AF_INET6) {
    // An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is judged as the IPv4 one.
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      sockaddr_in v4{};
      v4.sin_family = AF_INET;
      std::memcpy(&v4.sin_addr, in6->sin6_addr.s6_addr + 12, 4);
      return blocked.contains(reinterpret_cast<sockaddr*>(&v4));
    }
  }
  if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) return true;
  return blocked.contains(addr);
}

// ------------------------------------------------------------------ sender

CurlWebhookSender::CurlWebhookSender(CidrSet allowed, long timeout_ms)
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
  if (isNonPublicAddress(sa) && !self->allowed_.contains(sa)) {
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
