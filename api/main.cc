// eq-api: reads the configuration, opens the database, connects the broker
// bridge, serves HTTP until SIGTERM/SIGINT, then drains and exits.
#include <unistd.h>
#include <uv.h>

#include <csignal>
#include <cstdio>
#include <memory>

#include "api/broker_bridge.h"
#include "api/db_thread.h"
#include "api/handlers.h"
#include "common/allocator.h"
#include "common/config.h"
#include "common/defaults.h"
#include "common/file_modes.h"
#include "common/http_server.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/timefmt.h"
#include "common/usage.h"
#include "store/store.h"

namespace {

constexpr char kUsage[] =
    "usage: eq-api [-h | --help]\n"
    "\n"
    "EQ Reply's HTTP API and developer center: validates and authenticates\n"
    "requests, charges quota, publishes jobs to RabbitMQ and answers sync calls\n"
    "with a worker's result; async tasks are answered once the broker has them.\n"
    "Runs until SIGTERM or SIGINT, then finishes in-flight requests and exits.\n"
    "\n"
    "It takes no other arguments. Its configuration is the environment\n"
    "(EQ_HTTP_HOST, EQ_HTTP_PORT, EQ_DB_PATH, EQ_AMQP_URL, EQ_INTERNAL_KEY,\n"
    "EQ_PORTAL_URL, ...): the table under \"Configuration\" in README.md lists\n"
    "every variable and its default. A bad configuration exits 2.\n"
    "\n"
    "  -h, --help   print this and exit\n";

struct Process {
  uv_loop_t* loop;
  eq::api::ApiService* service;
  eq::api::HttpServer* server;
  eq::api::BrokerBridge* broker;
  eq::api::DbThread* db;
  uv_signal_t sigterm;
  uv_signal_t sigint;
  bool stopping = false;
};

// Runs once per loop iteration, before the loop waits for I/O: what the
// iteration's requests left to write goes out together, the closes of their
// open charges as one database step and their access-log lines in one write
// (log::holdLines()).
void endIteration(uv_prepare_t* handle) {
  auto* p = static_cast<Process*>(handle->data);
  p->service->closeAnsweredCharges();
  p->db->handIn();
  eq::log::flushHeld();
}

// First signal: stop accepting, let in-flight requests finish (sync calls up
// to their deadline), then ask the broker and database threads to stop; each
// closes its loop handle once it has handed over its last results, the loop
// ends, and main() joins the threads after uv_run returned (nothing joins a
// thread inside a loop callback). A second signal exits at once.
void onSignal(uv_signal_t* handle, int signum) {
  auto* p = static_cast<Process*>(handle->data);
  if (p->stopping) {
    eq::log::warn("second signal: exiting now", {{"signal", static_cast<long long>(signum)}});
    std::_Exit(1);
  }
  p->stopping = true;
  eq::log::info("shutting down",
                {{"signal", static_cast<long long>(signum)},
                 {"open_connections", static_cast<long long>(p->server->connectionCount())}});
  p->server->shutdown([p] {
    p->service->closeAnsweredCharges();  // before the database thread stops
    p->broker->stop();
    p->db->stop();
    uv_close(reinterpret_cast<uv_handle_t*>(&p->sigterm), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&p->sigint), nullptr);
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (eq::cli::wantsHelp(argc, argv)) return eq::cli::usage(kUsage);
  if (argc > 1) return eq::cli::usage(kUsage, std::string("unknown argument: ") + argv[1]);
  eq::restrictNewFiles();  // before any file is created: common/file_modes.h
  eq::log::setComponent("api");
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

  eq::Result<eq::net::CidrSet> webhook_allow = eq::net::CidrSet::parse(config.webhook_allow_cidrs);
  if (!webhook_allow.isOk()) {
    eq::log::error("bad EQ_WEBHOOK_ALLOW_CIDRS", {{"error", webhook_allow.status().msg()}});
    return 2;
  }

  // A typo here would silently leave the per-address limits on the proxy's
  // address (one limit for everybody), so it stops the process instead.
  eq::Result<eq::net::CidrSet> trusted_proxies = eq::net::CidrSet::parse(config.trusted_proxies);
  if (!trusted_proxies.isOk()) {
    eq::log::error("bad configuration",
                   {{"error", "EQ_TRUSTED_PROXIES: " + trusted_proxies.status().msg() +
                                  "; give the proxies' address ranges, comma-separated, e.g. "
                                  "10.0.0.0/8,fd00::/8 (README, \"Behind a reverse proxy\")"}});
    return 2;
  }

  eq::Result<std::unique_ptr<eq::Store>> store = eq::Store::openUrl(config.db_url);
  if (!store.isOk()) {
    eq::log::error("cannot open database", {{"error", store.status().msg()}});
    return eq::Store::exitStatusFor(store.status());
  }
  // A row lock another host's batch holds (PostgreSQL) is waited for as
  // long as a request waits for its database step, no longer.
  store.value()->setLockTimeout(static_cast<int>(config.api_db_wait_ms));

  // This run's identity for crash-safe accounting: registered before any
  // charge can be written under it, so a sweeper never takes a live
  // process's charges for orphans (Store::settleOrphanedCharges).
  std::string instance_id = eq::ids::newInstanceId();
  if (eq::Status s = store.value()->registerInstance(instance_id, ::getpid(), eq::nowMs());
      !s.isOk()) {
    eq::log::error("cannot register this eq-api instance", {{"error", s.msg()}});
    return 1;
  }

  std::signal(SIGPIPE, SIG_IGN);  // a client hanging up is an error value, not a signal
  uv_loop_t* loop = uv_default_loop();
  eq::api::BrokerBridge broker(loop, config.amqp_url, "eq-api", config.internal_key);
  eq::SystemClock clock;
  eq::api::DbThread db(loop, std::move(store.value()), &clock, instance_id);
  eq::api::ApiService service({&config, &db, &broker, &clock, &webhook_allow.value(), instance_id,
                               loop, &trusted_proxies.value()});
  eq::api::HttpLimits limits;
  limits.max_connections = static_cast<std::size_t>(config.http_max_connections);
  limits.max_connections_per_client =
      static_cast<std::size_t>(config.http_max_connections_per_client);
  limits.first_byte_timeout_ms = static_cast<uint64_t>(config.http_first_byte_timeout_ms);
  limits.header_timeout_ms = static_cast<uint64_t>(config.http_header_timeout_ms);
  limits.body_timeout_ms = static_cast<uint64_t>(config.http_body_timeout_ms);
  limits.idle_timeout_ms = static_cast<uint64_t>(config.http_idle_timeout_ms);
  eq::api::HttpServer server(
      loop,
      [&service](eq::api::HttpRequest&& req, eq::api::Responder res) {
        service.handle(std::move(req), res);
      },
      limits);

  // SO_REUSEPORT: several eq-api processes may share the port
  // (scripts/run, EQ_API_PROCESSES); each has its own loop and database
  // thread, and the database keeps quota, rate limits and Idempotency-Keys
  // exact across them.
  if (int rc = server.listen(config.http_host, config.http_port, true); rc != 0) {
    eq::log::error("cannot listen", {{"port", static_cast<long long>(config.http_port)},
                                     {"error", uv_strerror(rc)}});
    return 1;
  }
  broker.start();
  db.start();

  Process p{loop, &service, &server, &broker, &db, {}, {}};
  uv_signal_init(loop, &p.sigterm);
  uv_signal_init(loop, &p.sigint);
  p.sigterm.data = p.sigint.data = &p;
  uv_signal_start(&p.sigterm, onSignal, SIGTERM);
  uv_signal_start(&p.sigint, onSignal, SIGINT);
  uv_prepare_t iteration_end;
  uv_prepare_init(loop, &iteration_end);
  iteration_end.data = &p;
  uv_prepare_start(&iteration_end, endIteration);
  // Never what keeps the loop alive: it ends once the threads' handles close.
  uv_unref(reinterpret_cast<uv_handle_t*>(&iteration_end));

  // The port line is how scripts and tests learn a port picked with 0.
  eq::log::info("listening",
                {{"port", static_cast<long long>(server.port())}, {"env", config.env}});
  eq::log::holdLines();
  uv_run(loop, UV_RUN_DEFAULT);
  eq::log::flushHeld();
  broker.join();
  db.join();
  eq::log::info("stopped");
  return 0;
}
