// `eqctl store copy --to URL`: moves a deployment's store from SQLite onto
// PostgreSQL (issue 23; docs/scaling.md, "Moving a deployment onto
// PostgreSQL").
//
// The source is the deployment's own store (EQ_DB_URL or EQ_DB_PATH), read
// in one transaction; the destination is migrated first and must hold no
// data (a copy never merges). The source must exist and be at exactly the
// schema this eqctl knows (it is read, never migrated). Every table the
// migrations made is copied, parents before the tables whose foreign keys
// name them, all in one destination transaction: a copy that fails leaves
// the destination as empty as it found it. Each table's row count is
// compared as a sanity check before that transaction commits, and the
// identity sequences are moved past the ids copied. The source must be
// stopped: an eq-api whose heartbeat is younger than a minute makes the
// copy refuse (its writes after the copy would be lost), unless --force
// says the operator knows; eq-dispatcher leaves no heartbeat, so stopping
// the whole stack is the operator's part.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace eq::tools {

// args: {"store", "copy", "--to", URL, ["--force"]}. Exit codes as every
// eqctl command: 0 done, 1 the database failed, 2 a usage or state the
// operator must change (a bad URL, a destination with data, a running
// source).
int runStoreCopy(const std::string& from_url, const std::vector<std::string>& args,
                 std::ostream& out, std::ostream& err);

}  // namespace eq::tools
