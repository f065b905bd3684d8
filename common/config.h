// Process configuration read from the environment (EQ_* variables, listed in
// the README's configuration table). Built once in main() and then passed by
// const reference to whatever needs it; never mutated after start-up.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/defaults.h"
#include "common/status.h"

namespace eq {

// The OpenAI-compatible backend of EQ_ENGINE=llm (docs/engine.md). Per-mode
// model and timeout overrides are indexed fast, standard, perfect; an empty
// model or a zero timeout there means "the general one".
struct LlmConfig {
  std::string base_url;                          // EQ_LLM_BASE_URL, e.g. http://127.0.0.1:8080/v1
  std::string api_key;                           // EQ_LLM_API_KEY, sent as a bearer token when set
  std::string model;                             // EQ_LLM_MODEL
  std::string mode_model[3];                     // EQ_LLM_MODEL_FAST|_STANDARD|_PERFECT
  int64_t timeout_ms = defaults::kLlmTimeoutMs;  // EQ_LLM_TIMEOUT_MS, per call
  int64_t mode_timeout_ms[3] = {0, 0, 0};        // EQ_LLM_TIMEOUT_MS_FAST|_STANDARD|_PERFECT
  int64_t max_retries = defaults::kLlmMaxRetries;  // EQ_LLM_MAX_RETRIES, on 429/5xx/connect errors
  double temperature = defaults::kLlmTemperature;  // EQ_LLM_TEMPERATURE
  int64_t max_tokens = defaults::kLlmMaxTokens;    // EQ_LLM_MAX_TOKENS, per call
  std::string response_format = "json_schema";  // EQ_LLM_RESPONSE_FORMAT: json_schema|json_object
  bool fallback_builtin = false;                // EQ_LLM_FALLBACK=builtin: analysis falls back
};

struct Config {
  std::string env = "production";  // EQ_ENV: production | staging
  int http_port = 0;               // EQ_HTTP_PORT (eq-api); 0 picks a free port
  std::string http_host = "0.0.0.0";
  std::string amqp_url;  // EQ_AMQP_URL
  // EQ_INTERNAL_KEY: the key eq-api, eq-worker and eq-dispatcher sign and
  // check their messages with (common/msg_auth.h). fromEnv() refuses a
  // short one; the three processes refuse to start without one
  // (requireInternalKey), tools such as eqctl do not need it.
  std::string internal_key;
  // The store (store/db.h, DbUrl): EQ_DB_URL, `sqlite:PATH` or
  // `postgresql://...`; without it `sqlite:` + EQ_DB_PATH.
  std::string db_url;
  std::string engine = "builtin";                 // EQ_ENGINE: builtin | llm
  std::string log_level = "info";                 // EQ_LOG_LEVEL: debug | info | warn | error
  std::string webhook_allow_cidrs;                // EQ_WEBHOOK_ALLOW_CIDRS
  int64_t sync_deadline_ms = 0;                   // EQ_SYNC_DEADLINE_MS: 0 = per-mode default
  int64_t http_max_connections = 10'000;          // EQ_HTTP_MAX_CONNECTIONS
  int64_t http_max_connections_per_client = 256;  // EQ_HTTP_MAX_CONNECTIONS_PER_CLIENT (0: none)
  int64_t http_first_byte_timeout_ms = 5'000;     // EQ_HTTP_FIRST_BYTE_TIMEOUT_MS
  int64_t http_header_timeout_ms = 10'000;        // EQ_HTTP_HEADER_TIMEOUT_MS
  int64_t http_body_timeout_ms = 30'000;          // EQ_HTTP_BODY_TIMEOUT_MS
  int64_t http_idle_timeout_ms = 60'000;          // EQ_HTTP_IDLE_TIMEOUT_MS
  // EQ_API_DB_WAIT_MS: how long a request waits for its database step (the
  // write lock) before 503; defaults::kApiDbDeadlineMs.
  int64_t api_db_wait_ms = 500;
  // eq-dispatcher (docs/contract.md §5, §6); defaults in common/defaults.h.
  std::vector<int64_t> webhook_retry_schedule_ms;  // EQ_WEBHOOK_RETRY_SCHEDULE
  int64_t webhook_timeout_ms = 10'000;             // EQ_WEBHOOK_TIMEOUT_MS
  int64_t webhook_max_in_flight = 64;              // EQ_WEBHOOK_MAX_IN_FLIGHT
  // EQ_WEBHOOK_MAX_IN_FLIGHT_PER_ACCOUNT: of those, one account's at most;
  // unset, a quarter of EQ_WEBHOOK_MAX_IN_FLIGHT (at least 1).
  int64_t webhook_max_in_flight_per_account = 16;
  int64_t retention_days = 7;  // EQ_RETENTION_DAYS
  // eq-worker and eq-dispatcher: where /metrics and /healthz listen.
  // EQ_METRICS_PORT: a port, 0 for a free one (logged), "off" for none;
  // unset leaves kMetricsPortUnset and the process uses its own default
  // (metricsPort()).
  static constexpr int kMetricsPortUnset = -1;
  static constexpr int kMetricsOff = -2;
  int metrics_port = kMetricsPortUnset;  // EQ_METRICS_PORT
  std::string metrics_host = "0.0.0.0";  // EQ_METRICS_HOST
  // The port to listen on, or kMetricsOff.
  int metricsPort(int process_default) const {
    return metrics_port == kMetricsPortUnset ? process_default : metrics_port;
  }

  // eq-worker. Jobs run at once per process (and the broker prefetch): 0
  // means the engine's default, 1 for builtin and defaults::kLlmConcurrency
  // for llm, whose jobs mostly wait on the model server.
  int64_t worker_concurrency = 0;                               // EQ_WORKER_CONCURRENCY
  int64_t worker_prefetch = 0;                                  // EQ_WORKER_PREFETCH; 0: by engine
  int64_t worker_stop_grace_ms = defaults::kWorkerStopGraceMs;  // EQ_WORKER_STOP_GRACE_MS
  LlmConfig llm;  // EQ_LLM_*, used when engine == "llm"

  // The developer center (docs/contract.md §9), served by eq-api.
  bool portal = true;                    // EQ_PORTAL: on | off
  std::string portal_signup = "invite";  // EQ_PORTAL_SIGNUP: invite | open | off
  bool portal_insecure_cookies =
      false;  // EQ_PORTAL_INSECURE_COOKIES=1: no Secure flag (local http)
  // EQ_PORTAL_URL: where people open it. When set, eq-api takes a
  // state-changing request of the developer center only from a page of this
  // origin, sent to this host (see api/portal.cc, sameOrigin); eqctl prints
  // its links with it. Parsed into the origin ("https://eq.example.com",
  // default port left out, as browsers send it) and the Host header it
  // implies ("eq.example.com").
  std::string portal_url;
  std::string portal_origin;
  std::string portal_host;
  // Open registration's limits (issue 25): per client address in a day, and
  // over every address in an hour. Every registration counts, a successful
  // one too.
  int64_t portal_registrations_per_address_day = defaults::kRegistrationsPerAddressDay;
  int64_t portal_registrations_per_hour = defaults::kRegistrationsPerHour;
  // EQ_TRUSTED_PROXIES: the address ranges of the reverse proxies in front
  // of eq-api, whose X-Forwarded-For / Forwarded eq-api believes (see
  // api/client_address.h); empty: none, the TCP peer is the client. Parsed
  // by eq-api's main() (net::CidrSet), which refuses a malformed list.
  std::string trusted_proxies;

  // Key prefix of this environment: eq_live_ in production, eq_test_ in staging.
  std::string keyPrefix() const { return env == "staging" ? "eq_test_" : "eq_live_"; }

  // Reads the environment; a malformed value is an error naming the variable.
  static Result<Config> fromEnv();

  // An error naming EQ_INTERNAL_KEY when it is unset. Required in every
  // environment, staging too: without it a process could only accept
  // unsigned messages, which is exactly what the key exists to refuse.
  Status requireInternalKey() const;
};

// Parses EQ_PORTAL_URL ("http[s]://host[:port][/...]") into its origin and
// the Host header a browser sends to it; an error names what is wrong.
Status parsePortalUrl(const std::string& url, std::string* origin, std::string* host);

// Parses EQ_WEBHOOK_RETRY_SCHEDULE: comma-separated delays in seconds, the
// n-th being the wait after the n-th failed attempt, so N steps make N + 1
// attempts ("1,1,1": 4 attempts). Decimals with up to 3 places are allowed
// ("0.2,0.2") so tests can compress the schedule below a second; each step
// is in (0, 7 days], at most 100 steps, spaces around commas ignored.
Status parseRetrySchedule(std::string_view text, std::vector<int64_t>* steps_ms);

}  // namespace eq
