// The database seam over SQLite (store/db.h): one connection in WAL mode.
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <unordered_map>

#include "store/db.h"

namespace eq::store::detail {
namespace {

// How long a statement waits for another process's write lock before it is
// a 503, unless setBusyTimeout says otherwise: long enough for any batch of
// ours, short enough to answer.
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
    return {reinterpret_cast<const char*>(p),
            static_cast<size_t>(sqlite3_column_bytes(stmt_, col))};
  }
  std::string blob(int col) const override {
    const void* p = sqlite3_column_blob(stmt_, col);
    if (p == nullptr) return {};
    return {static_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col))};
  }

 private:
  sqlite3_stmt* stmt_;
};

// Statements by their text, found by a string_view without building a
// string on every call.
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class SqliteDb final : public Db {
 public:
  explicit SqliteDb(sqlite3* db) : db_(db) { setBusyTimeout(kBusyTimeoutMs); }
  ~SqliteDb() override {
    for (auto& [text, stmt] : stmts_) sqlite3_finalize(stmt);
    sqlite3_close(db_);
  }

  DbEngine engine() const override { return DbEngine::kSqlite; }

  void setLockTimeout(int) override {}  // the write lock is taken at BEGIN

  Status backupTo(const std::string& path, bool replace) override {
    // Never onto the database itself, its -wal or -shm (by any name: a
    // symlink, another path to the same file): --force would destroy what
    // it was asked to copy.
    struct stat target {};
    const bool exists = ::lstat(path.c_str(), &target) == 0 || errno != ENOENT;
    if (exists) {
      struct stat resolved {};
      if (::stat(path.c_str(), &resolved) == 0) {
        const std::string source = sqlite3_db_filename(db_, "main");
        for (const std::string& own : {source, source + "-wal", source + "-shm"}) {
          struct stat st {};
          if (::stat(own.c_str(), &st) == 0 && st.st_dev == resolved.st_dev &&
              st.st_ino == resolved.st_ino) {
            return Status(400, path + " is the database's own file " + own + "; back up elsewhere");
          }
        }
      }
      if (!replace) return Status(409, path + " exists (give --force to replace it)");
    }
    // Into a new file beside PATH (0600, made here), renamed onto PATH only
    // once the copy is whole: a failed copy leaves PATH as it was.
    std::string temp = path + ".partial-XXXXXX";
    const int fd = ::mkstemp(temp.data());
    if (fd < 0)
      return Status(503, "cannot create a file beside " + path + ": " + std::strerror(errno));
    ::close(fd);
    sqlite3* dest = nullptr;
    int rc = sqlite3_open_v2(temp.c_str(), &dest, SQLITE_OPEN_READWRITE, nullptr);
    if (rc == SQLITE_OK) {
      sqlite3_backup* b = sqlite3_backup_init(dest, "main", db_, "main");
      if (b == nullptr) {
        rc = sqlite3_errcode(dest);
      } else {
        // Every page in one step: one read transaction, which in WAL mode
        // keeps no writer waiting (copied in parts, each write of eq-api
        // meanwhile would start the copy over). Busy or locked: wait a
        // little, then try again.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        do {
          rc = sqlite3_backup_step(b, -1);
          if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
        } while ((rc == SQLITE_BUSY || rc == SQLITE_LOCKED) &&
                 std::chrono::steady_clock::now() < deadline);
        const int finished = sqlite3_backup_finish(b);
        if (rc == SQLITE_DONE) rc = finished;
      }
    }
    Status st =
        rc == SQLITE_OK
            ? Status::ok()
            : Status(503, "backup to " + path + " failed: " +
                              (dest != nullptr ? sqlite3_errmsg(dest) : sqlite3_errstr(rc)));
    sqlite3_close(dest);  // a WAL-mode copy checkpoints and drops its -wal here
    if (st.isOk()) {
      // A -wal or -shm of the file being replaced would be read as the
      // new copy's own.
      std::remove((path + "-wal").c_str());
      std::remove((path + "-shm").c_str());
      if (::rename(temp.c_str(), path.c_str()) != 0) {
        st = Status(503, "cannot move the copy onto " + path + ": " + std::strerror(errno));
      }
    }
    if (!st.isOk()) {
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
        std::remove((temp + suffix).c_str());
      }
    }
    return st;
  }

  void setBusyTimeout(int ms) override {
    busy_timeout_ms_ = ms;
    sqlite3_busy_handler(db_, &SqliteDb::onBusy, this);
  }

 protected:
  Result<int64_t> run(const Sql& sql, std::span<const Value> values,
                      const RowFn& onRow) override {
    Result<sqlite3_stmt*> prepared = statement(sql.sqlite);
    if (!prepared.isOk()) return prepared.status();
    sqlite3_stmt* stmt = prepared.value();
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
      } else if (const auto* b = std::get_if<Blob>(&v)) {
        rc = sqlite3_bind_blob(stmt, i, b->bytes.data(), static_cast<int>(b->bytes.size()),
                               SQLITE_TRANSIENT);
      } else {
        const std::string_view s = std::get<std::string_view>(v);
        rc = sqlite3_bind_text(stmt, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
      }
      if (rc != SQLITE_OK) {
        sqlite3_clear_bindings(stmt);
        return failure(rc, "bind");
      }
    }
    const SqliteRow row(stmt);
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      if (!onRow) continue;
      onRow(row);
      if (row.stopped()) {
        rc = SQLITE_DONE;
        break;
      }
    }
    // Rows changed; none for a statement that changes nothing (a SELECT).
    const int64_t changed = sqlite3_stmt_readonly(stmt) != 0 ? 0 : sqlite3_changes64(db_);
    Result<int64_t> out =
        rc == SQLITE_DONE ? Result<int64_t>(changed) : Result<int64_t>(failure(rc, "step"));
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    return out;
  }

  Status runScript(std::string_view sql) override {
    char* err = nullptr;
    const std::string text(sql);
    const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
    sqlite3_free(err);
    if (rc == SQLITE_OK) return Status::ok();
    return failure(rc, "script");
  }

  // Transaction control runs several times per batch of eq-api's database
  // thread: each statement is prepared once, like every other. IMMEDIATE
  // takes the write lock at once: two writers queue at BEGIN instead of one
  // failing at its first write.
  Status control(Control op, size_t depth) override {
    const std::string text = controlText(op, depth, "BEGIN IMMEDIATE");
    if (op == Control::kBegin && sqlite3_get_autocommit(db_) == 0) {
      return Status(500, "sqlite: a transaction is open");
    }
    Result<sqlite3_stmt*> prepared = statement(text);
    if (!prepared.isOk()) return prepared.status();
    const int rc = sqlite3_step(prepared.value());
    sqlite3_reset(prepared.value());
    if (rc == SQLITE_DONE || rc == SQLITE_ROW) return Status::ok();
    return failure(rc, text);
  }

  bool transactionOpen() const override { return sqlite3_get_autocommit(db_) == 0; }

 private:
  // The cached statement of this text, prepared on first use. Keyed by the
  // text, not its address: a text built at run time can never find
  // another's statement.
  Result<sqlite3_stmt*> statement(std::string_view text) {
    if (auto it = stmts_.find(text); it != stmts_.end()) return it->second;
    sqlite3_stmt* stmt = nullptr;
    const char* tail = nullptr;
    const int rc = sqlite3_prepare_v3(db_, text.data(), static_cast<int>(text.size()),
                                      SQLITE_PREPARE_PERSISTENT, &stmt, &tail);
    if (rc != SQLITE_OK) return failure(rc, "prepare");
    if (stmt == nullptr || (tail != nullptr && tail != text.data() + text.size())) {
      sqlite3_finalize(stmt);
      return Status(500, "sqlite: want exactly one statement: " + std::string(text));
    }
    stmts_.emplace(std::string(text), stmt);
    return stmt;
  }

  // The Status of a failed call; a full disk or an I/O error (on the
  // database file, its WAL or a journal) is also a storage failure.
  Status failure(int rc, std::string_view what) {
    const int primary = sqlite3_extended_errcode(db_) & 0xff;
    if (primary == SQLITE_FULL || primary == SQLITE_IOERR) noteStorageFailure(sqlite3_errmsg(db_));
    return statusOf(db_, rc, what);
  }

  // SQLite's own busy handler sleeps 1, 2, 5, 10, 15, 20, 25... ms between
  // tries, so a write lock that another process holds for a fraction of a
  // millisecond can cost its waiter 10-50 ms: the tail of webhook dispatch
  // lag and of api latency under mixed load. This one retries every 100 µs
  // for the first 2 ms, then every 1 ms, until the timeout.
  static int onBusy(void* self, int count) {
    auto* db = static_cast<SqliteDb*>(self);
    const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
    if (count == 0) db->busy_since_us_ = now_us;
    const int64_t waited_us = now_us - db->busy_since_us_;
    if (waited_us >= int64_t{db->busy_timeout_ms_} * 1000) return 0;  // SQLITE_BUSY
    std::this_thread::sleep_for(std::chrono::microseconds(waited_us < 2000 ? 100 : 1000));
    return 1;
  }

  sqlite3* db_;
  std::unordered_map<std::string, sqlite3_stmt*, TextHash, std::equal_to<>> stmts_;
  int busy_timeout_ms_ = kBusyTimeoutMs;
  int64_t busy_since_us_ = 0;  // when the current wait for a lock began
};

}  // namespace

Result<std::unique_ptr<Db>> openSqlite(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status st(503, "cannot open database " + path + ": " +
                       (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    sqlite3_close(db);
    return st;
  }
  sqlite3_extended_result_codes(db, 1);
  auto out = std::make_unique<SqliteDb>(db);
  // WAL: readers beside one writer across processes; NORMAL sync in WAL
  // mode is durable against a process crash (a power cut may lose the last
  // commits, which the broker's redelivery then repeats).
  if (Status st = out->script("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                              "PRAGMA foreign_keys=ON");
      !st.isOk()) {
    return st;
  }
  return std::unique_ptr<Db>(std::move(out));
}

}  // namespace eq::store::detail
