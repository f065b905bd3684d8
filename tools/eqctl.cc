// eqctl: the operator's CLI (keys, quota, tasks, webhook deliveries, stats). Opens EQ_DB_URL (or
// EQ_DB_PATH), which must exist (only `migrate` makes one), and runs one command; see
// tools/eqctl_commands.h.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/defaults.h"
#include "common/file_modes.h"
#include "common/log.h"
#include "store/store.h"
#include "tools/eqctl_commands.h"
#include "tools/store_copy.h"

int main(int argc, char** argv) {
  eq::restrictNewFiles();  // before any file is created: common/file_modes.h
  eq::log::setComponent("eqctl");
  eq::log::setLevel("warn");
  std::vector<std::string> args(argv + 1, argv + argc);
  // migrate reads where the database is itself: opening the store below
  // would apply the migrations it is asked about.
  if (!args.empty() && args[0] == "migrate" && !eq::tools::isHelpRequest(args)) {
    const char* url = std::getenv("EQ_DB_URL");
    const char* path = std::getenv("EQ_DB_PATH");
    const std::string dbUrl =
        (url != nullptr && *url != '\0')
            ? std::string(url)
            : "sqlite:" +
                  std::string((path != nullptr && *path != '\0') ? path : eq::defaults::kDbPath);
    return eq::tools::runMigrate(dbUrl, args, std::cout, std::cerr);
  }
  eq::Result<eq::Config> cfg = eq::Config::fromEnv();
  if (!cfg.isOk()) {
    std::cerr << "eqctl: " << cfg.status().msg() << "\n";
    return 2;
  }
  // Help, usage errors and unknown commands never read the database; an
  // in-memory one spares them from creating EQ_DB_PATH where eqctl is run.
  // Every command works on a database that exists: opening one that does
  // not would make it.
  const bool needs_store = eq::tools::needsStore(args);
  if (needs_store) {
    if (int rc = eq::tools::requireExistingStore(cfg.value().db_url, std::cerr); rc != 0) {
      return rc;
    }
  }
  // store copy opens both stores itself: the source is the one configured.
  if (needs_store && args[0] == "store") {
    return eq::tools::runStoreCopy(cfg.value().db_url, args, std::cout, std::cerr);
  }
  auto store = eq::Store::openUrl(needs_store ? cfg.value().db_url : "sqlite::memory:");
  if (!store.isOk()) {
    std::cerr << "eqctl: " << store.status().msg() << "\n";
    return eq::Store::exitStatusFor(store.status());
  }
  eq::tools::EqctlOptions options;
  options.env = cfg.value().env;
  options.portal_signup = cfg.value().portal_signup;
  auto allowed = eq::net::CidrSet::parse(cfg.value().webhook_allow_cidrs);
  if (!allowed.isOk()) {
    std::cerr << "eqctl: EQ_WEBHOOK_ALLOW_CIDRS: " << allowed.status().msg() << "\n";
    return 2;
  }
  options.webhook_allow = std::move(allowed).value();
  if (const char* url = std::getenv("EQ_PORTAL_URL"); url != nullptr && *url != '\0') {
    options.portal_url = url;
  } else {
    options.portal_url = "http://127.0.0.1:" + std::to_string(cfg.value().http_port);
  }
  return eq::tools::runEqctl(*store.value(), options, args, std::cout, std::cerr);
}
