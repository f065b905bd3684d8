// ApiService: routing and the endpoint handlers of eq-api.
//
// Lives on the api's loop thread together with the HttpServer that calls it.
// It borrows the Store (one SQLite connection, used only from this thread),
// the BrokerBridge and the Config from ApiContext, which main() owns and which
// outlives the service. Handlers answer through the Responder, possibly later
// (sync calls), and every answer goes through finish(), which adds the common
// headers, counts the request for /metrics and writes the access log line.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "api/broker_bridge.h"
#include "api/http_server.h"
#include "common/config.h"
#include "common/netaddr.h"
#include "common/store.h"
#include "common/timefmt.h"

namespace eq::api {

struct ApiContext {
  const Config* config = nullptr;
  Store* store = nullptr;
  BrokerBridge* broker = nullptr;
  const Clock* clock = nullptr;
  const net::CidrSet* webhook_allow = nullptr;  // EQ_WEBHOOK_ALLOW_CIDRS
};

// What a handler needs to remember about its request after the HttpRequest
// itself is gone (async completions).
struct RequestInfo {
  std::string request_id;
  std::string method;
  std::string route;
  std::string key_prefix;
  int64_t started_ms = 0;
  std::vector<std::pair<std::string, std::string>> extra_headers;  // rate-limit headers
};

class ApiService {
 public:
  explicit ApiService(ApiContext ctx) : ctx_(ctx) {}

  void handle(HttpRequest&& req, Responder res);

  // Requests answered so far by (route, status); rendered by /metrics.
  std::string renderMetrics() const;
  int64_t inFlight() const { return in_flight_; }

 private:
  using Info = std::shared_ptr<RequestInfo>;

  void replySync(const HttpRequest& req, const AuthContext& auth, const Info& info, Responder res);
  void replyAsync(const HttpRequest& req, const AuthContext& auth, const Info& info, Responder res);
  void analyze(const HttpRequest& req, const Info& info, Responder res);
  void quota(const AuthContext& auth, const Info& info, Responder res);
  void task(const std::string& task_id, const AuthContext& auth, const Info& info, Responder res);
  void readyz(const Info& info, Responder res);

  void finish(const Info& info, const Responder& res, HttpResponse r);
  void sendJson(const Info& info, const Responder& res, int status, std::string_view data_json,
                std::string_view msg);
  void sendError(const Info& info, const Responder& res, int status, std::string_view msg);
  void unauthorized(const Info& info, const Responder& res);
  void refund(const Info& info, const std::string& account, const std::string& mode);

  ApiContext ctx_;
  int64_t in_flight_ = 0;
  std::map<std::pair<std::string, int>, int64_t> answered_;
  std::map<int, int64_t> latency_buckets_;  // upper bound ms -> count
  int64_t latency_count_ = 0;
  double latency_sum_ms_ = 0;
};

}  // namespace eq::api
