// MetricsServer: a small HTTP listener for processes that have no HTTP
// server of their own (eq-worker, eq-dispatcher). It answers
//   GET /metrics   the Registry in the Prometheus text format
//   GET /healthz   200 when every health check passes, else 503 naming the
//                  failing ones (the {code, data, msg} envelope either way)
// and nothing else (404, 405). It is the project's one HTTP server
// (common/http_server.h, the same as eq-api's) with a route of its own. One
// request per connection (answered with Connection: close): scrapers and
// health probes open a connection per request anyway, and it keeps idle
// keep-alive connections away.
//
// Threads. start() binds the socket on the calling thread, so a port in use
// is an error the caller sees at start-up, then runs a libuv loop of its own
// on a new thread. Everything the loop touches lives on that thread: the
// listener, the connections, and the optional periodic `on_tick` (eq-
// dispatcher refreshes its queue depth from SQLite there, so a slow
// database never delays the consumer or the sender). `health` and `on_tick`
// run on that thread and must only read state that is safe to share
// (atomics, the Registry).
//
// Owned by main(); the destructor stops the loop, closes every handle and
// joins the thread. The Registry must outlive the server.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "common/status.h"

namespace eq::metrics {

struct HealthCheck {
  std::string name;  // "broker", "database"
  bool ok = false;
};

struct ServerOptions {
  std::string host = "0.0.0.0";
  int port = 0;  // 0: a free port, see MetricsServer::port()
  std::function<std::vector<HealthCheck>()> health;
  std::function<void()> on_tick;  // run every tick_ms (and once at start) when set
  int64_t tick_ms = 5000;
  // A connection must deliver its whole request within this.
  int64_t request_timeout_ms = 10'000;
};

class MetricsServer {
 public:
  static Result<std::unique_ptr<MetricsServer>> start(const Registry& registry, ServerOptions opts);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }

 private:
  struct Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// start() with the process's log lines, for main(): "metrics listening" with
// the bound host and port, or the error and the way out (EQ_METRICS_PORT).
Result<std::unique_ptr<MetricsServer>> serveMetrics(const Registry& registry, ServerOptions opts);

}  // namespace eq::metrics
