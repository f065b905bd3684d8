// The store's shared part: opening the database, migrations, statements and
// transactions. Each concept's statements are in store/<concept>.cc.
#include "store/store.h"

#include <chrono>
#include <thread>

#include "common/embedded.h"
#include "common/file_modes.h"
#include "common/log.h"
#include "common/timefmt.h"
#include "store/migrations.h"
#include "store/query.h"

namespace eq {

using store_detail::Query;

namespace {

// A database that an older version (or a looser umask) created readable by
// other users is tightened before it is opened: it holds webhook secrets in
// clear (docs/operations.md, "Files and their modes"). SQLite gives the -wal
// and -shm files it creates the database file's mode, so the main file is the
// one that matters; existing ones are tightened too. A failure (another user
// owns the file) is logged, not fatal: the database still works, and the
// operator sees why its mode stayed.
void restrictDatabaseFiles(const std::string& path) {
  if (path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0) return;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    if (Status s = restrictExistingFile(path + suffix); !s.isOk()) {
      log::warn("database file left readable by others", {{"error", s.msg()}});
    }
  }
}

}  // namespace

Result<std::unique_ptr<Store>> Store::open(const std::string& path, int busy_timeout_ms) {
  restrictDatabaseFiles(path);
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return Status(503, "cannot open database " + path + ": " + msg);
  }
  std::unique_ptr<Store> store(new Store(db));
  store->setBusyTimeout(busy_timeout_ms);
  // WAL lets readers run beside one writer across processes; NORMAL sync in
  // WAL mode is durable against process crashes (a power cut may lose the
  // last commits, which the broker's redelivery then repeats).
  for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL"}) {
    if (Status s = store->exec(pragma); !s.isOk()) return s;
  }
  // Migrations run with foreign keys off, as SQLite's procedure for
  // rebuilding a table requires (006_portal.sql rebuilds `deliveries`, which
  // delivery_attempts references); every connection enforces them after.
  if (Status s = store->migrate(); !s.isOk()) return s;
  if (Status s = store->exec("PRAGMA foreign_keys=ON"); !s.isOk()) return s;
  return store;
}

Store::~Store() {
  for (auto& [sql, stmt] : stmts_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

Status Store::error(const char* what) const {
  noteFailure();
  return Status(503, std::string(what) + ": " + sqlite3_errmsg(db_));
}

void Store::noteFailure() const {
  // The primary code: SQLITE_IOERR comes as one of its extended codes
  // (SQLITE_IOERR_WRITE, _FSYNC, _TRUNCATE, _SHMSIZE ...), whichever file
  // (database, WAL, -shm, journal) it was.
  int primary = sqlite3_extended_errcode(db_) & 0xff;
  // Not logged here: the processes log the outage once, where they know
  // what it stops (api/db_thread.cc, dispatcher/dispatcher.cc).
  if (primary != SQLITE_FULL && primary != SQLITE_IOERR) return;
  storage_failing_ = true;
  storage_error_ = sqlite3_errmsg(db_);
}

Status Store::storageStatus() const {
  if (!storage_failing_) return Status::ok();
  return Status(503, "the database cannot write (" + storage_error_ + ")");
}

Status Store::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    noteFailure();
    std::string msg = err != nullptr ? err : "unknown error";
    sqlite3_free(err);
    return Status(503, std::string("sqlite: ") + msg);
  }
  return Status::ok();
}

sqlite3_stmt* Store::prepare(const char* sql) {
  // Keyed by the literal's address: every caller passes a string literal.
  auto it = stmts_.find(sql);
  if (it != stmts_.end()) return it->second;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK) {
    log::error("sqlite prepare failed", {{"error", sqlite3_errmsg(db_)}, {"sql", sql}});
    return nullptr;
  }
  stmts_.emplace(sql, stmt);
  return stmt;
}

Status Store::migrate() {
  // IMMEDIATE takes the write lock first, so two processes starting together
  // do not both apply the same migration.
  if (Status s = begin(); !s.isOk()) return s;
  Status s = exec(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version TEXT PRIMARY KEY, "
      "applied_at INTEGER NOT NULL)");
  // The list both engines share (store/migrations.h); this connection is
  // SQLite's own, so it applies the SQLite files.
  for (const store::Migration& migration : store::migrations()) {
    if (!s.isOk()) break;
    const std::string_view name = migration.sqlite;
    Query check(prepare("SELECT 1 FROM schema_migrations WHERE version = ?"));
    if (!check.valid()) {
      s = error("prepare");
      break;
    }
    check.bind(1, std::string_view(name));
    if (check.step() == SQLITE_ROW) continue;
    std::string_view sql = embedded::file(name);
    if (sql.empty()) {
      s = Status(500, "migration not embedded: " + std::string(name));
      break;
    }
    s = exec(std::string(sql).c_str());
    if (!s.isOk()) break;
    Query record(prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)"));
    record.bind(1, std::string_view(name)).bind(2, nowMs());
    if (record.step() != SQLITE_DONE) s = error("record migration");
  }
  if (!s.isOk()) {
    rollback();
    return s;
  }
  return commit();
}

namespace {

// Savepoint statements by depth, as literals so that control() can keep them
// prepared (Store::prepare is keyed by the literal's address). A batch nests
// one level (a request's savepoint inside the batch's BEGIN); deeper levels
// are rare and built as text.
constexpr int kPreparedDepths = 4;
constexpr const char* kSavepoint[kPreparedDepths] = {"", "SAVEPOINT sp1", "SAVEPOINT sp2",
                                                     "SAVEPOINT sp3"};
constexpr const char* kRelease[kPreparedDepths] = {"", "RELEASE sp1", "RELEASE sp2",
                                                   "RELEASE sp3"};
constexpr const char* kRollbackTo[kPreparedDepths] = {"", "ROLLBACK TO sp1", "ROLLBACK TO sp2",
                                                      "ROLLBACK TO sp3"};

}  // namespace

Status Store::control(const char* sql) {
  // Transaction control runs several times per batch of the api's database
  // thread: parsed once, like every other statement, rather than by
  // sqlite3_exec each time.
  Query q(prepare(sql));
  if (!q.valid()) return exec(sql);
  int rc = q.step();
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) return Status::ok();
  noteFailure();
  return Status(503, std::string("sqlite: ") + sqlite3_errmsg(db_));
}

Status Store::controlAtDepth(const char* const* prepared, const char* verb, int depth) {
  if (depth < kPreparedDepths) return control(prepared[depth]);
  return exec((std::string(verb) + " sp" + std::to_string(depth)).c_str());
}

Status Store::begin() {
  if (depth_ > 0 && sqlite3_get_autocommit(db_) != 0) depth_ = 0;  // lost to an error
  if (depth_ == 0) {
    if (Status s = control("BEGIN IMMEDIATE"); !s.isOk()) return s;
    changes_at_begin_ = sqlite3_total_changes64(db_);
  } else {
    if (Status s = controlAtDepth(kSavepoint, "SAVEPOINT", depth_); !s.isOk()) return s;
  }
  ++depth_;
  return Status::ok();
}

Status Store::commit() {
  if (depth_ == 0) return Status(500, "commit without a transaction");
  if (sqlite3_get_autocommit(db_) != 0) {
    // SQLite rolled the whole transaction back after an error (SQLITE_FULL,
    // SQLITE_IOERR, SQLITE_NOMEM): nothing of it was kept.
    depth_ = 0;
    return Status(503, "sqlite: the transaction was rolled back");
  }
  --depth_;
  if (depth_ > 0) return controlAtDepth(kRelease, "RELEASE", depth_);
  Status s = control("COMMIT");
  // After some errors (SQLITE_FULL, SQLITE_IOERR) the transaction stays
  // open and would keep the write lock from every other process.
  if (!s.isOk() && sqlite3_get_autocommit(db_) == 0) control("ROLLBACK");
  // A transaction that changed nothing writes nothing, so only one that
  // changed rows tells that the storage works again.
  if (s.isOk() && sqlite3_total_changes64(db_) != changes_at_begin_) noteWritten();
  return s;
}

Status Store::rollback() {
  if (depth_ == 0) return Status::ok();
  --depth_;
  if (sqlite3_get_autocommit(db_) != 0) {
    depth_ = 0;
    return Status::ok();
  }
  if (depth_ > 0) {
    Status s = controlAtDepth(kRollbackTo, "ROLLBACK TO", depth_);
    Status r = controlAtDepth(kRelease, "RELEASE", depth_);
    return s.isOk() ? r : s;
  }
  return control("ROLLBACK");
}

bool Store::inTransaction() const { return sqlite3_get_autocommit(db_) == 0; }

void Store::setBusyTimeout(int ms) {
  busy_timeout_ms_ = ms;
  sqlite3_busy_handler(db_, &Store::onBusy, this);
}

int Store::onBusy(void* self, int count) {
  auto* store = static_cast<Store*>(self);
  int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
  if (count == 0) store->busy_since_us_ = now_us;
  int64_t waited_us = now_us - store->busy_since_us_;
  if (waited_us >= int64_t{store->busy_timeout_ms_} * 1000) return 0;  // SQLITE_BUSY
  std::this_thread::sleep_for(std::chrono::microseconds(waited_us < 2000 ? 100 : 1000));
  return 1;
}

Status Store::disableAutoCheckpoint() { return exec("PRAGMA wal_autocheckpoint=0"); }

Status Store::checkpointPassive() {
  int rc = sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  if (rc != SQLITE_OK && rc != SQLITE_BUSY) return error("wal checkpoint");
  return Status::ok();
}

Status Store::ping() {
  if (Status s = begin(); !s.isOk()) return s;
  if (Status s = rollback(); !s.isOk()) return s;
  return storageStatus();
}

}  // namespace eq
