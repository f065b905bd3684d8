#include "common/metrics_server.h"

#include <http_parser.h>
#include <uv.h>

#include <set>
#include <thread>

#include "common/log.h"


namespace eq::metrics {
namespace {

// A GET carries no body; anything longer than this is not a scrape.
constexpr size_t kMaxRequestBytes = 16 * 1024;
constexpr uint64_t kLingerMs = 1000;

struct Response {
  int status = 200;
  std::string content_type = "application/json; charset=utf-8";
  std::string body;
  std::string allow;  // for 405
};

const char* reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

std::string envelopeError(int code, const std::string& msg) {
  // msg is our own text (no quotes or control characters): no escaping needed.
  return "{\"code\":" + std::to_string(code) + ",\"data\":null,\"msg\":\"" + msg + "\"}";
}

}  // namespace

struct MetricsServer::Impl {
  struct Conn {
    Impl* impl = nullptr;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t write_req;
    uv_shutdown_t shutdown_req;
    http_parser parser;
    std::string url;
    size_t bytes = 0;
    bool complete = false;
    bool responded = false;
    bool written = false;  // the response is out; only the linger remains
    bool closing = false;
    int open_handles = 2;
    std::string out;
  };

  const Registry& registry;
  ServerOptions opts;
  uv_loop_t loop;
  uv_tcp_t server;
  uv_async_t stop_async;
  uv_timer_t tick;
  std::set<Conn*> conns;
  http_parser_settings settings{};
  std::thread thread;

  Impl(const Registry& r, ServerOptions o) : registry(r), opts(std::move(o)) {
    settings.on_url = [](http_parser* p, const char* at, size_t len) {
      static_cast<Conn*>(p->data)->url.append(at, len);
      return 0;
    };
    settings.on_message_complete = [](http_parser* p) {
      static_cast<Conn*>(p->data)->complete = true;
      return 1;  // stop parsing: one request per connection
    };
  }

  Response route(const Conn& c) const {
    Response r;
    std::string path = c.url.substr(0, c.url.find('?'));
    bool get = c.parser.method == HTTP_GET;
    if (path != "/metrics" && path != "/healthz") {
      r.status = 404;
      r.body = envelopeError(404, "not found: this port serves /metrics and /healthz");
      return r;
    }
    if (!get) {
      r.status = 405;
      r.allow = "GET";
      r.body = envelopeError(405, "method not allowed: use GET");
      return r;
    }
    if (path == "/metrics") {
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
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
    if (!down.empty()) {
      r.status = 503;
      r.body = envelopeError(503, "unavailable: " + down + " down");
    } else {
      r.body =
          "{\"code\":0,\"data\":{\"status\":\"ok\",\"checks\":{" + detail + "}},\"msg\":\"ok\"}";
    }
    return r;
  }

  void respond(Conn* c, const Response& r) {
    if (c->responded) return;
    c->responded = true;
    c->out = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) + "\r\n";
    c->out += "Content-Type: " + r.content_type + "\r\n";
    c->out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
    if (!r.allow.empty()) c->out += "Allow: " + r.allow + "\r\n";
    c->out += "Cache-Control: no-store\r\nConnection: close\r\n\r\n";
    c->out += r.body;
    uv_buf_t buf = uv_buf_init(c->out.data(), static_cast<unsigned>(c->out.size()));
    c->write_req.data = c;
    int rc = uv_write(&c->write_req, reinterpret_cast<uv_stream_t*>(&c->tcp), &buf, 1,
                      [](uv_write_t* w, int status) {
                        auto* conn = static_cast<Conn*>(w->data);
                        if (status != 0) return close(conn);
                        conn->impl->finishSending(conn);
                      });
    if (rc != 0) close(c);
  }

  // The response is out: send FIN, then go on reading (and discarding) until
  // the client closes, for at most a second. Closing with unread request
  // bytes in the socket (an oversized request answered early) would send a
  // RST that can destroy the response before the client reads it.
  void finishSending(Conn* c) {
    c->written = true;
    c->shutdown_req.data = c;
    if (uv_shutdown(&c->shutdown_req, reinterpret_cast<uv_stream_t*>(&c->tcp),
                    [](uv_shutdown_t*, int) {}) != 0) {
      return close(c);
    }
    uv_timer_start(
        &c->timer, [](uv_timer_t* t) { close(static_cast<Conn*>(t->data)); }, kLingerMs, 0);
  }

  static void close(Conn* c) {
    if (c->closing) return;
    c->closing = true;
    c->impl->conns.erase(c);
    auto done = [](uv_handle_t* h) {
      auto* conn = static_cast<Conn*>(h->data);
      if (--conn->open_handles == 0) delete conn;
    };
    uv_close(reinterpret_cast<uv_handle_t*>(&c->timer), done);
    uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), done);
  }

  void onConnection() {
    auto* c = new Conn();
    c->impl = this;
    uv_tcp_init(&loop, &c->tcp);
    uv_timer_init(&loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    if (uv_accept(reinterpret_cast<uv_stream_t*>(&server),
                  reinterpret_cast<uv_stream_t*>(&c->tcp)) != 0) {
      conns.insert(c);
      close(c);
      return;
    }
    conns.insert(c);
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    uv_timer_start(
        &c->timer,
        [](uv_timer_t* t) {
          auto* conn = static_cast<Conn*>(t->data);
          Response r;
          r.status = 408;
          r.body = envelopeError(408, "request timeout");
          conn->impl->respond(conn, r);
        },
        static_cast<uint64_t>(opts.request_timeout_ms), 0);
    uv_read_start(
        reinterpret_cast<uv_stream_t*>(&c->tcp),
        [](uv_handle_t*, size_t suggested, uv_buf_t* buf) {
          buf->base = new char[suggested];
          buf->len = suggested;
        },
        [](uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
          auto* conn = static_cast<Conn*>(s->data);
          std::unique_ptr<char[]> owned(buf->base);
          if (n < 0) {
            // The client closed (or half-closed) its side. A response still
            // being written goes on: finishSending closes after it.
            if (conn->responded && !conn->written) {
              uv_read_stop(s);
            } else {
              close(conn);
            }
            return;
          }
          if (n == 0 || conn->responded) return;
          conn->impl->onData(conn, buf->base, static_cast<size_t>(n));
        });
  }

  void onData(Conn* c, const char* data, size_t n) {
    c->bytes += n;
    http_parser_execute(&c->parser, &settings, data, n);
    if (c->bytes > kMaxRequestBytes || (!c->complete && HTTP_PARSER_ERRNO(&c->parser) != HPE_OK)) {
      Response r;
      r.status = 400;
      r.body = envelopeError(400, "bad request");
      respond(c, r);
    } else if (c->complete) {
      respond(c, route(*c));
    }
  }

  void onStop() {
    std::set<Conn*> open = conns;
    for (Conn* c : open) close(c);
    uv_close(reinterpret_cast<uv_handle_t*>(&server), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&tick), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&stop_async), nullptr);
  }
};

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const Registry& registry,
                                                            ServerOptions opts) {
  auto impl = std::make_unique<Impl>(registry, std::move(opts));
  Impl* p = impl.get();
  uv_loop_init(&p->loop);
  uv_tcp_init(&p->loop, &p->server);
  p->server.data = p;

  sockaddr_storage addr{};
  const std::string& host = p->opts.host;
  int rc = host.find(':') != std::string::npos
               ? uv_ip6_addr(host.c_str(), p->opts.port, reinterpret_cast<sockaddr_in6*>(&addr))
               : uv_ip4_addr(host.c_str(), p->opts.port, reinterpret_cast<sockaddr_in*>(&addr));
  if (rc == 0) rc = uv_tcp_bind(&p->server, reinterpret_cast<const sockaddr*>(&addr), 0);
  if (rc == 0) {
    rc = uv_listen(reinterpret_cast<uv_stream_t*>(&p->server), 64, [](uv_stream_t* s, int status) {
      if (status == 0) static_cast<Impl*>(s->data)->onConnection();
    });
  }
  if (rc != 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(&p->server), nullptr);
    uv_run(&p->loop, UV_RUN_DEFAULT);
    uv_loop_close(&p->loop);
    return Status(500, "metrics listener on " + host + ":" + std::to_string(p->opts.port) + ": " +
                           uv_strerror(rc));
  }
  sockaddr_storage bound{};
  int len = sizeof bound;
  uv_tcp_getsockname(&p->server, reinterpret_cast<sockaddr*>(&bound), &len);
  int port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                         : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

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
