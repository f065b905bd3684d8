// eqctl's commands, as a function of arguments and streams so tests can run
// them in-process. The Store is opened by the caller (tools/eqctl.cc) from
// EQ_DB_PATH and only borrowed here.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/netaddr.h"
#include "common/store.h"

namespace eq::tools {

struct EqctlOptions {
  std::string env = "production";  // EQ_ENV: which key prefix `key create` mints
  // EQ_WEBHOOK_ALLOW_CIDRS: non-public ranges a default webhook URL may name
  // literally, the same rule eq-api applies to webhook_url.
  net::CidrSet webhook_allow;
};

// Runs one eqctl command. Returns the exit code: 0 ok, 1 failure (message on
// err), 2 usage error.
int runEqctl(Store& store, const EqctlOptions& options, const std::vector<std::string>& args,
             std::ostream& out, std::ostream& err);

// Parses an ISO 8601 UTC time as eqctl accepts it in --expire-at:
// 2026-01-31, 2026-01-31T12:00:00Z, with optional fractional seconds and a
// +HH:MM / -HH:MM offset instead of Z. False when it is not one of those.
bool parseIso8601(const std::string& text, int64_t* unix_ms);

}  // namespace eq::tools
