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
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/broker_bridge.h"
#include "api/http_server.h"
#include "common/config.h"
#include "common/metrics.h"
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
  // Set while this request owns a pending Idempotency-Key row: finish()
  // stores a final response in it or deletes it (PRODUCT.md §3).
  std::optional<IdempotencyRequest> idempotency;
  std::string mode;  // reply calls, once validated: the mode label of /metrics
};

class ApiService {
 public:
  explicit ApiService(ApiContext ctx) : ctx_(ctx) {}

  void handle(HttpRequest&& req, Responder res);

  // Requests answered so far by (route, status), refusals by rate limit and
  // quota, and latencies; rendered by /metrics. Counts are per process.
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

  // Idempotency-Key admission of the two reply endpoints. Returns true when
  // the request should run (with or without a key); otherwise it has
  // answered (replay, 409, 400 or 503) itself.
  bool admitIdempotent(const HttpRequest& req, const AuthContext& auth, const Info& info,
                       const Responder& res);
  // Charges one unit of mode; on refusal answers 402 or 503 itself.
  bool charge(const AuthContext& auth, const std::string& mode, const Info& info,
              const Responder& res);
  void unavailable(const Info& info, const Responder& res, std::string_view what);
  void settleIdempotent(const Info& info, const HttpResponse& r);

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
  int64_t rate_limited_ = 0;    // 429s
  int64_t quota_rejected_ = 0;  // 402s
  int64_t idempotent_replays_ = 0;
  // Reply calls by mode, for the dashboards' request rate and latency by
  // mode (issue 6), rendered after the counters above. Used on the loop
  // thread only.
  metrics::Registry registry_;
  metrics::Family<metrics::Counter>& replies_ = registry_.counter(
      "eq_api_replies_total", "Reply calls answered, by mode, route (sync or async) and status.",
      {"mode", "route", "status"});
  metrics::Family<metrics::Histogram>& reply_seconds_ = registry_.histogram(
      "eq_api_reply_duration_seconds",
      "Reply calls from request received to response queued, by mode and route; sync calls "
      "include the worker's time.",
      {"mode", "route"},
      {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 180});
};

}  // namespace eq::api
