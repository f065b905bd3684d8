// eqctl's commands, as a function of arguments and streams so tests can run
// them in-process. The Store is opened by the caller (tools/eqctl.cc) from
// EQ_DB_PATH and only borrowed here.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "common/store.h"

namespace eq::tools {

// Runs one eqctl command. Returns the exit code: 0 ok, 1 failure (message on
// err), 2 usage error.
int runEqctl(Store& store, const std::string& env, const std::vector<std::string>& args,
             std::ostream& out, std::ostream& err);

}  // namespace eq::tools
