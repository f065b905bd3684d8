// Every tunable default in one place. Configuration (common/config.h) starts
// from these and lets the environment override them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace eq::defaults {

constexpr int kHttpPort = 8080;
constexpr const char* kAmqpUrl = "amqp://eq:eq@127.0.0.1:5672/";
constexpr const char* kDbPath = "var/eq.db";

// Requests (docs/contract.md §3).
constexpr std::size_t kMaxBodyBytes = 64 * 1024;
constexpr std::size_t kMaxMessageCodePoints = 2000;
constexpr std::size_t kMaxContextCodePoints = 4000;
constexpr std::size_t kMaxWebhookUrlChars = 2048;
constexpr int kMinReplyCount = 1;
constexpr int kMaxReplyCount = 5;
constexpr int kMaxJsonDepth = 32;

// Keys and quota (docs/contract.md §4).
constexpr int kDefaultRatePerMinute = 60;
constexpr int kDefaultQuotaUnits = 100;
constexpr int64_t kDefaultQuotaDays = 30;

// How long a sync call waits for its worker before answering 504. The
// interface says perfect mode "typically" takes 30-90 s with a model, so its
// deadline is the longest; the built-in engine answers in milliseconds.
constexpr int64_t kSyncDeadlineFastMs = 30'000;
constexpr int64_t kSyncDeadlineStandardMs = 120'000;
constexpr int64_t kSyncDeadlinePerfectMs = 180'000;
constexpr int64_t kAnalyzeDeadlineMs = 30'000;

// Webhooks (docs/contract.md §6). An attempt succeeds with a 2xx within the
// timeout; otherwise the next one follows after the schedule's step (seconds
// after the failed attempt, each with +-10% jitter), so 9 steps make 10
// attempts over about 16 h. EQ_WEBHOOK_RETRY_SCHEDULE and
// EQ_WEBHOOK_TIMEOUT_MS override them (tests compress both).
constexpr long kWebhookTimeoutMs = 10'000;
constexpr const char* kWebhookRetrySchedule = "5,30,120,600,1800,3600,7200,14400,28800";
constexpr double kWebhookJitter = 0.10;
// Retry-After on a 429 or 503 replaces the schedule's step, up to this.
constexpr int64_t kWebhookMaxRetryAfterMs = 3'600'000;
// Deliveries in flight at once (one libcurl easy handle each); more due ones
// wait in SQLite until a slot frees.
constexpr int kWebhookMaxInFlight = 64;
// Unless EQ_WEBHOOK_MAX_IN_FLIGHT_PER_ACCOUNT says otherwise, one account
// may hold a quarter of those slots (at least one): an account whose
// receivers hang then delays only its own webhooks, and four such accounts
// at once are needed to fill the sender.
constexpr int kWebhookAccountShareDivisor = 4;
// How often the sender looks for due deliveries in SQLite. New deliveries
// from this process wake it at once; this bounds the delay for retries,
// replays by eqctl and deliveries another process left behind.
constexpr int kWebhookScanIntervalMs = 200;
// A claimed delivery's next_attempt_at moves this far past the attempt's
// timeout: a dispatcher killed mid-attempt leaves the delivery due again
// that much later, and a second dispatcher never sends it meanwhile.
constexpr int64_t kWebhookLeaseMarginMs = 5'000;
// Response bodies are not needed; reading stops after this many bytes.
constexpr std::size_t kWebhookMaxResponseBytes = 64 * 1024;

// Retention (docs/contract.md §5): tasks with their deliveries and attempts are
// purged after EQ_RETENTION_DAYS; rate-limit windows after an hour. The
// dispatcher purges at start and then hourly, in batches of bounded size so
// that one purge never holds the write lock for long.
constexpr int64_t kRetentionDays = 7;
constexpr int64_t kRetentionIntervalMs = 3'600'000;
constexpr int64_t kRateCounterRetentionMs = 3'600'000;
constexpr int kRetentionBatch = 500;

// SQLite busy timeout of eq-dispatcher's metrics reads (eq-api no longer
// waits in SQLite's busy handler: see kApiDbDeadlineMs).
constexpr int kApiDbBusyTimeoutMs = 500;
// eq-api: how long a request waits for its database step (the write lock of
// its batch) before it is answered 503 with nothing written (docs/contract.md §2:
// a fast 503, never a hang); EQ_API_DB_WAIT_MS overrides it. The loop thread
// never waits: only the requests that need the database do
// (api/db_thread.h).
constexpr int64_t kApiDbDeadlineMs = 500;

// The developer center (issue 25). Open registration: at most this many
// per client address in 24 h (EQ_PORTAL_REGISTRATIONS_PER_ADDRESS_DAY) and
// over all addresses in an hour (EQ_PORTAL_REGISTRATIONS_PER_HOUR); each
// makes an account with 100 units per mode.
constexpr int64_t kRegistrationsPerAddressDay = 5;
constexpr int64_t kRegistrationsPerHour = 100;
// Playground calls one session may have in flight (a sync call holds a
// worker, or an LLM call, until it is answered); the next gets 429.
constexpr int kPlaygroundInFlightPerSession = 2;

// Broker.
constexpr int kAmqpHeartbeatSeconds = 30;
// Handshake and synchronous AMQP methods (declare, consume, qos) against a
// broker that accepted the TCP connection but does not answer.
constexpr int kAmqpRpcTimeoutMs = 10'000;
// Reconnect backoff of every process: 100 ms doubling, capped at 1 s. The cap
// bounds how long a process stays away after the broker is back (eq-api,
// the workers and the dispatcher all must reconnect before a sync call can
// succeed again; we promise recovery within 5 s). One attempt a second is a
// refused TCP connect against a stopped broker: no load worth saving.
constexpr int kReconnectBackoffInitialMs = 100;
constexpr int kReconnectBackoffMaxMs = 1000;

// eq-worker (docs/engine.md). A stopping worker finishes the jobs it has
// started for up to this long (an LLM call may take a minute); whatever is
// still running then goes back to the queue when the connection closes.
constexpr int64_t kWorkerStopGraceMs = 30'000;
// Jobs the broker may hand one worker unacked, per queue, when
// EQ_WORKER_PREFETCH is not set. A worker acks a job only once its outcome
// is confirmed, so the prefetch must cover every job in that pipeline:
// running, waiting for a slot, published and waiting for the confirm, acked
// and waiting for the broker to send the next one. The built-in engine
// finishes a job in ~25 us while a confirm takes a few ms of broker time
// (more under load), so 1 would leave it idle almost always; 128 covers
// ~5 ms of confirm latency at 25k jobs/s and the api's sync calls in flight
// (64 connections in bench/run), and a larger value only moves backlog from
// the broker, where other workers could take it, into one worker. The llm
// engine waits on the model instead: twice its concurrency keeps a new job
// ready for every call that ends.
constexpr int kWorkerPrefetchBuiltin = 128;
constexpr int kWorkerPrefetchLlmFactor = 2;

// The llm engine. Jobs in flight per worker process when
// EQ_WORKER_CONCURRENCY is not set: they mostly wait on the model server, so
// one process can keep a GPU server's batch full.
constexpr int kLlmConcurrency = 16;
constexpr int64_t kLlmTimeoutMs = 60'000;  // per chat-completions call
// Retries of one call after a 429, a 5xx or a failed connection (never after
// a timeout: a stalled server would only stall again), waiting Retry-After
// (capped) or an exponential backoff from kLlmRetryBackoffMs.
constexpr int kLlmMaxRetries = 2;
constexpr int64_t kLlmRetryBackoffMs = 500;
constexpr int64_t kLlmMaxRetryAfterMs = 10'000;
constexpr double kLlmTemperature = 0.7;
constexpr int kLlmMaxTokens = 1024;
// Answers larger than this are refused rather than buffered.
constexpr std::size_t kLlmMaxResponseBytes = 1024 * 1024;

// eq-mcp (tools/mcp/): the MCP server that wraps the HTTP API.
constexpr const char* kMcpApiUrl = "http://127.0.0.1:8080";
// One API call may take as long as eq-api's longest sync deadline (perfect,
// 180 s) plus a margin for the answer to travel, so the tool reports the
// API's own 504 rather than a timeout of its own.
constexpr int64_t kMcpRequestTimeoutMs = 200'000;
constexpr int64_t kMcpConnectTimeoutMs = 10'000;
// A JSON-RPC line longer than this is refused (the API takes 64 KiB bodies;
// escaping can at most sextuple them, and JSON-RPC framing adds little).
constexpr std::size_t kMcpMaxLineBytes = 1024 * 1024;
constexpr int kMcpMaxJsonDepth = 64;
// API answers are read up to this size; anything larger is not EQ Reply.
constexpr std::size_t kMcpMaxResponseBytes = 4 * 1024 * 1024;

// Metrics (issue 6): eq-worker and eq-dispatcher serve /metrics and /healthz
// on a port of their own (EQ_METRICS_PORT overrides; eq-api serves them on
// its HTTP port). Distinct defaults so one worker and the dispatcher can share
// a host; more workers on one host need EQ_METRICS_PORT each (scripts/run
// sets them). Containers each have their own address, so the defaults hold
// there however far a service is scaled.
constexpr int kWorkerMetricsPort = 9101;
constexpr int kDispatcherMetricsPort = 9102;
constexpr const char* kMetricsHost = "0.0.0.0";
// How often eq-dispatcher counts pending deliveries in SQLite (the retry
// queue depth gauge, and the database check of its /healthz): one cheap
// COUNT on an index, on the metrics thread.
constexpr int64_t kMetricsRefreshMs = 5'000;

}  // namespace eq::defaults
