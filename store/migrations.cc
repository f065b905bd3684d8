#include "store/migrations.h"

#include <array>
#include <string>

#include "common/embedded.h"
#include "common/timefmt.h"

namespace eq::store {
namespace {

constexpr std::array<Migration, 14> kMigrations = {{
    {"schema/migrations/001_init.sql", "schema/migrations/postgres/001_init.sql"},
    {"schema/migrations/002_contract.sql", "schema/migrations/postgres/002_contract.sql"},
    {"schema/migrations/003_delivery.sql", "schema/migrations/postgres/003_delivery.sql"},
    {"schema/migrations/004_key_epoch.sql", "schema/migrations/postgres/004_key_epoch.sql"},
    {"schema/migrations/005_settlement.sql", "schema/migrations/postgres/005_settlement.sql"},
    {"schema/migrations/006_portal.sql", "schema/migrations/postgres/006_portal.sql"},
    {"schema/migrations/007_republish.sql", "schema/migrations/postgres/007_republish.sql"},
    {"schema/migrations/008_signin_ids.sql", "schema/migrations/postgres/008_signin_ids.sql"},
    {"schema/migrations/009_delivery_page.sql", "schema/migrations/postgres/009_delivery_page.sql"},
    {"schema/migrations/010_deferred_account_checks.sql",
     "schema/migrations/postgres/010_deferred_account_checks.sql"},
    {"schema/migrations/011_republish_claim.sql",
     "schema/migrations/postgres/011_republish_claim.sql"},
    {"schema/migrations/012_key_last_used.sql", "schema/migrations/postgres/012_key_last_used.sql"},
    {"schema/migrations/013_key_last_used_table.sql",
     "schema/migrations/postgres/013_key_last_used_table.sql"},
    {"schema/migrations/014_monthly_volume.sql",
     "schema/migrations/postgres/014_monthly_volume.sql"},
}};

// The advisory lock every host's migrate() takes on PostgreSQL: any fixed
// number, the same everywhere ("EQ" "MG" in ASCII).
constexpr int64_t kMigrationLock = 0x45514d47;

const Sql kCreateTable{
    "CREATE TABLE IF NOT EXISTS schema_migrations (version TEXT PRIMARY KEY, "
    "applied_at INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS schema_migrations (version TEXT PRIMARY KEY, "
    "applied_at BIGINT NOT NULL)"};
const Sql kLock{"SELECT 1", "SELECT pg_advisory_xact_lock(?)"};
const Sql kApplied{"SELECT version, applied_at FROM schema_migrations"};
const Sql kRecord{"INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)"};
const Sql kTableExists{
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'",
    "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND "
    "tablename = 'schema_migrations'"};

Result<std::vector<MigrationState>> readStates(Db& db) {
  std::vector<MigrationState> out;
  for (const Migration& m : kMigrations) out.push_back({m.sqlite, std::nullopt});
  int64_t tables = 0;
  if (auto r = db.exec(kTableExists, {}, [&](const Row& row) { tables = row.int64(0); });
      !r.isOk()) {
    return r.status();
  }
  if (tables == 0) return out;
  auto r = db.exec(kApplied, {}, [&](const Row& row) {
    for (MigrationState& s : out) {
      if (s.version == row.text(0)) s.applied_at_ms = row.int64(1);
    }
  });
  if (!r.isOk()) return r.status();
  return out;
}

}  // namespace

std::span<const Migration> migrations() { return kMigrations; }

Status migrate(Db& db) {
  const bool sqlite = db.engine() == DbEngine::kSqlite;
  // SQLite's way of rebuilding a table (006, 007) needs foreign keys off,
  // and the pragma is ignored inside a transaction.
  if (sqlite) {
    if (Status st = db.script("PRAGMA foreign_keys=OFF"); !st.isOk()) return st;
  }
  Status st = [&]() -> Status {
    Transaction tx(db);
    if (!tx.status().isOk()) return tx.status();
    if (auto r = sqlite ? db.exec(kLock) : db.exec(kLock, {kMigrationLock}); !r.isOk()) {
      return r.status();
    }
    if (auto r = db.exec(kCreateTable); !r.isOk()) return r.status();
    auto states = readStates(db);
    if (!states.isOk()) return states.status();
    for (size_t i = 0; i < kMigrations.size(); ++i) {
      if (states.value()[i].applied_at_ms) continue;
      const std::string_view file = sqlite ? kMigrations[i].sqlite : kMigrations[i].postgres;
      const std::string_view sql = embedded::file(file);
      if (sql.empty()) return Status(500, "migration not embedded: " + std::string(file));
      if (Status s = db.script(sql); !s.isOk()) {
        return Status(s.code(), std::string(kMigrations[i].sqlite) + ": " + s.msg());
      }
      if (auto r = db.exec(kRecord, {kMigrations[i].sqlite, nowMs()}); !r.isOk()) return r.status();
    }
    return tx.commit();
  }();
  if (sqlite) {
    if (Status on = db.script("PRAGMA foreign_keys=ON"); st.isOk()) st = on;
  }
  return st;
}

Result<std::vector<MigrationState>> migrationStatus(Db& db) { return readStates(db); }

}  // namespace eq::store
