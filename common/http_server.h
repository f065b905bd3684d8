// A small HTTP/1.1 server on libuv and nodejs http-parser: the one HTTP
// server of the project, serving eq-api (api/main.cc) and the /metrics and
// /healthz listeners of eq-worker and eq-dispatcher (common/metrics_server.h).
//
// HttpServer owns the listening uv_tcp_t and every HttpConnection; all of it
// lives on one uv loop thread. A connection owns its uv_tcp_t, its parser and
// its buffers. It is destroyed only from its handle's close callback (after
// uv_close), never in the middle of one of its own callbacks.
//
// Requests on one connection are handled one at a time: after a request is
// complete the parser is paused and reading stops until the handler's
// response is written. That keeps pipelined responses in request order and
// bounds what a client can make us buffer.
//
// Handlers answer through a Responder, now or later (sync reply calls answer
// when the worker's result arrives). A Responder outliving its connection is
// harmless: it finds the connection gone and drops the response.
#pragma once

#include <http_parser.h>
#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace eq::http {

struct HttpRequest {
  std::string method;
  std::string path;
  std::string query;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  std::string request_id;  // assigned by the server; echoed as X-Request-Id
  std::string client;      // the peer's address, raw bytes (4 or 16); empty if unknown
  int64_t received_ms = 0;

  // First value of a header, by lower-case name; nullptr when absent.
  const std::string* header(std::string_view name) const;
  // How many times a header (lower-case name) occurs.
  size_t headerCount(std::string_view name) const;
  // The value of one cookie of the Cookie header, and of one parameter of
  // the query string, as sent (not percent-decoded); empty when absent.
  std::string cookie(std::string_view name) const;
  std::string queryParam(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool close = false;  // close the connection after this response
};

class HttpServer;

class Responder {
 public:
  Responder(HttpServer* server, uint64_t conn_id) : server_(server), conn_id_(conn_id) {}
  void send(HttpResponse response) const;

 private:
  HttpServer* server_;
  uint64_t conn_id_;
};

using Handler = std::function<void(HttpRequest&& request, Responder responder)>;

struct HttpLimits {
  std::size_t max_header_bytes = 16 * 1024;  // request line + headers (431)
  std::size_t max_body_bytes = 64 * 1024;    // decided from Content-Length (413)
  std::size_t max_connections = 10'000;      // more are accepted and closed
  // Per client address (IPv4, or IPv6 /128); 0: no limit. Keeps one client
  // from taking every slot of max_connections.
  std::size_t max_connections_per_client = 256;
  uint64_t first_byte_timeout_ms = 5'000;    // a new connection that sends nothing
  uint64_t header_timeout_ms = 10'000;       // first byte to end of head (408)
  uint64_t body_timeout_ms = 30'000;         // end of head to end of body (408)
  // Keep-alive between requests; also how long a client may leave our
  // output unread (write-blocked) before it is closed.
  uint64_t idle_timeout_ms = 60'000;
};

class HttpConnection;

class HttpServer {
 public:
  HttpServer(uv_loop_t* loop, Handler handler, HttpLimits limits);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; port 0 picks a free port (see port()). Returns a libuv
  // error code (0 on success). With reuse_port, the socket has SO_REUSEPORT:
  // several processes listening on the same host and port share it, the
  // kernel spreading new connections over them (eq-api with
  // EQ_API_PROCESSES > 1; see README).
  int listen(const std::string& host, int port, bool reuse_port = false);
  int port() const { return port_; }

  // Stops accepting and closes idle connections; busy ones close after their
  // current response. `done` runs once the last connection is gone.
  void shutdown(std::function<void()> done);

  std::size_t connectionCount() const { return conns_.size(); }

  // Builds the JSON envelope error response the server itself sends (parse
  // errors, limits) so it matches what handlers send.
  static HttpResponse errorResponse(int status, std::string_view msg,
                                    const std::string& request_id);

 private:
  friend class HttpConnection;
  friend class Responder;
  static void onConnection(uv_stream_t* server, int status);
  void deliver(uint64_t conn_id, HttpResponse response);
  void forget(uint64_t conn_id, const std::string& client);
  // Logs a refused connection at most once per kRefusalLogIntervalMs, with
  // the number refused since the last line: a flood must not flood the log.
  void logRefusal(const char* why);
  void maybeFinishShutdown();
  std::size_t limitsBody() const { return limits_.max_body_bytes; }

  uv_loop_t* loop_;
  Handler handler_;
  HttpLimits limits_;
  uv_tcp_t listener_;
  bool listening_ = false;
  bool shutting_down_ = false;
  int port_ = 0;
  uint64_t next_conn_id_ = 1;
  std::unordered_map<uint64_t, HttpConnection*> conns_;
  std::unordered_map<std::string, std::size_t> per_client_;  // open connections by address
  uint64_t refusals_unlogged_ = 0;
  uint64_t last_refusal_log_ms_ = 0;
  std::function<void()> on_shutdown_done_;
  // Every connection reads into this one buffer and copies what arrived into
  // its own input at once (libuv calls alloc and read back to back on the
  // loop thread), instead of a 64 KiB allocation and free per read.
  std::vector<char> read_buffer_ = std::vector<char>(kReadBufferBytes);
  static constexpr std::size_t kReadBufferBytes = 64 * 1024;
};

}  // namespace eq::http
