// eq-worker --mode fast|standard|perfect [--analyze] | --analyze-only | --help
// Consumes one mode's queue (and the analyze queue with --analyze) until
// SIGTERM/SIGINT, then finishes the jobs in hand (up to
// EQ_WORKER_STOP_GRACE_MS) and exits.
#include <curl/curl.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/allocator.h"
#include "common/config.h"
#include "common/defaults.h"
#include "common/file_modes.h"
#include "common/log.h"
#include "common/metrics_server.h"
#include "common/usage.h"
#include "workers/engine/factory.h"
#include "workers/worker.h"

namespace {

std::atomic<bool> g_stop{false};  // written by the signal handler only

void onSignal(int) { g_stop.store(true); }

constexpr char kUsage[] =
    "usage: eq-worker --mode fast|standard|perfect [--analyze]\n"
    "       eq-worker --analyze-only\n"
    "       eq-worker -h | --help\n"
    "\n"
    "EQ Reply's worker: consumes one mode's jobs from RabbitMQ (its classic\n"
    "queue for sync calls, its quorum queue for async tasks), runs the engine,\n"
    "publishes each result or task event and acks the job once the broker has\n"
    "confirmed it. Never opens the database. Serves GET /metrics and /healthz on\n"
    "EQ_METRICS_PORT (default 9101). On SIGTERM or SIGINT, returns the jobs it\n"
    "has not started and gives running ones EQ_WORKER_STOP_GRACE_MS to finish.\n"
    "\n"
    "  --mode M         consume mode M's queues: fast, standard or perfect\n"
    "  --analyze        also consume the analyze queues (POST /api/v1/analyze)\n"
    "  --analyze-only   consume only the analyze queues (no --mode)\n"
    "  -h, --help       print this and exit\n"
    "\n"
    "The engine is EQ_ENGINE: builtin (the default; no language model, replies\n"
    "written for the situation a message is in) or llm (an OpenAI-compatible\n"
    "server, EQ_LLM_BASE_URL and EQ_LLM_MODEL; docs/engine.md). The rest of its\n"
    "configuration is the environment too (EQ_AMQP_URL, EQ_INTERNAL_KEY,\n"
    "EQ_WORKER_CONCURRENCY, EQ_WORKER_PREFETCH, ...): the table under\n"
    "\"Configuration\" in README.md lists every variable and its default.\n"
    "A bad configuration or usage exits 2.\n";

}  // namespace

int main(int argc, char** argv) {
  if (eq::cli::wantsHelp(argc, argv)) return eq::cli::usage(kUsage);
  eq::restrictNewFiles();  // before any file is created: common/file_modes.h
  eq::log::setComponent("worker");
  eq::tuneAllocator();
  eq::worker::WorkerOptions opts;
  bool analyze_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mode" && i + 1 < argc) opts.mode = argv[++i];
    else if (a == "--analyze") opts.analyze = true;
    else if (a == "--analyze-only") analyze_only = opts.analyze = true;
    else return eq::cli::usage(kUsage, "unknown argument: " + a);
  }
  if (analyze_only && !opts.mode.empty()) {
    return eq::cli::usage(kUsage, "--analyze-only takes no --mode");
  }
  if (!analyze_only && opts.mode != "fast" && opts.mode != "standard" && opts.mode != "perfect") {
    return eq::cli::usage(kUsage, "--mode fast, standard or perfect is required");
  }

  eq::Result<eq::Config> cfg = eq::Config::fromEnv();
  if (!cfg.isOk()) {
    eq::log::error("bad configuration", {{"error", cfg.status().msg()}});
    return 2;
  }
  eq::log::setLevel(cfg.value().log_level);
  if (eq::Status s = cfg.value().requireInternalKey(); !s.isOk()) {
    eq::log::error("bad configuration", {{"error", s.msg()}});
    return 2;
  }
  opts.amqp_url = cfg.value().amqp_url;
  opts.internal_key = cfg.value().internal_key;
  opts.concurrency = static_cast<int>(cfg.value().worker_concurrency);
  if (opts.concurrency == 0) {
    opts.concurrency = cfg.value().engine == "llm" ? eq::defaults::kLlmConcurrency : 1;
  }
  opts.prefetch = static_cast<int>(cfg.value().worker_prefetch);
  if (opts.prefetch == 0) {
    opts.prefetch = cfg.value().engine == "llm"
                        ? std::min(65'535, opts.concurrency * eq::defaults::kWorkerPrefetchLlmFactor)
                        : std::max(eq::defaults::kWorkerPrefetchBuiltin, opts.concurrency);
  }
  opts.stop_grace_ms = cfg.value().worker_stop_grace_ms;
  opts.inline_jobs = cfg.value().engine == "builtin" && opts.concurrency == 1;

  // Before any thread exists: the llm engine's HTTP client uses libcurl.
  curl_global_init(CURL_GLOBAL_DEFAULT);
  auto engine = eq::engine::makeEngine(cfg.value());
  if (!engine.isOk()) {
    eq::log::error("cannot start engine", {{"error", engine.status().msg()}});
    return 2;
  }

  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = onSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  // /metrics and /healthz on a port of their own (workers/metrics.h).
  eq::metrics::Registry registry;
  eq::worker::WorkerMetrics metrics(registry);
  metrics.expect(opts.mode, opts.analyze);
  opts.metrics = &metrics;
  std::unique_ptr<eq::metrics::MetricsServer> metrics_server;
  int metrics_port = cfg.value().metricsPort(eq::defaults::kWorkerMetricsPort);
  if (metrics_port != eq::Config::kMetricsOff) {
    eq::metrics::ServerOptions mo;
    mo.host = cfg.value().metrics_host;
    mo.port = metrics_port;
    mo.health = [&metrics] {
      return std::vector<eq::metrics::HealthCheck>{{"broker", metrics.brokerUp()}};
    };
    auto started = eq::metrics::serveMetrics(registry, std::move(mo));
    if (!started.isOk()) return 1;  // logged with the way out
    metrics_server = std::move(started).value();
  }

  eq::worker::Worker worker(*engine.value(), opts, g_stop);
  int rc = worker.run();
  if (worker.jobsInHand() > 0) {
    // The grace period is over: destroying the worker would join job
    // threads still inside model calls. Their connection is closed, so the
    // broker redelivers them; exit without waiting.
    std::_Exit(rc);
  }
  return rc;
}
