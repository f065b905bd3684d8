// bench_webhook_receiver: a fast keep-alive webhook receiver for bench/run.
//
// Accepts HTTP/1.1 POSTs on 127.0.0.1 (port 0 unless --port), answers each
// with 204 at once, and appends one line per request to the output file:
// `<task_id> <unix time of arrival in microseconds>`, the task id taken
// from the body's "task_id" field. bench/run counts deliveries and computes
// deliveries/s and the dispatch lag (tasks.finished_at -> arrival) from it.
// Writes its port to --port-file once listening. One thread, epoll, no
// signature check: it must never be the bottleneck of what it measures.
//
// Ownership/threads: single-threaded; the process owns every socket. Stops on
// SIGTERM/SIGINT after flushing the output file.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>

namespace {

volatile sig_atomic_t g_stop = 0;  // written by the signal handler only
void onSignal(int) { g_stop = 1; }

long long nowMicros() {
  timeval tv;
  gettimeofday(&tv, nullptr);
  return static_cast<long long>(tv.tv_sec) * 1'000'000 + tv.tv_usec;
}

// Case-insensitive search for a header name at the start of a line.
size_t contentLength(const std::string& head) {
  size_t pos = 0;
  while ((pos = head.find('\n', pos)) != std::string::npos) {
    ++pos;
    if (strncasecmp(head.c_str() + pos, "content-length:", 15) == 0) {
      return std::strtoul(head.c_str() + pos + 15, nullptr, 10);
    }
  }
  return 0;
}

std::string taskId(const std::string& body) {
  size_t k = body.find("\"task_id\"");
  if (k == std::string::npos) return "-";
  size_t q1 = body.find('"', body.find(':', k) + 1);
  if (q1 == std::string::npos) return "-";
  size_t q2 = body.find('"', q1 + 1);
  if (q2 == std::string::npos) return "-";
  return body.substr(q1 + 1, q2 - q1 - 1);
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  const char* out_path = nullptr;
  const char* port_file = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--port") port = std::atoi(argv[i + 1]);
    else if (a == "--out") out_path = argv[i + 1];
    else if (a == "--port-file") port_file = argv[i + 1];
  }
  if (out_path == nullptr) {
    std::fprintf(stderr, "usage: bench_webhook_receiver --out FILE [--port N] [--port-file F]\n");
    return 2;
  }
  FILE* out = std::fopen(out_path, "w");
  if (out == nullptr) {
    std::perror("open output");
    return 1;
  }
  signal(SIGTERM, onSignal);
  signal(SIGINT, onSignal);
  signal(SIGPIPE, SIG_IGN);

  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(lfd, 1024) != 0) {
    std::perror("bind/listen");
    return 1;
  }
  socklen_t len = sizeof addr;
  getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (port_file != nullptr) {
    std::string tmp = std::string(port_file) + ".tmp";
    FILE* pf = std::fopen(tmp.c_str(), "w");
    std::fprintf(pf, "%d\n", ntohs(addr.sin_port));
    std::fclose(pf);
    std::rename(tmp.c_str(), port_file);
  }

  int ep = epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = lfd;
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  std::unordered_map<int, std::string> bufs;
  static const char kReply[] = "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n";
  epoll_event events[256];
  char chunk[65536];
  while (!g_stop) {
    int n = epoll_wait(ep, events, 256, 200);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == lfd) {
        int c;
        while ((c = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK)) >= 0) {
          setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          epoll_event cev{};
          cev.events = EPOLLIN;
          cev.data.fd = c;
          epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
          bufs[c].clear();
        }
        continue;
      }
      std::string& buf = bufs[fd];
      bool closed = false;
      for (;;) {
        ssize_t r = read(fd, chunk, sizeof chunk);
        if (r > 0) {
          buf.append(chunk, static_cast<size_t>(r));
          continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EINTR)) closed = true;
        if (r < 0 && errno == EINTR) continue;
        break;
      }
      // Answer every complete request in the buffer (pipelining allowed).
      for (;;) {
        size_t end = buf.find("\r\n\r\n");
        if (end == std::string::npos) break;
        size_t body_len = contentLength(buf.substr(0, end + 2));
        if (buf.size() < end + 4 + body_len) break;
        long long at = nowMicros();
        std::string id = taskId(buf.substr(end + 4, body_len));
        std::fprintf(out, "%s %lld\n", id.c_str(), at);
        buf.erase(0, end + 4 + body_len);
        if (write(fd, kReply, sizeof kReply - 1) < 0) closed = true;
      }
      if (closed) {
        epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
        close(fd);
        bufs.erase(fd);
      }
    }
    // One flush per turn: bench/run reads the file while we run.
    std::fflush(out);
  }
  std::fclose(out);
  return 0;
}
