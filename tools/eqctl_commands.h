// eqctl's commands, as a function of arguments and streams so tests can run
// them in-process. The Store is opened by the caller (tools/eqctl.cc) from
// EQ_DB_PATH and only borrowed here.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/netaddr.h"
#include "store/store.h"

namespace eq::tools {

struct EqctlOptions {
  std::string env = "production";  // EQ_ENV: which key prefix `key create` mints
  // EQ_WEBHOOK_ALLOW_CIDRS: non-public ranges a default webhook URL may name
  // literally, the same rule eq-api applies to webhook_url.
  net::CidrSet webhook_allow;
  // EQ_PORTAL_URL: where people open the developer center, for the links
  // `account invite` and `account reset-password` print.
  std::string portal_url = "http://127.0.0.1:8080";
  // EQ_PORTAL_SIGNUP: with "off", `account invite` is refused (no new
  // people); reset links for existing people are still made.
  std::string portal_signup = "invite";
};

// Exit codes, documented in `eqctl --help` and the README. Scripts can tell
// "you called it wrong" from "that id does not exist" from "the database
// failed" without parsing messages.
constexpr int kExitOk = 0;
constexpr int kExitError = 1;     // internal: the database failed or is busy
constexpr int kExitUsage = 2;     // bad command, option or value
constexpr int kExitNotFound = 3;  // no such key, task or delivery
constexpr int kExitConflict =
    4;  // the object is in the wrong state (e.g. replay of a pending delivery)
constexpr int kExitRefused = 5;  // the deployment's settings forbid it (invite, sign-up off)

// Runs one eqctl command. Returns one of the exit codes above. Output goes
// to out; errors and warnings to err, as text, or (with --json, on failure)
// as one JSON line {"error":{"exit_code","kind","message"}}.
int runEqctl(Store& store, const EqctlOptions& options, const std::vector<std::string>& args,
             std::ostream& out, std::ostream& err);

// `eqctl migrate [--status]` (args[0] is "migrate") on the database at
// db_url (store/db.h's DbUrl): run by main before the store is opened,
// since opening it would migrate. Returns an exit code as runEqctl does.
int runMigrate(const std::string& db_url, const std::vector<std::string>& args,
               std::ostream& out, std::ostream& err);

// eqctl never makes a database (`migrate` does): main calls this before it
// opens the store for any other command, which would create a SQLite file
// and apply the migrations. kExitOk when db_url names a database that holds
// EQ Reply's tables; otherwise a message on err naming where it looked and
// how to point eqctl at a stack, and kExitUsage (or, for a server that
// cannot be reached, kExitError).
int requireExistingStore(const std::string& db_url, std::ostream& err);

// True when args name a command that works on the store: not help, not
// nothing, not an unknown command (runEqctl answers those without one).
bool needsStore(const std::vector<std::string>& args);

// True when args ask for help (--help, -h or a leading `help`): runEqctl then
// prints it without touching the store, so main need not open the database.
bool isHelpRequest(const std::vector<std::string>& args);

// Parses an ISO 8601 UTC time as eqctl accepts it in --expire-at:
// 2026-01-31, 2026-01-31T12:00:00Z, with optional fractional seconds and a
// +HH:MM / -HH:MM offset instead of Z. False when it is not one of those.
bool parseIso8601(const std::string& text, int64_t* unix_ms);

}  // namespace eq::tools
