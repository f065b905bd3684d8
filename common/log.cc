#include "common/log.h"

#include <unistd.h>

#include <cerrno>
#include <climits>

#include <string>

#include "common/json.h"
#include "common/timefmt.h"

namespace eq::log {
namespace {

// Set once before threads start (see the header); plain statics are enough.
Level g_min_level = Level::kInfo;
std::string g_component = "eq";

// Lines held by this thread since its last flush (see holdLines()).
thread_local bool t_holding = false;
thread_local std::string t_held;
constexpr std::size_t kMaxHeldBytes = 64 * 1024;

// Where the first write of `text` ends: after the last whole line within
// PIPE_BUF bytes, or after the first line if that one alone is longer.
std::size_t firstWriteEnd(std::string_view text) {
  if (text.size() <= PIPE_BUF) return text.size();
  std::size_t last = text.rfind('\n', PIPE_BUF - 1);
  if (last != std::string_view::npos) return last + 1;
  std::size_t first = text.find('\n');
  return first == std::string_view::npos ? text.size() : first + 1;
}

// Whole lines, in writes of at most PIPE_BUF bytes where lines allow: the
// kernel keeps such a write to a pipe in one piece, so another thread's line
// never lands inside one of ours (a regular file keeps any write whole). A
// closed or broken stderr is not worth handling.
void writeLines(std::string_view text) {
  while (!text.empty()) {
    std::string_view chunk = text.substr(0, firstWriteEnd(text));
    text.remove_prefix(chunk.size());
    while (!chunk.empty()) {
      ssize_t n = ::write(STDERR_FILENO, chunk.data(), chunk.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      chunk.remove_prefix(static_cast<std::size_t>(n));
    }
  }
}

const char* levelName(Level level) {
  switch (level) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
  }
  return "info";
}

}  // namespace

void setLevel(std::string_view level) {
  if (level == "debug") g_min_level = Level::kDebug;
  else if (level == "warn") g_min_level = Level::kWarn;
  else if (level == "error") g_min_level = Level::kError;
  else g_min_level = Level::kInfo;
}

void setComponent(std::string_view component) { g_component = std::string(component); }

bool enabled(Level level) { return level >= g_min_level; }

void write(Level level, std::string_view msg, std::initializer_list<Field> fields) {
  if (!enabled(level)) return;
  std::string line;
  line.reserve(256);
  line += "{\"ts\":";
  json::appendQuoted(line, iso8601(nowMs()));
  line += ",\"level\":\"";
  line += levelName(level);
  line += "\",\"component\":";
  json::appendQuoted(line, g_component);
  line += ",\"msg\":";
  json::appendQuoted(line, msg);
  for (const Field& f : fields) {
    line += ',';
    json::appendQuoted(line, f.first);
    line += ':';
    if (const auto* s = std::get_if<std::string_view>(&f.second)) {
      json::appendQuoted(line, *s);
    } else if (const auto* i = std::get_if<long long>(&f.second)) {
      line += std::to_string(*i);
    } else {
      line += std::to_string(std::get<double>(f.second));
    }
  }
  line += "}\n";
  if (t_holding) {
    t_held += line;
    // A warning or an error is not held back, nor are the lines before it.
    if (level >= Level::kWarn || t_held.size() >= kMaxHeldBytes) flushHeld();
    return;
  }
  // One write per line (or per held batch of whole lines) keeps lines whole
  // across threads.
  writeLines(line);
}

void holdLines() { t_holding = true; }

void flushHeld() {
  if (t_held.empty()) return;
  writeLines(t_held);
  t_held.clear();
}

}  // namespace eq::log
