// eq-dispatcher: records task transitions and delivers signed webhooks until
// SIGTERM/SIGINT; the event in hand is finished before exit.
#include <curl/curl.h>

#include <csignal>
#include <cstring>

#include "common/config.h"
#include "common/defaults.h"
#include "common/log.h"
#include "common/store.h"
#include "dispatcher/dispatcher.h"
#include "dispatcher/webhook.h"

namespace {

std::atomic<bool> g_stop{false};  // written by the signal handler only

void onSignal(int) { g_stop.store(true); }

}  // namespace

int main() {
  eq::log::setComponent("dispatcher");
  eq::Result<eq::Config> cfg = eq::Config::fromEnv();
  if (!cfg.isOk()) {
    eq::log::error("bad configuration", {{"error", cfg.status().msg()}});
    return 2;
  }
  const eq::Config& config = cfg.value();
  eq::log::setLevel(config.log_level);
  auto allowed = eq::net::CidrSet::parse(config.webhook_allow_cidrs);
  if (!allowed.isOk()) {
    eq::log::error("bad EQ_WEBHOOK_ALLOW_CIDRS", {{"error", allowed.status().msg()}});
    return 2;
  }
  auto store = eq::Store::open(config.db_path);
  if (!store.isOk()) {
    eq::log::error("cannot open database", {{"error", store.status().msg()}});
    return 1;
  }

  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = onSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  curl_global_init(CURL_GLOBAL_DEFAULT);
  int rc;
  {
    eq::dispatch::CurlWebhookSender sender(std::move(allowed).value(),
                                           eq::defaults::kWebhookTimeoutMs);
    eq::dispatch::Dispatcher dispatcher(*store.value(), sender, config.amqp_url, g_stop);
    rc = dispatcher.run();
  }
  curl_global_cleanup();
  return rc;
}
