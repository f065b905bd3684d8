#include "common/config.h"

#include <cstdlib>
#include <string>
#include <utility>

#include "common/defaults.h"

namespace eq {
namespace {

std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : fallback;
}

// Parses a whole decimal integer in [lo, hi]; anything else is an error that
// names the variable, so a typo in the environment stops the process at once.
Status intFromEnv(const char* name, int64_t lo, int64_t hi, int64_t* out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return Status::ok();
  char* end = nullptr;
  long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || n < lo || n > hi) {
    return Status(500, std::string(name) + " must be an integer in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "], got '" + v + "'");
  }
  *out = n;
  return Status::ok();
}

}  // namespace

Result<Config> Config::fromEnv() {
  Config c;
  c.env = envOr("EQ_ENV", "production");
  if (c.env != "production" && c.env != "staging") {
    return Status(500, "EQ_ENV must be production or staging, got '" + c.env + "'");
  }
  int64_t port = defaults::kHttpPort;
  if (Status s = intFromEnv("EQ_HTTP_PORT", 0, 65535, &port); !s.isOk()) return s;
  c.http_port = static_cast<int>(port);
  c.http_host = envOr("EQ_HTTP_HOST", "0.0.0.0");
  c.amqp_url = envOr("EQ_AMQP_URL", defaults::kAmqpUrl);
  c.db_path = envOr("EQ_DB_PATH", defaults::kDbPath);
  c.engine = envOr("EQ_ENGINE", "builtin");
  if (c.engine != "builtin" && c.engine != "llm") {
    return Status(500, "EQ_ENGINE must be builtin or llm, got '" + c.engine + "'");
  }
  c.log_level = envOr("EQ_LOG_LEVEL", "info");
  if (c.log_level != "debug" && c.log_level != "info" && c.log_level != "warn" &&
      c.log_level != "error") {
    return Status(500, "EQ_LOG_LEVEL must be debug, info, warn or error");
  }
  c.webhook_allow_cidrs = envOr("EQ_WEBHOOK_ALLOW_CIDRS", "");
  if (Status s = intFromEnv("EQ_SYNC_DEADLINE_MS", 0, 3'600'000, &c.sync_deadline_ms);
      !s.isOk()) {
    return s;
  }
  for (auto [name, field] : {std::pair{"EQ_HTTP_HEADER_TIMEOUT_MS", &c.http_header_timeout_ms},
                             std::pair{"EQ_HTTP_BODY_TIMEOUT_MS", &c.http_body_timeout_ms},
                             std::pair{"EQ_HTTP_IDLE_TIMEOUT_MS", &c.http_idle_timeout_ms}}) {
    if (Status s = intFromEnv(name, 100, 3'600'000, field); !s.isOk()) return s;
  }
  if (Status s = intFromEnv("EQ_HTTP_MAX_CONNECTIONS", 1, 1'000'000, &c.http_max_connections);
      !s.isOk()) {
    return s;
  }
  return c;
}

}  // namespace eq
