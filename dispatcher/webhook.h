// Webhook bodies, signatures and the HTTP sender.
//
// Signing follows PRODUCT.md §6: X-Service-Signature is sha256=<hex
// HMAC-SHA256 of the raw body> keyed with the secret string exactly as
// printed (whsec_ included); webhook-signature is the Standard Webhooks
// v1,<base64 HMAC-SHA256 of "id.timestamp.body"> keyed with the
// base64-decoded part after whsec_.
//
// CurlWebhookSender owns one libcurl easy handle (so connections to a
// receiver are reused) and is used by one thread. WebhookSender is the test
// seam for code that sends webhooks.
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/netaddr.h"
#include "common/status.h"
#include "common/store.h"

namespace eq::dispatch {

std::string serviceSignature(const std::string& secret, const std::string& body);
// Returns an empty string when the secret is not whsec_<base64>.
std::string standardSignature(const std::string& secret, const std::string& msg_id,
                              int64_t timestamp, const std::string& body);

// The body of PRODUCT.md §6 for a task in a final state.
std::string webhookBody(const TaskRecord& task, const std::string& event, int64_t timestamp);

struct WebhookRequest {
  std::string url;
  std::string body;
  std::string secret;
  std::string delivery_id;
  std::string event;
  int64_t timestamp = 0;  // unix seconds
};

struct WebhookResult {
  bool delivered = false;  // a 2xx came back in time
  int http_status = 0;     // 0: no HTTP answer (refused, timeout, blocked)
  int64_t latency_ms = 0;
  std::string error;
};

class WebhookSender {
 public:
  virtual ~WebhookSender() = default;
  virtual WebhookResult send(const WebhookRequest& req) = 0;
};

class CurlWebhookSender final : public WebhookSender {
 public:
  CurlWebhookSender(net::CidrSet allowed, long timeout_ms);
  ~CurlWebhookSender() override;
  CurlWebhookSender(const CurlWebhookSender&) = delete;
  CurlWebhookSender& operator=(const CurlWebhookSender&) = delete;

  WebhookResult send(const WebhookRequest& req) override;

 private:
  static curl_socket_t openSocket(void* self, curlsocktype purpose, struct curl_sockaddr* addr);

  CURL* curl_;
  net::CidrSet allowed_;
  long timeout_ms_;
  bool blocked_ = false;  // set by openSocket for the current request
};

}  // namespace eq::dispatch
