#include "common/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <cstring>
#include <string_view>

#include "common/chunked_framing.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/log.h"
#include "common/timefmt.h"

namespace eq::http {
namespace {

// How long a closing connection keeps draining the client's input.
constexpr uint64_t kLingerMs = 2000;
// Unsent output above which we stop reading (and so stop producing more
// responses) for a client that pipelines requests but does not read. What
// one connection may hold of its responses before we stop parsing its
// requests: bytes libuv has not handed to the kernel (this bound) plus the
// kernel's send buffer, which we cap too (kSendBufferBytes; Linux reserves
// twice the value set). Together at most about 768 KiB per client that does
// not read, however much it pipelines.
constexpr size_t kMaxPendingOutputBytes = 256 * 1024;
constexpr int kSendBufferBytes = 256 * 1024;
constexpr uint64_t kRefusalLogIntervalMs = 10'000;
// Input handed to http-parser per call (see HttpConnection::feed).
constexpr size_t kParseSliceBytes = 16 * 1024;
constexpr std::string_view kTransferEncoding = "transfer-encoding:";

const char* reasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 302: return "Found";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
  }
}

// The peer's address as the key of the per-client limit: the raw bytes of
// the IPv4 address, or of the IPv6 one (an IPv4-mapped IPv6 peer counts as
// its IPv4 address). Empty when the peer is unknown.
std::string clientKey(uv_tcp_t* tcp) {
  sockaddr_storage peer{};
  int len = sizeof peer;
  if (uv_tcp_getpeername(tcp, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return "";
  if (peer.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&peer);
    return std::string(reinterpret_cast<const char*>(&a->sin_addr), 4);
  }
  if (peer.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&peer);
    if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
      return std::string(reinterpret_cast<const char*>(&a->sin6_addr) + 12, 4);
    }
    return std::string(reinterpret_cast<const char*>(&a->sin6_addr), 16);
  }
  return "";
}

std::string clientText(const std::string& key) {
  char buf[INET6_ADDRSTRLEN] = "";
  if (key.size() == 4) inet_ntop(AF_INET, key.data(), buf, sizeof buf);
  if (key.size() == 16) inet_ntop(AF_INET6, key.data(), buf, sizeof buf);
  return buf;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

const std::string* HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return &v;
  }
  return nullptr;
}

namespace {

// The value of `name` in a list of name=value pairs split by `separator`,
// each perhaps led by spaces (a Cookie header's "a=1; b=2", a query
// string's "a=1&b=2"); empty when absent.
std::string valueInPairs(std::string_view list, char separator, std::string_view name) {
  while (!list.empty()) {
    const std::size_t end = list.find(separator);
    std::string_view pair = list.substr(0, end);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    if (pair.size() > name.size() && pair.substr(0, name.size()) == name &&
        pair[name.size()] == '=') {
      return std::string(pair.substr(name.size() + 1));
    }
    if (end == std::string_view::npos) break;
    list.remove_prefix(end + 1);
  }
  return "";
}

}  // namespace

std::string HttpRequest::cookie(std::string_view name) const {
  const std::string* list = header("cookie");
  return list != nullptr ? valueInPairs(*list, ';', name) : "";
}

std::string HttpRequest::queryParam(std::string_view name) const {
  return valueInPairs(query, '&', name);
}

size_t HttpRequest::headerCount(std::string_view name) const {
  size_t n = 0;
  for (const auto& [k, v] : headers) n += k == name ? 1 : 0;
  return n;
}

// One client connection. Lives on the server's loop; see the file header of
// http_server.h for its lifetime rules.
class HttpConnection {
 public:
  HttpConnection(HttpServer* server, uint64_t id) : server_(server), id_(id) {
    tcp_.data = this;
    timer_.data = this;
    parser_.data = this;
    http_parser_init(&parser_, HTTP_REQUEST);
    http_parser_settings_init(&settings_);
    settings_.on_message_begin = &HttpConnection::onMessageBegin;
    settings_.on_url = &HttpConnection::onUrl;
    settings_.on_header_field = &HttpConnection::onHeaderField;
    settings_.on_header_value = &HttpConnection::onHeaderValue;
    settings_.on_headers_complete = &HttpConnection::onHeadersComplete;
    settings_.on_body = &HttpConnection::onBody;
    settings_.on_message_complete = &HttpConnection::onMessageComplete;
  }

  uv_tcp_t* tcp() { return &tcp_; }
  uint64_t id() const { return id_; }
  bool busy() const { return awaiting_response_; }

  void setClient(std::string client) { client_ = std::move(client); }
  const std::string& client() const { return client_; }

  void start(uv_loop_t* loop) {
    uv_timer_init(loop, &timer_);
    // Until its first byte a connection has cost the client nothing: it gets
    // a short timer, not the keep-alive one (a socket that never speaks
    // would otherwise hold a slot for the whole idle timeout).
    armTimer(Phase::kIdle, server_->limits_.first_byte_timeout_ms);
    uv_read_start(reinterpret_cast<uv_stream_t*>(&tcp_), &HttpConnection::onAlloc,
                  &HttpConnection::onRead);
  }

  // Starts closing; the object is freed in onClosed once both handles are
  // closed. Safe to call more than once.
  void close() {
    if (closing_) return;
    closing_ = true;
    server_->forget(id_, client_);
    uv_timer_stop(&timer_);
    uv_close(reinterpret_cast<uv_handle_t*>(&timer_), &HttpConnection::onClosed);
    uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), &HttpConnection::onClosed);
  }

  // Called when the server shuts down: idle connections close now, busy ones
  // after their response.
  void closeWhenIdle() {
    close_after_response_ = true;
    if (!awaiting_response_) close();
  }

  void respond(HttpResponse response) {
    if (closing_ || !awaiting_response_) return;
    awaiting_response_ = false;
    bool close_after = response.close || !keep_alive_ || close_after_response_;
    write(render(response, close_after));
    log::debug("http response", {{"request_id", current_request_id_},
                                 {"status", static_cast<long long>(response.status)}});
    if (close_after) {
      // Stop parsing; what the client sends from now on is read and dropped
      // until the lingering close (see onWritten).
      shutdown_after_write_ = true;
      return;
    }
    if (uv_stream_get_write_queue_size(reinterpret_cast<uv_stream_t*>(&tcp_)) >
        kMaxPendingOutputBytes) {
      // Resumed from onWritten once the client reads; a client that never
      // does is closed after the idle timeout.
      write_blocked_ = true;
      armTimer(Phase::kStalled, server_->limits_.idle_timeout_ms);
      return;
    }
    resumeReading();
  }

 private:
  // ---- libuv callbacks

  static void onAlloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
    std::vector<char>& shared = static_cast<HttpConnection*>(handle->data)->server_->read_buffer_;
    buf->base = shared.data();
    buf->len = shared.size();
  }

  static void onRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
    auto* self = static_cast<HttpConnection*>(stream->data);
    if (nread > 0 && !self->shutdown_after_write_) {
      self->in_.append(buf->base, static_cast<size_t>(nread));
    }
    if (nread < 0) {
      self->close();  // EOF or error: nothing left to answer
      return;
    }
    if (nread > 0 && !self->shutdown_after_write_) self->feed();
  }

  static void onTimer(uv_timer_t* timer) {
    auto* self = static_cast<HttpConnection*>(timer->data);
    switch (self->phase_) {
      case Phase::kIdle:
      case Phase::kLinger:
        self->close();
        return;
      case Phase::kStalled:
        log::info("connection closed: the client left its responses unread",
                  {{"client", clientText(self->client_)}});
        self->close();
        return;
      case Phase::kHeaders:
        // A slow-header client gets a 408 and the connection is closed; it
        // holds nothing but its socket until then.
        self->fail(408, "request timeout: the request head did not arrive within " +
                            std::to_string(self->server_->limits_.header_timeout_ms / 1000) +
                            " s");
        return;
      case Phase::kBody:
        self->fail(408, "request timeout: the request body did not arrive within " +
                            std::to_string(self->server_->limits_.body_timeout_ms / 1000) + " s");
        return;
      case Phase::kHandling:
        return;  // the handler answers, possibly at its deadline
    }
  }

  static void onClosed(uv_handle_t* handle) {
    auto* self = static_cast<HttpConnection*>(handle->data);
    if (++self->closed_handles_ == 2) delete self;
  }

  struct WriteReq {
    uv_write_t req;
    std::string data;
    HttpConnection* conn;
  };

  static void onWritten(uv_write_t* req, int status) {
    auto* w = reinterpret_cast<WriteReq*>(req);
    HttpConnection* self = w->conn;
    delete w;
    --self->writes_in_flight_;
    if (status < 0) {
      self->close();
    } else if (self->writes_in_flight_ == 0 && self->shutdown_after_write_) {
      self->lingeringClose();
    } else if (self->write_blocked_ &&
               uv_stream_get_write_queue_size(reinterpret_cast<uv_stream_t*>(&self->tcp_)) <=
                   kMaxPendingOutputBytes / 2) {
      self->write_blocked_ = false;
      self->resumeReading();
    }
  }

  // Closing a socket with unread input makes the kernel send a reset, which
  // can destroy the response we just wrote (a 413 sent while the oversized
  // body is still arriving). So: send FIN with uv_shutdown, keep reading and
  // dropping input, and close on EOF or after a short linger.
  void lingeringClose() {
    if (closing_ || lingering_) return;
    lingering_ = true;
    shutdown_req_.data = this;
    if (uv_shutdown(&shutdown_req_, reinterpret_cast<uv_stream_t*>(&tcp_),
                    [](uv_shutdown_t*, int) {}) != 0) {
      close();
      return;
    }
    uv_read_start(reinterpret_cast<uv_stream_t*>(&tcp_), &HttpConnection::onAlloc,
                  &HttpConnection::onRead);
    armTimer(Phase::kLinger, kLingerMs);
  }

  void write(std::string data) {
    if (closing_) return;
    auto* w = new WriteReq{{}, std::move(data), this};
    uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
    ++writes_in_flight_;
    int rc = uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&tcp_), &buf, 1,
                      &HttpConnection::onWritten);
    if (rc < 0) {
      --writes_in_flight_;
      delete w;
      close();
    }
  }

  // The one timer of a connection, by phase: idle keep-alive between
  // requests, the head of a request, its body, and the lingering close.
  // kStalled: responses written but the client does not read them.
  enum class Phase { kIdle, kHeaders, kBody, kHandling, kStalled, kLinger };

  void armTimer(Phase phase, uint64_t ms) {
    phase_ = phase;
    uv_timer_start(&timer_, &HttpConnection::onTimer, ms, 0);
  }

  void armIdleTimer() { armTimer(Phase::kIdle, server_->limits_.idle_timeout_ms); }

  // Continues with whatever the client already pipelined.
  void resumeReading() {
    armIdleTimer();
    uv_read_start(reinterpret_cast<uv_stream_t*>(&tcp_), &HttpConnection::onAlloc,
                  &HttpConnection::onRead);
    feed();
  }

  // ---- parsing

  // Parses buffered input until a request is complete (the parser then
  // pauses) or the input runs out. A handler may answer synchronously from
  // inside http_parser_execute; respond() then only re-arms reading, and this
  // loop itself unpauses the parser, so the parser is never re-entered.
  void feed() {
    if (in_feed_) return;
    in_feed_ = true;
    // After a response that closes the connection nothing more is parsed
    // (RFC 9112 §9.6): pipelined requests behind it are not processed.
    // Nor while the client leaves too much of our output unread
    // (write_blocked_): handlers that answer synchronously would otherwise
    // keep producing responses from an input buffer full of pipelined requests.
    while (!closing_ && !awaiting_response_ && !shutdown_after_write_ && !write_blocked_ &&
           !in_.empty()) {
      if (at_message_start_) {
        if (phase_ == Phase::kIdle) armTimer(Phase::kHeaders, server_->limits_.header_timeout_ms);
        int head = scanHead();
        if (head < 0) {
          fail(error_status_, error_msg_);
          break;
        }
        if (head == 0) break;  // the head is not complete yet
        at_message_start_ = false;
        // A head with Transfer-Encoding goes to the parser alone, so that
        // no body byte reaches it before the framing check below is armed
        // (onHeadersComplete). Other heads go with what follows them.
        head_left_ = head_has_te_ ? scan_pos_ : 0;
      }
      if (HTTP_PARSER_ERRNO(&parser_) == HPE_PAUSED) http_parser_pause(&parser_, 0);
      // In slices, so that the bound below is checked before a message that
      // exceeds it can complete within one call.
      size_t len = std::min(in_.size(), kParseSliceBytes);
      if (head_left_ > 0) {
        len = std::min(len, head_left_);
      } else if (chunked_body_) {
        // The parser is lax about chunked framing (chunked_framing.h): every
        // body byte passes the strict check first. At the end of the body
        // the slice ends too, so the parser completes the request exactly
        // where the check did.
        ChunkedFraming::Step step = chunked_framing_.scan(std::string_view(in_.data(), len));
        if (step.verdict == ChunkedFraming::Verdict::kBad) {
          fail(400, std::string("malformed HTTP request: ") + step.error);
          break;
        }
        if (step.verdict == ChunkedFraming::Verdict::kComplete) {
          len = step.used;
          chunked_body_ = false;
        }
      }
      size_t n = http_parser_execute(&parser_, &settings_, in_.data(), len);
      http_errno err = HTTP_PARSER_ERRNO(&parser_);
      in_.erase(0, n);
      head_left_ -= std::min(n, head_left_);
      message_wire_bytes_ += n;
      if (err == HPE_PAUSED) continue;  // a request completed; loop checks if answered
      if (error_status_ == 0 && message_wire_bytes_ > maxMessageWireBytes()) {
        // The head and body limits bound what we keep, not what the parser
        // skips: chunk extensions (and a body cut into tiny chunks) cost
        // parsing time without adding body bytes. Bound the whole message
        // on the wire.
        fail(400, "malformed HTTP request: chunked framing exceeds " +
                      std::to_string(maxMessageWireBytes()) +
                      " bytes (chunk extensions or tiny chunks)");
        break;
      }
      if (error_status_ != 0) {
        fail(error_status_, error_msg_);
        break;
      }
      if (err != HPE_OK) {
        fail(400, std::string("malformed HTTP request: ") + http_errno_description(err));
        break;
      }
      if (n == 0) break;
    }
    in_feed_ = false;
  }

  // Checks the raw request head for what http-parser 2.9 accepts but a
  // front end must not: bare LF line endings, whitespace between a header
  // name and its colon, and obsolete line folding. Each lets two parsers in a
  // chain disagree on where headers (and so requests) begin, which is how
  // request smuggling works. Scans incrementally; returns 1 when the head is
  // complete and clean, 0 when more bytes are needed, -1 on a violation
  // (error_status_ and error_msg_ set).
  int scanHead() {
    for (; scan_pos_ < in_.size(); ++scan_pos_) {
      if (in_[scan_pos_] != '\n') continue;
      if (scan_pos_ == 0 || in_[scan_pos_ - 1] != '\r') {
        return reject(400, "malformed HTTP request: bare LF line ending (use CRLF)");
      }
      std::string_view line(in_.data() + line_start_, scan_pos_ - 1 - line_start_);
      line_start_ = scan_pos_ + 1;
      if (line.empty()) {
        if (!saw_request_line_) continue;  // CRLFs before the request line are tolerated
        ++scan_pos_;
        return 1;
      }
      if (!saw_request_line_) {
        saw_request_line_ = true;
        head_has_te_ = false;
        continue;
      }
      if (line.size() >= kTransferEncoding.size() &&
          strncasecmp(line.data(), kTransferEncoding.data(), kTransferEncoding.size()) == 0) {
        head_has_te_ = true;
      }
      if (line.front() == ' ' || line.front() == '\t') {
        return reject(400, "malformed HTTP request: obsolete header line folding");
      }
      size_t colon = line.find(':');
      if (colon != std::string_view::npos && colon > 0 &&
          (line[colon - 1] == ' ' || line[colon - 1] == '\t')) {
        return reject(400, "malformed HTTP request: whitespace before ':' in a header name");
      }
    }
    if (in_.size() > server_->limits_.max_header_bytes) {
      return reject(431, "request line and headers exceed " +
                             std::to_string(server_->limits_.max_header_bytes) + " bytes");
    }
    return 0;
  }

  size_t maxMessageWireBytes() const {
    return server_->limits_.max_header_bytes + 2 * server_->limits_.max_body_bytes;
  }

  int reject(int status, std::string msg) {
    error_status_ = status;
    error_msg_ = std::move(msg);
    return -1;
  }

  void fail(int status, const std::string& msg) {
    // A request we cannot parse is answered and the connection closed: we no
    // longer know where the next request would begin.
    awaiting_response_ = true;
    keep_alive_ = false;
    std::string rid = current_request_id_.empty() ? ids::newRequestId() : current_request_id_;
    respond(HttpServer::errorResponse(status, msg, rid));
  }

  std::string render(const HttpResponse& r, bool close_after) {
    std::string out;
    out.reserve(r.body.size() + 256);
    out += "HTTP/1.1 ";
    out += std::to_string(r.status);
    out += ' ';
    out += reasonPhrase(r.status);
    out += "\r\n";
    for (const auto& [k, v] : r.headers) {
      out += k;
      out += ": ";
      out += v;
      out += "\r\n";
    }
    out += "Content-Length: ";
    out += std::to_string(r.body.size());
    out += "\r\n";
    if (close_after) {
      out += "Connection: close\r\n";
    } else if (http10_) {
      out += "Connection: keep-alive\r\n";  // HTTP/1.0 closes unless told otherwise
    }
    out += "\r\n";
    // A HEAD response has the headers of the GET response, Content-Length
    // included, and no body (RFC 9110 §9.3.2).
    if (!head_request_) out += r.body;
    return out;
  }

  static HttpConnection* self(http_parser* p) { return static_cast<HttpConnection*>(p->data); }

  static int onMessageBegin(http_parser* p) {
    HttpConnection* c = self(p);
    c->req_ = HttpRequest();
    c->req_.request_id = ids::newRequestId();
    c->req_.received_ms = nowMs();
    c->req_.client = c->client_;
    c->current_request_id_ = c->req_.request_id;
    c->url_.clear();
    c->header_bytes_ = 0;
    c->message_wire_bytes_ = 0;
    c->head_request_ = false;
    c->last_was_value_ = false;
    return 0;
  }

  bool countHeaderBytes(size_t n) {
    header_bytes_ += n;
    if (header_bytes_ > server_->limits_.max_header_bytes) {
      error_status_ = 431;
      error_msg_ = "request line and headers exceed " +
                   std::to_string(server_->limits_.max_header_bytes) + " bytes";
      return false;
    }
    return true;
  }

  static int onUrl(http_parser* p, const char* at, size_t n) {
    HttpConnection* c = self(p);
    if (!c->countHeaderBytes(n)) return -1;
    c->url_.append(at, n);
    return 0;
  }

  static int onHeaderField(http_parser* p, const char* at, size_t n) {
    HttpConnection* c = self(p);
    if (!c->countHeaderBytes(n)) return -1;
    if (c->last_was_value_ || c->req_.headers.empty()) {
      c->req_.headers.emplace_back();
      c->last_was_value_ = false;
    }
    c->req_.headers.back().first += lower(std::string_view(at, n));
    return 0;
  }

  static int onHeaderValue(http_parser* p, const char* at, size_t n) {
    HttpConnection* c = self(p);
    if (!c->countHeaderBytes(n)) return -1;
    c->req_.headers.back().second.append(at, n);
    c->last_was_value_ = true;
    return 0;
  }

  static int onHeadersComplete(http_parser* p) {
    HttpConnection* c = self(p);
    c->req_.method = http_method_str(static_cast<http_method>(p->method));
    std::string_view url = c->url_;
    size_t q = url.find('?');
    c->req_.path = std::string(url.substr(0, q));
    if (q != std::string_view::npos) c->req_.query = std::string(url.substr(q + 1));
    if (!c->checkFraming(p)) return -1;
    // Armed before the parser sees a body byte: the head was given to it
    // alone (head_has_te_).
    c->chunked_body_ = (p->flags & F_CHUNKED) != 0;
    c->chunked_framing_ = ChunkedFraming();
    c->head_request_ = p->method == HTTP_HEAD;
    // Decide on the size before reading the body (docs/contract.md §2: 413 over 64 KiB).
    if ((p->flags & F_CONTENTLENGTH) != 0 &&
        p->content_length > c->server_->limitsBody()) {
      c->error_status_ = 413;
      c->error_msg_ = "request body exceeds " + std::to_string(c->server_->limitsBody()) + " bytes";
      return -1;
    }
    if (const std::string* expect = c->req_.header("expect")) {
      if (strcasecmp(expect->c_str(), "100-continue") != 0) {
        c->error_status_ = 417;
        c->error_msg_ = "expectation failed: only Expect: 100-continue is supported";
        return -1;
      }
      // The client waits for this before sending the body; we only get here
      // when the declared size is acceptable.
      if (p->http_major == 1 && p->http_minor >= 1) c->write("HTTP/1.1 100 Continue\r\n\r\n");
    }
    c->armTimer(Phase::kBody, c->server_->limits_.body_timeout_ms);
    return 0;
  }

  // What http-parser 2.9 lets through but RFC 9112 does not, each a way for
  // two parsers in a chain to read one request differently: a version other
  // than HTTP/1.0 or 1.1 (505), HTTP/1.1 without exactly one Host (400),
  // more than one Transfer-Encoding header, and a transfer coding other
  // than chunked (400 both: we cannot know where the body ends).
  bool checkFraming(const http_parser* p) {
    if (p->http_major != 1 || p->http_minor > 1) {
      error_status_ = 505;
      error_msg_ = "HTTP version not supported: this server speaks 1.1 and 1.0";
      return false;
    }
    size_t hosts = req_.headerCount("host");
    if ((p->http_minor == 1 && hosts == 0) || hosts > 1) {
      error_status_ = 400;
      error_msg_ = hosts == 0 ? "malformed HTTP request: a Host header is required"
                              : "malformed HTTP request: more than one Host header";
      return false;
    }
    if (size_t te = req_.headerCount("transfer-encoding"); te > 1) {
      error_status_ = 400;
      error_msg_ = "malformed HTTP request: more than one Transfer-Encoding header";
      return false;
    } else if (te == 1 && strcasecmp(trimmed(*req_.header("transfer-encoding")).c_str(),
                                     "chunked") != 0) {
      error_status_ = 400;
      error_msg_ = "malformed HTTP request: Transfer-Encoding other than chunked";
      return false;
    }
    return true;
  }

  static std::string trimmed(std::string_view v) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return std::string(v);
  }

  static int onBody(http_parser* p, const char* at, size_t n) {
    HttpConnection* c = self(p);
    if (c->req_.body.size() + n > c->server_->limitsBody()) {
      c->error_status_ = 413;  // chunked bodies are counted as they arrive
      c->error_msg_ =
          "request body exceeds " + std::to_string(c->server_->limitsBody()) + " bytes";
      return -1;
    }
    c->req_.body.append(at, n);
    return 0;
  }

  static int onMessageComplete(http_parser* p) {
    HttpConnection* c = self(p);
    c->keep_alive_ = http_should_keep_alive(p) != 0;
    c->http10_ = p->http_major == 1 && p->http_minor == 0;
    c->awaiting_response_ = true;
    c->phase_ = Phase::kHandling;
    uv_timer_stop(&c->timer_);
    // The next request's head starts after this message.
    c->at_message_start_ = true;
    c->scan_pos_ = c->line_start_ = 0;
    c->saw_request_line_ = false;
    c->chunked_body_ = false;  // the check ended the slice here already
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&c->tcp_));
    http_parser_pause(p, 1);
    c->server_->handler_(std::move(c->req_), Responder(c->server_, c->id_));
    return 0;
  }

  HttpServer* server_;
  uint64_t id_;
  std::string client_;  // the peer's address, for the per-client limit
  uv_tcp_t tcp_;
  uv_timer_t timer_;
  http_parser parser_;
  http_parser_settings settings_;
  std::string in_;  // received bytes not yet parsed
  HttpRequest req_;
  std::string url_;
  std::string current_request_id_;
  size_t header_bytes_ = 0;
  size_t message_wire_bytes_ = 0;  // bytes parsed for the current request
  bool head_request_ = false;      // the current request is a HEAD
  bool last_was_value_ = false;
  bool keep_alive_ = true;
  bool awaiting_response_ = false;
  bool close_after_response_ = false;
  bool shutdown_after_write_ = false;
  bool closing_ = false;
  bool in_feed_ = false;
  bool lingering_ = false;
  bool write_blocked_ = false;
  Phase phase_ = Phase::kIdle;
  // Head pre-scan state (scanHead); positions index into in_, which is not
  // consumed until the head is complete.
  bool at_message_start_ = true;
  bool saw_request_line_ = false;
  size_t scan_pos_ = 0;
  size_t line_start_ = 0;
  bool head_has_te_ = false;  // the head has a Transfer-Encoding line
  size_t head_left_ = 0;      // bytes of such a head the parser has not had yet
  // The strict framing check of a chunked body (chunked_framing.h), armed
  // by onHeadersComplete and done at the end of the body.
  bool chunked_body_ = false;
  ChunkedFraming chunked_framing_;
  bool http10_ = false;
  uv_shutdown_t shutdown_req_;
  int closed_handles_ = 0;
  int writes_in_flight_ = 0;
  int error_status_ = 0;
  std::string error_msg_;
};

void Responder::send(HttpResponse response) const { server_->deliver(conn_id_, std::move(response)); }

HttpServer::HttpServer(uv_loop_t* loop, Handler handler, HttpLimits limits)
    : loop_(loop), handler_(std::move(handler)), limits_(limits) {
  uv_tcp_init(loop_, &listener_);
  listener_.data = this;
}

HttpServer::~HttpServer() = default;

int HttpServer::listen(const std::string& host, int port, bool reuse_port) {
  struct sockaddr_storage addr;
  int rc = uv_ip4_addr(host.c_str(), port, reinterpret_cast<sockaddr_in*>(&addr));
  if (rc != 0) rc = uv_ip6_addr(host.c_str(), port, reinterpret_cast<sockaddr_in6*>(&addr));
  if (rc != 0) return rc;
  if (reuse_port) {
    // libuv 1.44 has no UV_TCP_REUSEPORT: make the socket ourselves, set
    // SO_REUSEPORT before bind, and hand it to libuv.
    int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int one = 1;
    if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
      rc = -errno;
      ::close(fd);
      return rc;
    }
    socklen_t len = addr.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
      rc = -errno;
      ::close(fd);
      return rc;
    }
    if ((rc = uv_tcp_open(&listener_, fd)) != 0) {
      ::close(fd);
      return rc;
    }
  } else if ((rc = uv_tcp_bind(&listener_, reinterpret_cast<sockaddr*>(&addr), 0)) != 0) {
    return rc;
  }
  if ((rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), 511, &onConnection)) != 0) {
    return rc;
  }
  listening_ = true;
  struct sockaddr_storage bound;
  int len = sizeof bound;
  uv_tcp_getsockname(&listener_, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = bound.ss_family == AF_INET6
              ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
              : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return 0;
}

void HttpServer::onConnection(uv_stream_t* listener, int status) {
  auto* self = static_cast<HttpServer*>(listener->data);
  if (status < 0 || self->shutting_down_) return;
  auto* conn = new HttpConnection(self, self->next_conn_id_++);
  uv_tcp_init(self->loop_, conn->tcp());
  const char* refused = nullptr;
  if (uv_accept(listener, reinterpret_cast<uv_stream_t*>(conn->tcp())) == 0) {
    std::string client = clientKey(conn->tcp());
    size_t per_client_max = self->limits_.max_connections_per_client;
    if (self->conns_.size() >= self->limits_.max_connections) {
      refused = "connection cap reached";
    } else if (per_client_max > 0 && !client.empty() &&
               self->per_client_[client] >= per_client_max) {
      refused = "per-client connection limit reached";
    } else {
      conn->setClient(std::move(client));
    }
  } else {
    refused = "";  // accept failed: nothing to log
  }
  if (refused != nullptr) {
    // Over a limit the connection is accepted and closed at once: leaving it
    // in the backlog would only make the client wait for nothing.
    if (*refused != '\0') self->logRefusal(refused);
    // Not yet registered: close the bare handle and free it in its callback.
    uv_close(reinterpret_cast<uv_handle_t*>(conn->tcp()),
             [](uv_handle_t* h) { delete static_cast<HttpConnection*>(h->data); });
    return;
  }
  uv_tcp_nodelay(conn->tcp(), 1);
  // Cap the kernel's send buffer too (see kSendBufferBytes): without it
  // Linux grows a socket's buffer to megabytes for a client that does not
  // read. On failure the kernel's default stays: no worse than before.
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(conn->tcp()), &fd) == 0) {
    int size = kSendBufferBytes;
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  }
  if (!conn->client().empty()) ++self->per_client_[conn->client()];
  self->conns_.emplace(conn->id(), conn);
  conn->start(self->loop_);
}

void HttpServer::logRefusal(const char* why) {
  ++refusals_unlogged_;
  uint64_t now = uv_now(loop_);
  if (last_refusal_log_ms_ != 0 && now - last_refusal_log_ms_ < kRefusalLogIntervalMs) return;
  log::warn("connections refused",
            {{"reason", why},
             {"refused", static_cast<long long>(refusals_unlogged_)},
             {"max_connections", static_cast<long long>(limits_.max_connections)},
             {"max_connections_per_client",
              static_cast<long long>(limits_.max_connections_per_client)}});
  refusals_unlogged_ = 0;
  last_refusal_log_ms_ = now;
}

void HttpServer::deliver(uint64_t conn_id, HttpResponse response) {
  auto it = conns_.find(conn_id);
  if (it == conns_.end()) return;  // the client went away; nothing to answer
  it->second->respond(std::move(response));
}

void HttpServer::forget(uint64_t conn_id, const std::string& client) {
  conns_.erase(conn_id);
  if (auto it = per_client_.find(client); it != per_client_.end() && --it->second == 0) {
    per_client_.erase(it);
  }
  maybeFinishShutdown();
}

void HttpServer::shutdown(std::function<void()> done) {
  shutting_down_ = true;
  on_shutdown_done_ = std::move(done);
  // The listener handle exists from the constructor on, listening or not
  // (a failed listen() leaves it open): closing it is what lets the loop
  // end and uv_loop_close succeed (LeakSanitizer found the loop's memory
  // leaked after a metrics port that was already in use).
  listening_ = false;
  auto* listener = reinterpret_cast<uv_handle_t*>(&listener_);
  if (!uv_is_closing(listener)) uv_close(listener, nullptr);
  // closeWhenIdle may erase from conns_; iterate over a copy of the ids.
  std::vector<HttpConnection*> all;
  for (auto& [id, c] : conns_) all.push_back(c);
  for (HttpConnection* c : all) c->closeWhenIdle();
  maybeFinishShutdown();
}

void HttpServer::maybeFinishShutdown() {
  if (shutting_down_ && conns_.empty() && on_shutdown_done_) {
    auto done = std::move(on_shutdown_done_);
    on_shutdown_done_ = nullptr;
    done();
  }
}

HttpResponse HttpServer::errorResponse(int status, std::string_view msg,
                                       const std::string& request_id) {
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json; charset=utf-8");
  r.headers.emplace_back("X-Request-Id", request_id);
  r.body = json::envelope(status, "null", msg);
  return r;
}

}  // namespace eq::http
