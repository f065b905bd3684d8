// The store's schema migrations: one numbered list for both engines
// (schema/migrations/NNN_*.sql for SQLite, schema/migrations/postgres/ for
// PostgreSQL, the same number doing the same change), applied once each,
// in order, recorded in schema_migrations. A migration is known by its
// SQLite file's name on both engines, so that databases made before
// PostgreSQL existed keep their records.
//
// A new migration is a file in both folders, a line in kMigrations
// (migrations.cc) and in CMakeLists.txt's eq_embed list; applied ones never
// change. Stateless functions over a Db; the files are embedded at build
// time. Store::open (store.h) applies them on the connection it opens,
// on either engine.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "store/db.h"

namespace eq::store {

struct Migration {
  std::string_view sqlite;    // embedded file name, and the version on both engines
  std::string_view postgres;  // embedded file name of the PostgreSQL dialect
};

std::span<const Migration> migrations();

// Applies the pending migrations in one transaction. On PostgreSQL the
// transaction first takes an advisory lock, so that hosts starting at the
// same moment apply each migration once (the others wait, then find it
// recorded); on SQLite the write lock of BEGIN IMMEDIATE does the same.
Status migrate(Db& db);

struct MigrationState {
  std::string_view version;
  std::optional<int64_t> applied_at_ms;  // empty: pending
};

// Where a database stands, without changing it (`eqctl migrate --status`).
Result<std::vector<MigrationState>> migrationStatus(Db& db);

}  // namespace eq::store
