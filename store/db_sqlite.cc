// The database seam over SQLite (store/db.h): one connection in WAL mode.
#include <sqlite3.h>

#include <string>
#include <unordered_map>

#include "store/db.h"

namespace eq::store::detail {
namespace {

// How long a statement waits for another process's write lock before it is
// a 503: long enough for any batch of ours, short enough to answer.
constexpr int kBusyTimeoutMs = 5000;

// The Status of a failed SQLite call: a constraint is 409, what may pass
// (busy, locked, full, I/O) 503, the rest 500.
Status statusOf(sqlite3* db, int rc, std::string_view what) {
  std::string msg = std::string(what) + ": " + sqlite3_errmsg(db);
  switch (rc & 0xff) {
    case SQLITE_CONSTRAINT:
      return Status(409, std::move(msg));
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_NOMEM:
      return Status(503, std::move(msg));
    default:
      return Status(500, std::move(msg));
  }
}

class SqliteRow final : public Row {
 public:
  explicit SqliteRow(sqlite3_stmt* stmt) : stmt_(stmt) {}
  int columns() const override { return sqlite3_column_count(stmt_); }
  bool isNull(int col) const override { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int64_t int64(int col) const override { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const override { return sqlite3_column_double(stmt_, col); }
  std::string_view text(int col) const override {
    const auto* p = sqlite3_column_text(stmt_, col);
    if (p == nullptr) return {};
    return {reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col))};
  }

 private:
  sqlite3_stmt* stmt_;
};

class SqliteDb final : public Db {
 public:
  explicit SqliteDb(sqlite3* db) : db_(db) {}
  ~SqliteDb() override {
    for (auto& [text, stmt] : stmts_) sqlite3_finalize(stmt);
    sqlite3_close(db_);
  }

  DbEngine engine() const override { return DbEngine::kSqlite; }

  Result<int64_t> exec(const Sql& sql, std::initializer_list<Value> values,
                       const RowFn& onRow) override {
    Result<int64_t> out = run(sql, values, onRow);
    // As on PostgreSQL, a failed statement spoils its transaction.
    if (!out.isOk() && sqlite3_get_autocommit(db_) == 0) failed_ = true;
    return out;
  }

 private:
  Result<int64_t> run(const Sql& sql, std::initializer_list<Value> values, const RowFn& onRow) {
    // Keyed by the text, not its address: a text built at run time can
    // never find another's statement.
    const std::string text(sql.sqlite);
    sqlite3_stmt* stmt = nullptr;
    if (auto it = stmts_.find(text); it != stmts_.end()) {
      stmt = it->second;
    } else {
      const char* tail = nullptr;
      const int rc = sqlite3_prepare_v3(db_, text.c_str(), static_cast<int>(text.size()),
                                        SQLITE_PREPARE_PERSISTENT, &stmt, &tail);
      if (rc != SQLITE_OK) return statusOf(db_, rc, "prepare");
      if (stmt == nullptr || (tail != nullptr && *tail != '\0')) {
        sqlite3_finalize(stmt);
        return Status(500, "sqlite: want exactly one statement: " + text);
      }
      stmts_.emplace(text, stmt);
    }
    if (static_cast<int>(values.size()) != sqlite3_bind_parameter_count(stmt)) {
      return Status(500, "sqlite: " + std::to_string(values.size()) + " values for " +
                             std::to_string(sqlite3_bind_parameter_count(stmt)) + " placeholders");
    }
    int i = 0;
    for (const Value& v : values) {
      ++i;
      int rc = SQLITE_OK;
      if (std::holds_alternative<std::nullptr_t>(v)) {
        rc = sqlite3_bind_null(stmt, i);
      } else if (const auto* n = std::get_if<int64_t>(&v)) {
        rc = sqlite3_bind_int64(stmt, i, *n);
      } else if (const auto* d = std::get_if<double>(&v)) {
        rc = sqlite3_bind_double(stmt, i, *d);
      } else {
        const std::string_view s = std::get<std::string_view>(v);
        rc = sqlite3_bind_text(stmt, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
      }
      if (rc != SQLITE_OK) {
        sqlite3_reset(stmt);
        return statusOf(db_, rc, "bind");
      }
    }
    const SqliteRow row(stmt);
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      if (onRow) onRow(row);
    }
    // Rows changed; none for a statement that changes nothing (a SELECT).
    const int64_t changed = sqlite3_stmt_readonly(stmt) != 0 ? 0 : sqlite3_changes64(db_);
    Result<int64_t> out = rc == SQLITE_DONE ? Result<int64_t>(changed)
                                            : Result<int64_t>(statusOf(db_, rc, "step"));
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    return out;
  }

 public:
  Status script(std::string_view sql) override {
    char* err = nullptr;
    const std::string text(sql);
    const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
    if (rc == SQLITE_OK) return Status::ok();
    Status st = statusOf(db_, rc, "script");
    sqlite3_free(err);
    return st;
  }

  // IMMEDIATE takes the write lock at once: two writers queue at BEGIN
  // instead of one failing at its first write.
  Status begin() override {
    if (sqlite3_get_autocommit(db_) == 0) return Status(500, "sqlite: a transaction is open");
    failed_ = false;
    return script("BEGIN IMMEDIATE");
  }
  Status commit() override {
    // After SQLITE_FULL or an I/O error SQLite may have rolled the whole
    // transaction back already: nothing of it was kept.
    if (sqlite3_get_autocommit(db_) != 0) return Status(503, "sqlite: the transaction was rolled back");
    if (failed_) {
      script("ROLLBACK");
      return Status(503, "sqlite: a statement of the transaction failed; rolled back");
    }
    Status st = script("COMMIT");
    // A failed COMMIT (disk full) can leave the transaction open, holding
    // the write lock from every other process.
    if (!st.isOk() && sqlite3_get_autocommit(db_) == 0) script("ROLLBACK");
    return st;
  }
  void rollback() override {
    if (sqlite3_get_autocommit(db_) == 0) script("ROLLBACK");
  }

 private:
  sqlite3* db_;
  std::unordered_map<std::string, sqlite3_stmt*> stmts_;  // keyed by their text
  bool failed_ = false;  // a statement of the open transaction failed
};

}  // namespace

Result<std::unique_ptr<Db>> openSqlite(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                                 nullptr);
  if (rc != SQLITE_OK) {
    Status st(503, "cannot open database " + path + ": " +
                       (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    sqlite3_close(db);
    return st;
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  auto out = std::make_unique<SqliteDb>(db);
  // WAL: readers beside one writer across processes; NORMAL sync in WAL
  // mode is durable against a process crash.
  if (Status st = out->script("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                              "PRAGMA foreign_keys=ON");
      !st.isOk()) {
    return st;
  }
  return std::unique_ptr<Db>(std::move(out));
}

}  // namespace eq::store::detail
