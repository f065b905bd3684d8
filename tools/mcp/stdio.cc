#include "tools/mcp/stdio.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "common/log.h"

namespace eq::mcp {
namespace {

// Writes all of `data`; false when the reader is gone (EPIPE: SIGPIPE is
// ignored by main) or another error happened.
bool writeAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

StopReason runStdio(McpServer& server, int in_fd, int out_fd, int signal_fd,
                    size_t max_line_bytes) {
  std::string buf;
  bool skipping = false;  // inside an oversized line, until its newline
  char chunk[65536];

  // Handles complete lines in buf; returns false if the output is closed.
  auto drain = [&](bool at_eof) -> bool {
    size_t start = 0;
    while (true) {
      size_t nl = buf.find('\n', start);
      if (nl == std::string::npos) break;
      std::string_view line(buf.data() + start, nl - start);
      start = nl + 1;
      if (skipping) {
        skipping = false;
        continue;
      }
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // tolerate CRLF
      if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
      std::string out = line.size() > max_line_bytes ? McpServer::oversizedLineError(max_line_bytes)
                                                     : server.handleLine(line);
      if (!out.empty() && !writeAll(out_fd, out + "\n")) return false;
    }
    buf.erase(0, start);
    if (!skipping && buf.size() > max_line_bytes) {
      log::warn("refused an oversized message",
                {{"max_bytes", static_cast<long long>(max_line_bytes)}});
      if (!writeAll(out_fd, McpServer::oversizedLineError(max_line_bytes) + "\n")) return false;
      skipping = true;
    }
    if (skipping) buf.clear();
    if (at_eof && !buf.empty() && !skipping) {
      std::string out = server.handleLine(buf);
      buf.clear();
      if (!out.empty() && !writeAll(out_fd, out + "\n")) return false;
    }
    return true;
  };

  while (true) {
    pollfd fds[2] = {{in_fd, POLLIN, 0}, {signal_fd, POLLIN, 0}};
    int n = ::poll(fds, signal_fd >= 0 ? 2 : 1, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      log::error("poll failed", {{"errno", static_cast<long long>(errno)}});
      return StopReason::kInputError;
    }
    if (signal_fd >= 0 && (fds[1].revents & POLLIN) != 0) return StopReason::kSignal;
    if (fds[0].revents == 0) continue;
    ssize_t got = ::read(in_fd, chunk, sizeof chunk);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      log::error("reading stdin failed", {{"errno", static_cast<long long>(errno)}});
      return StopReason::kInputError;
    }
    if (got == 0) {
      return drain(true) ? StopReason::kEndOfInput : StopReason::kOutputClosed;
    }
    buf.append(chunk, static_cast<size_t>(got));
    if (!drain(false)) return StopReason::kOutputClosed;
    // A signal that arrived during a long tool call is seen at the top of the
    // loop, before the next line is read (poll reports both fds).
  }
}

}  // namespace eq::mcp
