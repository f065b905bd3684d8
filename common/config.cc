#include "common/config.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

#include "common/ascii.h"
#include "common/defaults.h"
#include "common/msg_auth.h"

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

// EQ_LLM_*: only required when the llm engine is selected, but always
// checked when set, so a typo shows up before someone switches engines.
Status llmFromEnv(bool required, LlmConfig* llm) {
  llm->base_url = envOr("EQ_LLM_BASE_URL", "");
  while (!llm->base_url.empty() && llm->base_url.back() == '/') llm->base_url.pop_back();
  if (!llm->base_url.empty() && llm->base_url.rfind("http://", 0) != 0 &&
      llm->base_url.rfind("https://", 0) != 0) {
    return Status(
        500, "EQ_LLM_BASE_URL must be an http:// or https:// URL, got '" + llm->base_url + "'");
  }
  llm->api_key = envOr("EQ_LLM_API_KEY", "");
  llm->model = envOr("EQ_LLM_MODEL", "");
  if (required && (llm->base_url.empty() || llm->model.empty())) {
    return Status(500,
                  "EQ_ENGINE=llm needs EQ_LLM_BASE_URL (e.g. http://127.0.0.1:8080/v1) "
                  "and EQ_LLM_MODEL");
  }
  static const char* const kModeSuffix[3] = {"FAST", "STANDARD", "PERFECT"};
  for (int m = 0; m < 3; ++m) {
    std::string suffix = kModeSuffix[m];
    llm->mode_model[m] = envOr(("EQ_LLM_MODEL_" + suffix).c_str(), "");
    if (Status s = intFromEnv(("EQ_LLM_TIMEOUT_MS_" + suffix).c_str(), 100, 3'600'000,
                              &llm->mode_timeout_ms[m]);
        !s.isOk()) {
      return s;
    }
  }
  if (Status s = intFromEnv("EQ_LLM_TIMEOUT_MS", 100, 3'600'000, &llm->timeout_ms); !s.isOk()) {
    return s;
  }
  if (Status s = intFromEnv("EQ_LLM_MAX_RETRIES", 0, 10, &llm->max_retries); !s.isOk()) return s;
  if (Status s = intFromEnv("EQ_LLM_MAX_TOKENS", 16, 131'072, &llm->max_tokens); !s.isOk()) {
    return s;
  }
  std::string t = envOr("EQ_LLM_TEMPERATURE", "");
  if (!t.empty()) {
    char* end = nullptr;
    double v = std::strtod(t.c_str(), &end);
    if (*end != '\0' || !(v >= 0.0 && v <= 2.0)) {
      return Status(500, "EQ_LLM_TEMPERATURE must be a number in [0, 2], got '" + t + "'");
    }
    llm->temperature = v;
  }
  llm->response_format = envOr("EQ_LLM_RESPONSE_FORMAT", "json_schema");
  if (llm->response_format != "json_schema" && llm->response_format != "json_object") {
    return Status(500, "EQ_LLM_RESPONSE_FORMAT must be json_schema or json_object, got '" +
                           llm->response_format + "'");
  }
  std::string fb = envOr("EQ_LLM_FALLBACK", "none");
  if (fb != "none" && fb != "builtin") {
    return Status(500, "EQ_LLM_FALLBACK must be none or builtin, got '" + fb + "'");
  }
  llm->fallback_builtin = fb == "builtin";
  return Status::ok();
}

}  // namespace

Status Config::requireInternalKey() const {
  if (!internal_key.empty()) return Status::ok();
  return Status(500,
                "EQ_INTERNAL_KEY is not set: eq-api, eq-worker and eq-dispatcher sign the "
                "messages they exchange with it; give all of them the same random key "
                "(e.g. `openssl rand -hex 32`, docs/operations.md)");
}

Status parseRetrySchedule(std::string_view text, std::vector<int64_t>* steps_ms) {
  constexpr int64_t kMaxStepMs = 7 * 86'400'000LL;
  constexpr size_t kMaxSteps = 100;
  std::vector<int64_t> out;
  size_t pos = 0;
  while (true) {
    size_t comma = text.find(',', pos);
    std::string_view item =
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    // Digits, then optionally a point and 1 to 3 digits, read by hand:
    // strtod would also take signs, exponents, "inf" and "nan".
    int64_t whole = 0, frac_ms = 0;
    size_t i = 0, int_digits = 0, frac_digits = 0;
    for (; i < item.size() && item[i] >= '0' && item[i] <= '9'; ++i, ++int_digits) {
      whole = std::min(whole * 10 + (item[i] - '0'), kMaxStepMs);  // saturates: no overflow
    }
    bool ok = int_digits > 0;
    if (ok && i < item.size() && item[i] == '.') {
      for (++i; i < item.size() && item[i] >= '0' && item[i] <= '9'; ++i, ++frac_digits) {
        if (frac_digits < 3) frac_ms = frac_ms * 10 + (item[i] - '0');
      }
      ok = frac_digits >= 1 && frac_digits <= 3;  // refuses "1." and "0.0001"
      for (size_t k = frac_digits; k < 3; ++k) frac_ms *= 10;
    }
    int64_t ms = whole * 1000 + frac_ms;
    if (!ok || i != item.size() || ms <= 0 || ms > kMaxStepMs) {
      return Status(500,
                    "EQ_WEBHOOK_RETRY_SCHEDULE must be comma-separated seconds, each "
                    "more than 0 and at most 604800 with up to 3 decimals (e.g. "
                    "\"5,30,120\"), got '" +
                        std::string(text) + "'");
    }
    out.push_back(ms);
    if (out.size() > kMaxSteps) {
      return Status(500, "EQ_WEBHOOK_RETRY_SCHEDULE has more than 100 steps");
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  *steps_ms = std::move(out);
  return Status::ok();
}

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
  c.internal_key = envOr("EQ_INTERNAL_KEY", "");
  if (!c.internal_key.empty() && c.internal_key.size() < msg::kInternalKeyMinChars) {
    return Status(500, "EQ_INTERNAL_KEY must be at least " +
                           std::to_string(msg::kInternalKeyMinChars) +
                           " characters (e.g. `openssl rand -hex 32`)");
  }
  // EQ_DB_URL (docs/scaling.md, "Several hosts") wins over EQ_DB_PATH; its
  // form is checked here so that a typo stops every process at start
  // (store::DbUrl::parse reads it).
  c.db_url = envOr("EQ_DB_URL", "");
  if (c.db_url.empty()) {
    c.db_url = "sqlite:" + envOr("EQ_DB_PATH", defaults::kDbPath);
  } else if (!(c.db_url.starts_with("sqlite:") && c.db_url.size() > 7) &&
             !c.db_url.starts_with("postgresql://") && !c.db_url.starts_with("postgres://")) {
    return Status(500, "EQ_DB_URL must be sqlite:PATH or postgresql://USER:PASSWORD@HOST/DB");
  }
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
  std::string portal = envOr("EQ_PORTAL", "on");
  if (portal != "on" && portal != "off") {
    return Status(500, "EQ_PORTAL must be on or off, got '" + portal + "'");
  }
  c.portal = portal == "on";
  c.portal_signup = envOr("EQ_PORTAL_SIGNUP", "invite");
  if (c.portal_signup != "invite" && c.portal_signup != "open" && c.portal_signup != "off") {
    return Status(500,
                  "EQ_PORTAL_SIGNUP must be invite, open or off, got '" + c.portal_signup + "'");
  }
  std::string insecure = envOr("EQ_PORTAL_INSECURE_COOKIES", "0");
  if (insecure != "0" && insecure != "1") {
    return Status(500, "EQ_PORTAL_INSECURE_COOKIES must be 0 or 1");
  }
  c.portal_insecure_cookies = insecure == "1";
  c.portal_url = envOr("EQ_PORTAL_URL", "");
  if (!c.portal_url.empty()) {
    if (Status s = parsePortalUrl(c.portal_url, &c.portal_origin, &c.portal_host); !s.isOk()) {
      return s;
    }
  }
  if (Status s = intFromEnv("EQ_PORTAL_REGISTRATIONS_PER_ADDRESS_DAY", 1, 1'000'000,
                            &c.portal_registrations_per_address_day);
      !s.isOk()) {
    return s;
  }
  if (Status s = intFromEnv("EQ_PORTAL_REGISTRATIONS_PER_HOUR", 1, 1'000'000,
                            &c.portal_registrations_per_hour);
      !s.isOk()) {
    return s;
  }
  c.trusted_proxies = envOr("EQ_TRUSTED_PROXIES", "");
  if (Status s = intFromEnv("EQ_SYNC_DEADLINE_MS", 0, 3'600'000, &c.sync_deadline_ms); !s.isOk()) {
    return s;
  }
  for (auto [name, field] :
       {std::pair{"EQ_HTTP_HEADER_TIMEOUT_MS", &c.http_header_timeout_ms},
        std::pair{"EQ_HTTP_BODY_TIMEOUT_MS", &c.http_body_timeout_ms},
        std::pair{"EQ_HTTP_IDLE_TIMEOUT_MS", &c.http_idle_timeout_ms},
        std::pair{"EQ_HTTP_FIRST_BYTE_TIMEOUT_MS", &c.http_first_byte_timeout_ms}}) {
    if (Status s = intFromEnv(name, 100, 3'600'000, field); !s.isOk()) return s;
  }
  c.api_db_wait_ms = defaults::kApiDbDeadlineMs;
  if (Status s = intFromEnv("EQ_API_DB_WAIT_MS", 10, 600'000, &c.api_db_wait_ms); !s.isOk()) {
    return s;
  }
  if (Status s = intFromEnv("EQ_HTTP_MAX_CONNECTIONS", 1, 1'000'000, &c.http_max_connections);
      !s.isOk()) {
    return s;
  }
  if (Status s = intFromEnv("EQ_HTTP_MAX_CONNECTIONS_PER_CLIENT", 0, 1'000'000,
                            &c.http_max_connections_per_client);
      !s.isOk()) {
    return s;
  }
  if (Status s =
          parseRetrySchedule(envOr("EQ_WEBHOOK_RETRY_SCHEDULE", defaults::kWebhookRetrySchedule),
                             &c.webhook_retry_schedule_ms);
      !s.isOk()) {
    return s;
  }
  c.webhook_timeout_ms = defaults::kWebhookTimeoutMs;
  c.webhook_max_in_flight = defaults::kWebhookMaxInFlight;
  c.retention_days = defaults::kRetentionDays;
  if (Status s = intFromEnv("EQ_WEBHOOK_TIMEOUT_MS", 100, 600'000, &c.webhook_timeout_ms);
      !s.isOk()) {
    return s;
  }
  if (Status s = intFromEnv("EQ_WEBHOOK_MAX_IN_FLIGHT", 1, 1024, &c.webhook_max_in_flight);
      !s.isOk()) {
    return s;
  }
  // A share above the total would be no share at all; a share equal to it
  // is allowed (one account may then take every slot, as before the share
  // existed) for a deployment that serves a single account.
  c.webhook_max_in_flight_per_account =
      std::max<int64_t>(1, c.webhook_max_in_flight / defaults::kWebhookAccountShareDivisor);
  if (Status s = intFromEnv("EQ_WEBHOOK_MAX_IN_FLIGHT_PER_ACCOUNT", 1, c.webhook_max_in_flight,
                            &c.webhook_max_in_flight_per_account);
      !s.isOk()) {
    return Status(500, s.msg() + " (at most EQ_WEBHOOK_MAX_IN_FLIGHT)");
  }
  if (Status s = intFromEnv("EQ_RETENTION_DAYS", 1, 3650, &c.retention_days); !s.isOk()) {
    return s;
  }
  if (Status s = intFromEnv("EQ_WORKER_CONCURRENCY", 0, 1024, &c.worker_concurrency); !s.isOk()) {
    return s;
  }
  if (Status s = intFromEnv("EQ_WORKER_PREFETCH", 0, 65'535, &c.worker_prefetch); !s.isOk()) {
    return s;
  }
  if (Status s = intFromEnv("EQ_WORKER_STOP_GRACE_MS", 0, 600'000, &c.worker_stop_grace_ms);
      !s.isOk()) {
    return s;
  }
  if (Status s = llmFromEnv(c.engine == "llm", &c.llm); !s.isOk()) return s;
  if (envOr("EQ_METRICS_PORT", "") == "off") {
    c.metrics_port = Config::kMetricsOff;
  } else {
    int64_t metrics_port = Config::kMetricsPortUnset;
    if (Status s = intFromEnv("EQ_METRICS_PORT", 0, 65535, &metrics_port); !s.isOk()) {
      return Status(500, s.msg() + " (or 'off')");
    }
    c.metrics_port = static_cast<int>(metrics_port);
  }
  c.metrics_host = envOr("EQ_METRICS_HOST", defaults::kMetricsHost);
  return c;
}

Status parsePortalUrl(const std::string& url, std::string* origin, std::string* host) {
  auto bad = [&](const std::string& why) {
    return Status(500,
                  "EQ_PORTAL_URL must be an http:// or https:// URL such as "
                  "https://eq.example.com (" +
                      why + "), got '" + url + "'");
  };
  const std::string lower = lowerAscii(url);
  std::string scheme;
  if (lower.rfind("http://", 0) == 0)
    scheme = "http";
  else if (lower.rfind("https://", 0) == 0)
    scheme = "https";
  else
    return bad("no http:// or https://");
  std::string authority = lower.substr(scheme.size() + 3);
  authority = authority.substr(0, authority.find_first_of("/?#"));
  if (authority.empty()) return bad("no host");
  if (authority.find('@') != std::string::npos) return bad("user info is not allowed");
  for (char ch : authority) {
    if (static_cast<unsigned char>(ch) <= 0x20 || ch == '\\') {
      return bad("a space, a control or a backslash in the host");
    }
  }
  // Browsers leave a scheme's default port out of Origin and Host.
  std::string default_port = scheme == "http" ? ":80" : ":443";
  if (authority.size() > default_port.size() &&
      authority.compare(authority.size() - default_port.size(), default_port.size(),
                        default_port) == 0) {
    authority.resize(authority.size() - default_port.size());
  }
  *origin = scheme + "://" + authority;
  *host = authority;
  return Status::ok();
}

}  // namespace eq
