#include "common/metrics_server.h"

#include <uv.h>

#include <thread>

#include "common/http_server.h"
#include "common/log.h"

namespace eq::metrics {
namespace {

// A GET carries no body; anything longer than this is not a scrape.
constexpr std::size_t kMaxRequestBytes = 16 * 1024;
// Scrapers and probes connect now and then; a handful at once is plenty.
constexpr std::size_t kMaxConnections = 64;

}  // namespace

// The listener is the project's one HTTP server (common/http_server.h) on a
// loop of its own; this part only routes the two paths.
struct MetricsServer::Impl {
  const Registry& registry;
  ServerOptions opts;
  uv_loop_t loop;
  uv_async_t stop_async;
  uv_timer_t tick;
  std::unique_ptr<http::HttpServer> server;
  std::thread thread;

  Impl(const Registry& r, ServerOptions o) : registry(r), opts(std::move(o)) {}

  http::HttpResponse route(const http::HttpRequest& req) const {
    http::HttpResponse r;
    // One request per connection: scrapers and health probes open one per
    // request anyway, and it keeps idle keep-alive connections away.
    r.close = true;
    r.headers.emplace_back("Cache-Control", "no-store");
    if (req.path != "/metrics" && req.path != "/healthz") {
      return error(404, "not found: this port serves /metrics and /healthz", req);
    }
    if (req.method != "GET") {
      http::HttpResponse e = error(405, "method not allowed: use GET", req);
      e.headers.emplace_back("Allow", "GET");
      return e;
    }
    if (req.path == "/metrics") {
      r.headers.emplace_back("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
      r.body = registry.render();
      return r;
    }
    std::vector<HealthCheck> checks;
    if (opts.health) checks = opts.health();
    std::string down, detail;
    for (const HealthCheck& h : checks) {
      if (!h.ok) down += (down.empty() ? "" : ", ") + h.name;
      detail += (detail.empty() ? "\"" : ",\"") + h.name + "\":\"" + (h.ok ? "up" : "down") + "\"";
    }
    if (!down.empty()) return error(503, "unavailable: " + down + " down", req);
    r.headers.emplace_back("Content-Type", "application/json; charset=utf-8");
    r.body = "{\"code\":0,\"data\":{\"status\":\"ok\",\"checks\":{" + detail + "}},\"msg\":\"ok\"}";
    return r;
  }

  static http::HttpResponse error(int status, const std::string& msg,
                                  const http::HttpRequest& req) {
    http::HttpResponse r = http::HttpServer::errorResponse(status, msg, req.request_id);
    r.close = true;
    r.headers.emplace_back("Cache-Control", "no-store");
    return r;
  }

  // Loop thread: stop accepting, let the server close its connections, then
  // close our own handles; the loop then ends and the destructor joins.
  void onStop() {
    server->shutdown([this] {
      uv_close(reinterpret_cast<uv_handle_t*>(&tick), nullptr);
      uv_close(reinterpret_cast<uv_handle_t*>(&stop_async), nullptr);
    });
  }
};

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const Registry& registry,
                                                            ServerOptions opts) {
  auto impl = std::make_unique<Impl>(registry, std::move(opts));
  Impl* p = impl.get();
  uv_loop_init(&p->loop);
  http::HttpLimits limits;
  limits.max_header_bytes = kMaxRequestBytes;
  limits.max_body_bytes = kMaxRequestBytes;
  limits.max_connections = kMaxConnections;
  limits.header_timeout_ms = static_cast<uint64_t>(p->opts.request_timeout_ms);
  limits.body_timeout_ms = static_cast<uint64_t>(p->opts.request_timeout_ms);
  limits.idle_timeout_ms = static_cast<uint64_t>(p->opts.request_timeout_ms);
  p->server = std::make_unique<http::HttpServer>(
      &p->loop,
      [p](http::HttpRequest&& req, http::Responder res) { res.send(p->route(req)); }, limits);

  const std::string& host = p->opts.host;
  if (int rc = p->server->listen(host, p->opts.port); rc != 0) {
    p->server->shutdown([] {});
    uv_run(&p->loop, UV_RUN_DEFAULT);
    p->server.reset();
    uv_loop_close(&p->loop);
    return Status(500, "metrics listener on " + host + ":" + std::to_string(p->opts.port) + ": " +
                           uv_strerror(rc));
  }
  int port = p->server->port();

  uv_async_init(&p->loop, &p->stop_async,
                [](uv_async_t* a) { static_cast<Impl*>(a->data)->onStop(); });
  p->stop_async.data = p;
  uv_timer_init(&p->loop, &p->tick);
  p->tick.data = p;
  if (p->opts.on_tick) {
    uv_timer_start(
        &p->tick, [](uv_timer_t* t) { static_cast<Impl*>(t->data)->opts.on_tick(); }, 0,
        static_cast<uint64_t>(p->opts.tick_ms));
  }
  p->thread = std::thread([p] { uv_run(&p->loop, UV_RUN_DEFAULT); });

  std::unique_ptr<MetricsServer> server(new MetricsServer(std::move(impl)));
  server->port_ = port;
  return server;
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() {
  uv_async_send(&impl_->stop_async);
  impl_->thread.join();
  impl_->server.reset();
  uv_loop_close(&impl_->loop);
}

Result<std::unique_ptr<MetricsServer>> serveMetrics(const Registry& registry, ServerOptions opts) {
  std::string host = opts.host;
  auto started = MetricsServer::start(registry, std::move(opts));
  if (!started.isOk()) {
    log::error("cannot serve metrics; set EQ_METRICS_PORT to a free port, 0 or off",
               {{"error", started.status().msg()}});
    return started.status();
  }
  log::info("metrics listening",
            {{"host", host}, {"port", static_cast<long long>(started.value()->port())}});
  return started;
}

}  // namespace eq::metrics
