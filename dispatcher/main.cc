// eq-dispatcher: records task transitions (consumer, main thread) and
// delivers signed webhooks with retries (sender thread) until SIGTERM/SIGINT;
// see dispatcher/sender.h for why two threads. The event in hand is finished
// before exit; webhook attempts in flight get a short grace.
#include <curl/curl.h>

#include <csignal>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/allocator.h"
#include "common/config.h"
#include "common/defaults.h"
#include "common/file_modes.h"
#include "common/log.h"
#include "common/metrics_server.h"
#include "common/usage.h"
#include "dispatcher/dispatcher.h"
#include "dispatcher/metrics.h"
#include "dispatcher/sender.h"
#include "store/store.h"

namespace {

constexpr char kUsage[] =
    "usage: eq-dispatcher [-h | --help]\n"
    "\n"
    "EQ Reply's event consumer and webhook sender: records the task events the\n"
    "workers publish (running, succeeded, failed; a failure refunds its unit),\n"
    "settles the charges of an eq-api that died, and delivers signed webhooks\n"
    "with retries kept in the database. Serves GET /metrics and /healthz on\n"
    "EQ_METRICS_PORT (default 9102). Runs until SIGTERM or SIGINT.\n"
    "\n"
    "It takes no other arguments. Its configuration is the environment\n"
    "(EQ_DB_PATH, EQ_AMQP_URL, EQ_INTERNAL_KEY, EQ_WEBHOOK_ALLOW_CIDRS,\n"
    "EQ_WEBHOOK_RETRY_SCHEDULE, ...): the table under \"Configuration\" in\n"
    "README.md lists every variable and its default. A bad configuration\n"
    "exits 2.\n"
    "\n"
    "  -h, --help   print this and exit\n";

std::atomic<bool> g_stop{false};  // written by the signal handler only

void onSignal(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
  if (eq::cli::wantsHelp(argc, argv)) return eq::cli::usage(kUsage);
  if (argc > 1) return eq::cli::usage(kUsage, std::string("unknown argument: ") + argv[1]);
  eq::restrictNewFiles();  // before any file is created: common/file_modes.h
  eq::log::setComponent("dispatcher");
  eq::tuneAllocator();
  eq::Result<eq::Config> cfg = eq::Config::fromEnv();
  if (!cfg.isOk()) {
    eq::log::error("bad configuration", {{"error", cfg.status().msg()}});
    return 2;
  }
  const eq::Config& config = cfg.value();
  eq::log::setLevel(config.log_level);
  if (eq::Status s = config.requireInternalKey(); !s.isOk()) {
    eq::log::error("bad configuration", {{"error", s.msg()}});
    return 2;
  }
  auto allowed = eq::net::CidrSet::parse(config.webhook_allow_cidrs);
  if (!allowed.isOk()) {
    eq::log::error("bad EQ_WEBHOOK_ALLOW_CIDRS", {{"error", allowed.status().msg()}});
    return 2;
  }
  // One connection per thread: a Store is not thread-safe.
  auto consumer_store = eq::Store::openUrl(config.db_url);
  if (!consumer_store.isOk()) {
    eq::log::error("cannot open database", {{"error", consumer_store.status().msg()}});
    return eq::Store::exitStatusFor(consumer_store.status());
  }
  auto sender_store = eq::Store::openUrl(config.db_url);
  if (!sender_store.isOk()) {
    eq::log::error("cannot open database", {{"error", sender_store.status().msg()}});
    return eq::Store::exitStatusFor(sender_store.status());
  }
  // Checkpoints run on the sender's loop, outside the write gate
  // (DeliverySender::run), not inside a commit that holds it.
  for (eq::Store* s : {consumer_store.value().get(), sender_store.value().get()}) {
    if (eq::Status st = s->disableAutoCheckpoint(); !st.isOk()) {
      eq::log::error("cannot configure checkpoints", {{"error", st.msg()}});
      return 1;
    }
  }

  // /metrics and /healthz on a port of their own (dispatcher/metrics.h). The
  // metrics thread gets a third Store connection for the pending count.
  eq::metrics::Registry registry;
  eq::dispatch::DispatcherMetrics metrics(registry);
  std::unique_ptr<eq::Store> metrics_store;
  std::unique_ptr<eq::metrics::MetricsServer> metrics_server;
  int metrics_port = config.metricsPort(eq::defaults::kDispatcherMetricsPort);
  if (metrics_port != eq::Config::kMetricsOff) {
    // A short busy timeout: a scrape should not wait long behind a writer.
    auto opened = eq::Store::openUrl(config.db_url, eq::defaults::kApiDbBusyTimeoutMs);
    if (!opened.isOk()) {
      eq::log::error("cannot open database", {{"error", opened.status().msg()}});
      return eq::Store::exitStatusFor(opened.status());
    }
    metrics_store = std::move(opened).value();
    eq::metrics::ServerOptions mo;
    mo.host = config.metrics_host;
    mo.port = metrics_port;
    mo.tick_ms = eq::defaults::kMetricsRefreshMs;
    mo.on_tick = [&metrics, &metrics_store] { metrics.refreshPending(*metrics_store); };
    mo.health = [&metrics] {
      return std::vector<eq::metrics::HealthCheck>{{"broker", metrics.brokerUp()},
                                                   {"database", metrics.databaseUp()}};
    };
    auto started = eq::metrics::serveMetrics(registry, std::move(mo));
    if (!started.isOk()) return 1;  // logged with the way out
    metrics_server = std::move(started).value();
  }

  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = onSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  eq::dispatch::SenderOptions opts;
  opts.policy.steps_ms = config.webhook_retry_schedule_ms;
  opts.policy.jitter = eq::defaults::kWebhookJitter;
  opts.policy.max_retry_after_ms = eq::defaults::kWebhookMaxRetryAfterMs;
  opts.timeout_ms = config.webhook_timeout_ms;
  opts.max_in_flight = static_cast<int>(config.webhook_max_in_flight);
  opts.max_in_flight_per_account = static_cast<int>(config.webhook_max_in_flight_per_account);
  opts.scan_interval_ms = eq::defaults::kWebhookScanIntervalMs;
  opts.lease_margin_ms = eq::defaults::kWebhookLeaseMarginMs;
  opts.allowed = std::move(allowed).value();
  opts.retention.task_retention_ms = config.retention_days * 86'400'000LL;
  opts.retention.rate_counter_retention_ms = eq::defaults::kRateCounterRetentionMs;
  opts.retention.interval_ms = eq::defaults::kRetentionIntervalMs;
  opts.retention.batch = eq::defaults::kRetentionBatch;
  opts.metrics = &metrics;
  // SQLite's one writer at a time, taken in turn by the two threads
  // (dispatcher/db_writes.h). PostgreSQL locks rows, not the database:
  // there the threads write side by side, as dispatchers on two hosts do.
  std::mutex db_writes_mutex;
  std::mutex* db_writes =
      consumer_store.value()->engine() == eq::store::DbEngine::kSqlite ? &db_writes_mutex : nullptr;
  opts.db_writes = db_writes;

  curl_global_init(CURL_GLOBAL_DEFAULT);
  int rc;
  {
    // The half of settling that publishes (dispatcher/settler.h), on the
    // consumer thread with its Store, with the settler's timing.
    eq::dispatch::JobRepublisher republisher(*consumer_store.value(), config.amqp_url,
                                             config.internal_key, opts.settler, db_writes);
    eq::dispatch::DeliverySender sender(*sender_store.value(), std::move(opts), g_stop);
    std::thread sender_thread([&sender] { sender.run(); });
    eq::dispatch::Dispatcher dispatcher(
        *consumer_store.value(), config.amqp_url, config.internal_key, g_stop,
        [&sender] { sender.wakeup(); }, &metrics, db_writes, &republisher, &sender.slots());
    rc = dispatcher.run();
    sender_thread.join();
  }
  curl_global_cleanup();
  return rc;
}
