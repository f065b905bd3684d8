// Fuzz target: the HTTP server as a client on the network meets it. Each
// input is sent over a real loopback TCP connection to a real HttpServer
// (common/http_server.h) on a libuv loop in this process, cut into pieces
// at points the input itself chooses, so the head pre-scan, http-parser, the
// limits, pipelining, chunked bodies and the error paths all see arbitrary
// bytes arriving in arbitrary reads.
//
// Properties beyond "no crash, no sanitizer report": whatever the server
// sends is a sequence of HTTP/1.1 responses, each with a status line and a
// Content-Length that matches, and every byte it sends is valid UTF-8 (the
// handler echoes the request's path and a header into its JSON body, as the
// api's 404 does, so hostile bytes there must come back escaped).
//
// Threads: one; the loop runs only inside LLVMFuzzerTestOneInput.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "common/http_server.h"
#include "common/json.h"
#include "common/utf8.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

struct World {
  uv_loop_t loop;
  std::unique_ptr<eq::http::HttpServer> server;
  int port = 0;

  World() {
    uv_loop_init(&loop);
    eq::http::HttpLimits limits;
    limits.max_header_bytes = 2048;  // small limits: reached by small inputs
    limits.max_body_bytes = 4096;
    server = std::make_unique<eq::http::HttpServer>(
        &loop,
        [](eq::http::HttpRequest&& req, eq::http::Responder res) {
          eq::http::HttpResponse r;
          r.headers.emplace_back("Content-Type", "application/json; charset=utf-8");
          const std::string* ua = req.header("user-agent");
          r.body = eq::json::envelope(
              0, "null", req.method + " " + req.path + " " + (ua != nullptr ? *ua : "") + " " +
                             std::to_string(req.body.size()));
          r.close = req.path == "/close";
          res.send(std::move(r));
        },
        limits);
    FUZZ_CHECK(server->listen("127.0.0.1", 0) == 0);
    port = server->port();
  }
};

World& world() {
  static World* w = new World();  // lives for the whole run
  return *w;
}

void turn(World& w) { uv_run(&w.loop, UV_RUN_NOWAIT); }

// Reads what the server has sent so far without blocking.
void drain(int fd, std::string* out) {
  char buf[8192];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) return;
    out->append(buf, static_cast<size_t>(n));
  }
}

// Checks a byte stream of responses: status lines and Content-Length framing.
void checkResponses(std::string_view s) {
  while (!s.empty()) {
    FUZZ_CHECK(s.substr(0, 9) == "HTTP/1.1 ");
    size_t head_end = s.find("\r\n\r\n");
    if (head_end == std::string_view::npos) return;  // cut off by the close
    std::string_view head = s.substr(0, head_end);
    if (head.starts_with("HTTP/1.1 100 ")) {  // interim: no headers, no body
      s.remove_prefix(head_end + 4);
      continue;
    }
    size_t cl = head.find("\r\nContent-Length: ");
    FUZZ_CHECK(cl != std::string_view::npos);
    size_t length = std::strtoul(std::string(head.substr(cl + 18, 12)).c_str(), nullptr, 10);
    size_t next = head_end + 4 + length;
    // A HEAD response announces the GET's length and has no body; every
    // body here is a JSON envelope, so what follows is the next response.
    if (s.substr(head_end + 4).starts_with("HTTP/1.1 ")) next = head_end + 4;
    if (next > s.size()) return;  // cut off by the close
    s.remove_prefix(next);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& w = world();
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(w.port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);  // EINPROGRESS
  for (int i = 0; i < 4; ++i) turn(w);  // accept

  // The first byte picks the piece size (1..256 bytes); the rest is sent.
  size_t piece = size > 0 ? 1 + data[0] : 1;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  if (!rest.empty()) rest.remove_prefix(1);
  std::string got;
  while (!rest.empty()) {
    size_t n = std::min(piece, rest.size());
    ssize_t sent = ::send(fd, rest.data(), n, MSG_NOSIGNAL);
    if (sent <= 0) break;  // the server closed or our buffer is full: stop
    rest.remove_prefix(static_cast<size_t>(sent));
    turn(w);
    drain(fd, &got);
  }
  ::shutdown(fd, SHUT_WR);
  // Let the server answer what it has and see our EOF.
  for (int i = 0; i < 64 && w.server->connectionCount() > 0; ++i) {
    turn(w);
    drain(fd, &got);
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, 1);
  }
  drain(fd, &got);
  ::close(fd);
  for (int i = 0; i < 8 && w.server->connectionCount() > 0; ++i) turn(w);

  FUZZ_CHECK(eq::utf8::isValid(got));
  checkResponses(got);
  return 0;
}
