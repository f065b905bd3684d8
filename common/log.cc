#include "common/log.h"

#include <unistd.h>

#include <string>

#include "common/json.h"
#include "common/timefmt.h"

namespace eq::log {
namespace {

// Set once before threads start (see the header); plain statics are enough.
Level g_min_level = Level::kInfo;
std::string g_component = "eq";

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
  // One write per line keeps lines whole across threads; a short write to a
  // closed stderr is not worth handling.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace eq::log
