// The store's shared part: opening the database, migrations and
// transactions. Each concept's statements are in store/<concept>.cc.
#include "store/store.h"

#include "common/file_modes.h"
#include "common/log.h"
#include "store/migrations.h"

namespace eq {

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
  return open(store::DbUrl{store::DbEngine::kSqlite, path}, busy_timeout_ms);
}

Result<std::unique_ptr<Store>> Store::open(const store::DbUrl& url, int busy_timeout_ms) {
  if (url.engine == store::DbEngine::kSqlite) restrictDatabaseFiles(url.target);
  Result<std::unique_ptr<store::Db>> db = store::Db::open(url);
  if (!db.isOk()) return db.status();
  db.value()->setBusyTimeout(busy_timeout_ms);
  db.value()->setLockTimeout(busy_timeout_ms);
  // The one list of both engines (store/migrations.h), under the write lock
  // (SQLite) or an advisory lock (PostgreSQL): processes starting together
  // apply each migration once.
  if (Status s = store::migrate(*db.value()); !s.isOk()) return s;
  return std::unique_ptr<Store>(new Store(std::move(db).value()));
}

Result<std::unique_ptr<Store>> Store::openUrl(std::string_view url, int busy_timeout_ms) {
  Result<store::DbUrl> parsed = store::DbUrl::parse(url);
  if (!parsed.isOk()) return Status(400, "EQ_DB_URL: " + parsed.status().msg());
  Result<std::unique_ptr<Store>> opened = open(parsed.value(), busy_timeout_ms);
  if (opened.isOk()) {
    log::info("database opened", {{"database", parsed.value().redacted()}});
    return opened;
  }
  return Status(opened.status().code(), parsed.value().redacted() + ": " + opened.status().msg());
}

Result<int64_t> Store::exec(const char* what, const store::Sql& sql,
                            std::initializer_list<store::Value> values, const store::RowFn& onRow) {
  Result<int64_t> r = db_->exec(sql, values, onRow);
  if (r.isOk()) return r;
  return Status(r.status().code(), std::string(what) + ": " + r.status().msg());
}

Status Store::queue(const char* what, const store::Sql& sql,
                    std::initializer_list<store::Value> values) {
  Status st = db_->queue(sql, values);
  if (st.isOk()) return st;
  return Status(st.code(), std::string(what) + ": " + st.msg());
}

Status Store::storageStatus() const {
  if (!db_->storageFailing()) return Status::ok();
  return Status(503, "the database cannot write (" + db_->storageError() + ")");
}

Status Store::begin() { return db_->begin(); }

Status Store::commit() { return db_->commit(); }

Status Store::rollback() {
  db_->rollback();
  return Status::ok();
}

bool Store::inTransaction() const { return db_->inTransaction(); }

// WAL checkpoints are SQLite's: PostgreSQL checkpoints on its own.
Status Store::disableAutoCheckpoint() {
  if (db_->engine() != store::DbEngine::kSqlite) return Status::ok();
  return db_->script("PRAGMA wal_autocheckpoint=0");
}

Status Store::checkpointPassive() {
  if (db_->engine() != store::DbEngine::kSqlite) return Status::ok();
  // PASSIVE never waits for a lock: a checkpoint that could not copy
  // everything says so in its row, not as an error.
  if (auto r = db_->exec(store::Sql{"PRAGMA wal_checkpoint(PASSIVE)"}); !r.isOk()) {
    return Status(r.status().code(), "wal checkpoint: " + r.status().msg());
  }
  return Status::ok();
}

Status Store::ping() {
  if (Status s = begin(); !s.isOk()) return s;
  if (Status s = rollback(); !s.isOk()) return s;
  return storageStatus();
}

}  // namespace eq
