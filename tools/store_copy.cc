#include "tools/store_copy.h"

#include <unistd.h>

#include <map>
#include <memory>
#include <set>
#include <string_view>

#include "common/timefmt.h"
#include "store/db.h"
#include "store/migrations.h"
#include "tools/eqctl_commands.h"

namespace eq::tools {
namespace {

using store::Db;
using store::DbEngine;
using store::DbUrl;
using store::Row;
using store::Sql;
using store::Value;

constexpr const char* kUsage =
    "usage: eqctl store copy --to postgresql://USER:PASSWORD@HOST/DB [--force]\n";

// Rows the migrations themselves write (the key epoch's one row): the
// destination has its own, which the copied keys move on by trigger.
const std::set<std::string, std::less<>> kSeededByMigrations = {"key_epoch"};

// An eq-api whose heartbeat is younger than this is taken for running.
constexpr int64_t kRunningWithinMs = 60'000;
constexpr int64_t kProgressEveryRows = 10'000;

struct Column {
  std::string name;
  std::string type;  // the destination's data_type: bigint, integer, text, bytea
  bool identity = false;
};

struct Table {
  std::string name;
  std::vector<Column> columns;
};

// The destination's tables (but the migrations' own record), each with
// its columns in order, from its catalog.
Result<std::vector<Table>> tablesOf(Db& db) {
  std::vector<Table> tables;
  auto r =
      db.exec(Sql{"SELECT c.table_name, c.column_name, c.data_type, c.is_identity "
                  "FROM information_schema.columns c JOIN information_schema.tables t "
                  "ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
                  "WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' "
                  "AND c.table_name <> 'schema_migrations' "
                  "ORDER BY c.table_name, c.ordinal_position"},
              {}, [&](const Row& row) {
                if (tables.empty() || tables.back().name != row.text(0)) {
                  tables.push_back({std::string(row.text(0)), {}});
                }
                tables.back().columns.push_back(
                    {std::string(row.text(1)), std::string(row.text(2)), row.text(3) == "YES"});
              });
  if (!r.isOk()) return r.status();
  return tables;
}

// Tables in an order where every table comes after those its foreign keys
// name.
Result<std::vector<Table>> parentsFirst(Db& db, std::vector<Table> tables) {
  std::map<std::string, std::set<std::string>> parents;
  auto r = db.exec(Sql{"SELECT conrelid::regclass::text, confrelid::regclass::text "
                       "FROM pg_constraint WHERE contype = 'f' "
                       "AND connamespace = current_schema()::regnamespace"},
                   {}, [&](const Row& row) {
                     if (row.text(0) != row.text(1)) {
                       parents[std::string(row.text(0))].insert(std::string(row.text(1)));
                     }
                   });
  if (!r.isOk()) return r.status();
  std::vector<Table> ordered;
  std::set<std::string> placed;
  while (!tables.empty()) {
    const size_t before = tables.size();
    for (auto it = tables.begin(); it != tables.end();) {
      bool ready = true;
      for (const std::string& p : parents[it->name]) ready = ready && placed.count(p) > 0;
      if (!ready) {
        ++it;
        continue;
      }
      placed.insert(it->name);
      ordered.push_back(std::move(*it));
      it = tables.erase(it);
    }
    if (tables.size() == before) return Status(500, "foreign keys in a cycle: " + tables[0].name);
  }
  return ordered;
}

Result<int64_t> countRows(Db& db, const std::string& table) {
  int64_t n = 0;
  const std::string sql = "SELECT count(*) FROM " + table;
  auto r = db.exec(Sql{sql}, {}, [&](const Row& row) { n = row.int64(0); });
  if (!r.isOk()) return r.status();
  return n;
}

// Copies one table's rows, in the callers' transactions. Returns the
// number copied.
Result<int64_t> copyTable(Db& from, Db& to, const Table& t, std::ostream& err) {
  std::string names;
  std::string marks;
  for (const Column& c : t.columns) {
    names += (names.empty() ? "" : ", ") + c.name;
    marks += marks.empty() ? "?" : ", ?";
  }
  const std::string select = "SELECT " + names + " FROM " + t.name;
  const std::string insert = "INSERT INTO " + t.name + " (" + names + ") VALUES (" + marks + ")";
  int64_t copied = 0;
  Status failed;
  std::vector<Value> values(t.columns.size());
  std::vector<std::string> bytes(t.columns.size());
  auto r = from.exec(Sql{select}, {}, [&](const Row& row) {
    for (size_t i = 0; i < t.columns.size(); ++i) {
      const int col = static_cast<int>(i);
      const std::string& type = t.columns[i].type;
      if (row.isNull(col)) {
        values[i] = nullptr;
      } else if (type == "bigint" || type == "integer" || type == "smallint") {
        values[i] = row.int64(col);
      } else if (type == "bytea") {
        bytes[i] = row.blob(col);
        values[i] = store::Blob(bytes[i]);
      } else if (type == "double precision" || type == "real") {
        values[i] = row.real(col);
      } else {
        values[i] = row.text(col);
      }
    }
    auto done = to.execValues(Sql{insert}, values);
    if (!done.isOk()) {
      failed = Status(done.status().code(), t.name + ": " + done.status().msg());
      row.stop();
      return;
    }
    if (++copied % kProgressEveryRows == 0) {
      err << "eqctl: store copy: " << t.name << ": " << copied << " rows...\n";
    }
  });
  if (!failed.isOk()) return failed;
  if (!r.isOk()) return Status(r.status().code(), t.name + ": " + r.status().msg());
  return copied;
}

// Moves each identity column's sequence past the largest id copied, so
// that the next row the services insert gets a new one.
Status advanceIdentities(Db& to, const std::vector<Table>& tables) {
  for (const Table& t : tables) {
    for (const Column& c : t.columns) {
      if (!c.identity) continue;
      const std::string sql = "SELECT setval(pg_get_serial_sequence('" + t.name + "', '" + c.name +
                              "'), max(" + c.name + ")) FROM " + t.name + " HAVING max(" + c.name +
                              ") IS NOT NULL";
      if (auto r = to.exec(Sql{sql}); !r.isOk()) return r.status();
    }
  }
  return Status::ok();
}

Result<std::unique_ptr<Db>> openUrl(const std::string& text, const char* what) {
  auto url = DbUrl::parse(text);
  if (!url.isOk()) return Status(400, std::string(what) + ": " + url.status().msg());
  auto db = Db::open(url.value());
  if (!db.isOk()) {
    return Status(db.status().code(),
                  std::string(what) + " " + url.value().redacted() + ": " + db.status().msg());
  }
  return db;
}

int exitFor(const Status& st) { return st.code() == 400 ? kExitUsage : kExitError; }

}  // namespace

int runStoreCopy(const std::string& from_url, const std::vector<std::string>& args,
                 std::ostream& out, std::ostream& err) {
  std::string to_url;
  bool force = false;
  for (size_t i = 2; i < args.size(); ++i) {
    if (args[i] == "--to" && i + 1 < args.size()) {
      to_url = args[++i];
    } else if (args[i] == "--force") {
      force = true;
    } else {
      err << "eqctl: store copy: unknown option '" << args[i] << "'\n" << kUsage;
      return kExitUsage;
    }
  }
  if (args.size() < 2 || args[1] != "copy" || to_url.empty()) {
    err << "eqctl: store: " << (to_url.empty() ? "--to is required" : "unknown command") << "\n"
        << kUsage;
    return kExitUsage;
  }
  // The source must exist: opening a SQLite path that is not there would
  // create an empty store and "copy" it.
  if (auto parsed = DbUrl::parse(from_url); parsed.isOk() &&
                                            parsed.value().engine == DbEngine::kSqlite &&
                                            ::access(parsed.value().target.c_str(), F_OK) != 0) {
    err << "eqctl: store copy: no database at " << parsed.value().target
        << " (EQ_DB_URL or EQ_DB_PATH names the deployment's store)\n";
    return kExitUsage;
  }
  auto from = openUrl(from_url, "source");
  if (!from.isOk()) {
    err << "eqctl: store copy: " << from.status().msg() << "\n";
    return exitFor(from.status());
  }
  Db& src = *from.value();
  if (src.engine() != DbEngine::kSqlite) {
    err << "eqctl: store copy: copies a SQLite store (EQ_DB_URL or EQ_DB_PATH) to PostgreSQL "
           "(--to postgresql://...)\n";
    return kExitUsage;
  }
  src.setBusyTimeout(10'000);
  store::Transaction read(src);  // on SQLite, also keeps writers out until the copy is done
  if (!read.status().isOk()) {
    err << "eqctl: store copy: the source is busy: " << read.status().msg() << "\n";
    return kExitError;
  }
  // Stopped, before anything else: a running eq-api (or eq-dispatcher,
  // which leaves no heartbeat: the operator stops the whole stack) would
  // write on after the copy, and that would be lost.
  int64_t last_beat = 0;
  if (auto r = src.exec(Sql{"SELECT coalesce(max(heartbeat_at), 0) FROM api_instances"}, {},
                        [&](const Row& row) { last_beat = row.int64(0); });
      !r.isOk()) {
    err << "eqctl: store copy: " << r.status().msg() << "\n";
    return kExitError;
  }
  if (!force && last_beat > nowMs() - kRunningWithinMs) {
    err << "eqctl: store copy: an eq-api of this deployment beat " << (nowMs() - last_beat) / 1000
        << " s ago: stop the stack first (eq-api and eq-dispatcher; what they write after the "
           "copy would be lost), or --force if it is gone\n";
    return kExitUsage;
  }
  // The source is read as it is, never migrated here: at exactly the
  // schema this eqctl knows (tables and columns the destination will have).
  auto states = store::migrationStatus(src);
  int64_t recorded = 0;
  if (auto r = src.exec(Sql{"SELECT count(*) FROM schema_migrations"}, {},
                        [&](const Row& row) { recorded = row.int64(0); });
      !states.isOk() || !r.isOk()) {
    err << "eqctl: store copy: the source's migrations cannot be read: "
        << (!states.isOk() ? states.status().msg() : r.status().msg()) << "\n";
    return kExitError;
  }
  for (const store::MigrationState& m : states.value()) {
    if (!m.applied_at_ms) {
      err << "eqctl: store copy: the source lacks migration " << m.version
          << ": run `eqctl migrate` on it first (with the stack stopped)\n";
      return kExitUsage;
    }
  }
  if (recorded > static_cast<int64_t>(states.value().size())) {
    err << "eqctl: store copy: the source was migrated by a newer EQ Reply (" << recorded
        << " migrations, this eqctl knows " << states.value().size()
        << "): copy with that version\n";
    return kExitUsage;
  }
  auto to = openUrl(to_url, "destination");
  if (!to.isOk()) {
    err << "eqctl: store copy: " << to.status().msg() << "\n";
    return exitFor(to.status());
  }
  Db& dst = *to.value();
  if (dst.engine() != DbEngine::kPostgres) {
    err << "eqctl: store copy: the destination must be PostgreSQL (--to postgresql://...)\n";
    return kExitUsage;
  }
  if (Status st = store::migrate(dst); !st.isOk()) {
    err << "eqctl: store copy: migrate the destination: " << st.msg() << "\n";
    return exitFor(st);
  }
  store::Transaction write(dst);
  if (!write.status().isOk()) {
    err << "eqctl: store copy: " << write.status().msg() << "\n";
    return kExitError;
  }
  auto listed = tablesOf(dst);
  auto tables = listed.isOk() ? parentsFirst(dst, std::move(listed).value()) : listed.status();
  if (!tables.isOk()) {
    err << "eqctl: store copy: " << tables.status().msg() << "\n";
    return kExitError;
  }
  for (const Table& t : tables.value()) {
    if (kSeededByMigrations.count(t.name) > 0) continue;
    auto n = countRows(dst, t.name);
    if (!n.isOk()) {
      err << "eqctl: store copy: " << n.status().msg() << "\n";
      return kExitError;
    }
    if (n.value() > 0) {
      err << "eqctl: store copy: the destination already holds data (" << t.name << ": "
          << n.value() << " rows); copy only into a new, empty database\n";
      return kExitUsage;
    }
  }
  int64_t total = 0;
  size_t copied_tables = 0;
  for (const Table& t : tables.value()) {
    if (kSeededByMigrations.count(t.name) > 0) continue;
    auto copied = copyTable(src, dst, t, err);
    auto expected = countRows(src, t.name);
    auto landed = countRows(dst, t.name);
    if (!copied.isOk() || !expected.isOk() || !landed.isOk()) {
      const Status& st = !copied.isOk() ? copied.status()
                                        : (!expected.isOk() ? expected.status() : landed.status());
      err << "eqctl: store copy: " << st.msg() << "; nothing was copied\n";
      return kExitError;
    }
    if (landed.value() != expected.value()) {
      err << "eqctl: store copy: " << t.name << ": " << landed.value() << " rows landed of "
          << expected.value() << "; nothing was copied\n";
      return kExitError;
    }
    out << "  " << t.name << ": " << copied.value() << " rows\n";
    total += copied.value();
    ++copied_tables;
  }
  if (Status st = advanceIdentities(dst, tables.value()); !st.isOk()) {
    err << "eqctl: store copy: " << st.msg() << "; nothing was copied\n";
    return kExitError;
  }
  if (Status st = write.commit(); !st.isOk()) {
    err << "eqctl: store copy: commit: " << st.msg() << "; nothing was copied\n";
    return kExitError;
  }
  out << "copied " << total << " rows in " << copied_tables << " tables to "
      << DbUrl::parse(to_url).value().redacted()
      << "\nnext: set EQ_DB_URL to it in every process's environment and start the stack\n";
  return kExitOk;
}

}  // namespace eq::tools
