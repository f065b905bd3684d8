// The seam under the store: one database connection, SQLite or PostgreSQL
// (issue 23; docs/scaling.md, "Several hosts"), behind one small interface.
//
// A statement is written once with `?` placeholders, and once more for
// PostgreSQL only where its dialect differs (Sql below), beside each other
// in the file that uses it: no `if (postgres)` branches in the callers.
// Values are bound in order (text valid UTF-8 without NUL: the callers
// validate what they store); rows are read by column index. Errors are
// Status codes callers can act on:
//   409  a constraint refused the change (unique key, check, foreign key)
//   503  the database cannot answer now (busy, locked, connection lost,
//        out of disk): the caller answers 503 with Retry-After and tries
//        again later; a lost PostgreSQL connection is reopened by the next
//        statement outside a transaction. A 503 from a COMMIT means the
//        outcome is unknown: writes that may be retried must be idempotent.
//   500  anything else (a bug: bad SQL, a wrong number of values)
// The same on both engines: a failed statement inside a transaction spoils
// its innermost level, and that level's commit rolls back and answers 503.
//
// Ownership and threads: a Db is one connection, owned by one thread at a
// time (in practice, each process's database thread opens its own). Its
// prepared statements are cached for its lifetime, keyed by their text.
// A Transaction borrows a Db for one scope; transactions nest (savepoints).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"

namespace eq::store {

enum class DbEngine { kSqlite, kPostgres };

// Where the store lives (EQ_DB_URL): `sqlite:PATH` (or a bare path) for
// SQLite, a libpq connection URI (`postgresql://` or `postgres://`) for
// PostgreSQL.
struct DbUrl {
  DbEngine engine = DbEngine::kSqlite;
  std::string target;  // the file path, or the URI as libpq reads it

  // An error (400) names what is wrong; an empty URL is an error too.
  static Result<DbUrl> parse(std::string_view url);
  // The URL for logs: a PostgreSQL password (user:password@, or
  // ?password=) is replaced by "***".
  std::string redacted() const;
};

// One statement: its SQLite text, and its PostgreSQL text where that
// differs (empty: the same text, its `?` numbered $1, $2... when prepared).
struct Sql {
  std::string_view sqlite;
  std::string_view postgres = {};
};

// `?` outside quotes and comments numbered $1, $2..., and `?N` written
// `$N`: the PostgreSQL form of a statement.
std::string numberPlaceholders(std::string_view sql);

// Bytes bound as such: a BLOB on SQLite, a bytea on PostgreSQL (text must
// be valid UTF-8; a digest is not).
// Explicit, so that a string is never taken for bytes.
struct Blob {
  explicit Blob(std::string_view b) : bytes(b) {}
  std::string_view bytes;
};

// A value bound to a placeholder.
using Value = std::variant<std::nullptr_t, int64_t, double, std::string_view, Blob>;

// One row of a result, valid only during the callback that receives it.
class Row {
 public:
  virtual ~Row() = default;
  virtual int columns() const = 0;
  virtual bool isNull(int col) const = 0;
  virtual int64_t int64(int col) const = 0;          // 0 for NULL; a boolean is 0 or 1
  virtual double real(int col) const = 0;            // 0 for NULL
  virtual std::string_view text(int col) const = 0;  // "" for NULL
  // The bytes of a BLOB or bytea column (of any other column, its text).
  virtual std::string blob(int col) const = 0;
  // Asks for no more rows: the callback that has what it needs ends a
  // walk early (SQLite stops stepping; PostgreSQL's rows have all come).
  void stop() const { stopped_ = true; }
  bool stopped() const { return stopped_; }

 private:
  mutable bool stopped_ = false;
};

using RowFn = std::function<void(const Row&)>;

// Transactions nest: begin() opens the transaction at the outermost level
// (BEGIN IMMEDIATE on SQLite, which takes the write lock at once) and a
// savepoint inside one; commit() and rollback() end the innermost level
// only. So a function with a transaction of its own also works inside its
// caller's (eq-api's database thread runs many requests in one batch, one
// savepoint each).
class Db {
 public:
  // Opens the database (and for SQLite creates the file, WAL mode, a busy
  // timeout). A PostgreSQL server that refuses or cannot be reached is a
  // 503 naming why; a URL libpq cannot read a 400.
  static Result<std::unique_ptr<Db>> open(const DbUrl& url);

  virtual ~Db() = default;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  virtual DbEngine engine() const = 0;

  // Runs one statement with values bound in order; onRow, when given, sees
  // every row. The number of rows the statement changed (0 for a SELECT).
  Result<int64_t> exec(const Sql& sql, std::initializer_list<Value> values = {},
                       const RowFn& onRow = {});
  // The same with as many values as the caller has at run time (a row of
  // a table read from its catalog).
  Result<int64_t> execValues(const Sql& sql, std::span<const Value> values,
                             const RowFn& onRow = {});
  // Runs statements without values, separated by ';' (a schema, a
  // migration), in the engine's own text.
  Status script(std::string_view sql);

  // A statement whose answer (rows, the count of rows changed) nobody
  // waits for: inside a transaction on PostgreSQL it is held and sent with
  // the next statement that waits for an answer (libpq's pipeline mode, one
  // round trip for all of them), at the latest when its level ends; on
  // SQLite, or outside a transaction, it runs now. Its failure spoils its
  // level as any statement's does, so that level's commit answers 503; the
  // Status here only says whether it could be held (a statement the server
  // cannot prepare, the wrong number of values, a lost connection).
  Status queue(const Sql& sql, std::initializer_list<Value> values = {});

  // Inside a transaction: its commit answers before the database has
  // flushed it to disk. A crash of the database server (not of this
  // process) in the next fraction of a second may then lose the whole
  // transaction, never a part of it. Only for writes whose loss costs
  // nothing anyone was promised: rate counts, a webhook attempt's record
  // (its delivery comes due again and is sent again). PostgreSQL: SET LOCAL
  // synchronous_commit = off. SQLite: a no-op, its commits never wait for
  // the disk (WAL with synchronous=NORMAL: durable when this process
  // crashes, not when the machine loses power).
  Status relaxDurability();

  // Transaction control (Transaction below is the way to use it). A
  // statement that fails spoils the innermost level: its commit rolls it
  // back and answers 503; the levels outside it go on. On SQLite a full
  // disk or an I/O error may roll the whole transaction back at once: then
  // every level is gone and inTransaction() is false.
  Status begin();
  Status commit();
  void rollback();
  bool inTransaction() const;

  // How long BEGIN waits for the write lock another connection holds
  // before it is a 503: SQLite's busy timeout, the one lock SQLite takes.
  // (PostgreSQL's BEGIN never waits: a no-op there.)
  virtual void setBusyTimeout(int ms) = 0;
  // How long a statement inside a transaction waits for a row or table lock
  // another connection holds before it is a 503: PostgreSQL's lock_timeout.
  // (SQLite holds its one lock from BEGIN on and never waits after it: a
  // no-op there.)
  virtual void setLockTimeout(int ms) = 0;

  // Copies the whole database, as one consistent snapshot, into a new file
  // at path while other connections go on writing (SQLite's online backup
  // API; the copy holds every commit, those still in the -wal file too).
  // The copy is made beside path (0600) and renamed onto it when whole, so
  // a failure leaves path as it was. 409 when path exists (unless replace),
  // 400 when path is the database's own file, its -wal or -shm, and on
  // PostgreSQL (pg_dump is its tool), 503 when the copy cannot be written.
  virtual Status backupTo(const std::string& path, bool replace) = 0;

  // True from a statement that failed for want of space or with an I/O
  // error until a write of this connection commits (a transaction that
  // changed rows, or a statement that changed rows outside one): while it
  // holds, reads work and writes fail, and a process answers "not ready"
  // rather than "busy". storageError() is the failure's message.
  bool storageFailing() const { return storage_failing_; }
  const std::string& storageError() const { return storage_error_; }

 protected:
  Db() = default;

  enum class Control { kBegin, kCommit, kRollback, kSavepoint, kRelease, kRollbackTo };
  virtual Result<int64_t> run(const Sql& sql, std::span<const Value> values,
                              const RowFn& onRow) = 0;
  // queue()'s engine part (called inside a transaction): by default the
  // statement runs now.
  virtual Status hold(const Sql& sql, std::span<const Value> values);
  // Sends what is held, unless it is only transaction control (which can
  // wait for the next statement), and waits for the answers, reporting
  // each through noteHeld. By default nothing is ever held.
  virtual void sendHeld() {}
  // relaxDurability()'s engine part; by default there is nothing to relax.
  virtual Status relax() { return Status::ok(); }
  // A held statement's outcome: a failed one spoils the innermost level,
  // as any statement's; a failed transaction-control statement (a held
  // BEGIN, SAVEPOINT or RELEASE: only a lost connection or an aborted
  // transaction fails them) spoils every level, since the levels no longer
  // say where the transaction stands.
  // `why` is the failure's message, which the level's commit passes on
  // (nobody else saw it).
  void noteHeld(bool ok, int64_t changed, bool control, std::string_view why = {});
  virtual Status runScript(std::string_view sql) = 0;
  // One transaction-control statement; depth names the savepoint.
  virtual Status control(Control op, size_t depth) = 0;
  // Its text, the same on both engines but for how a transaction begins
  // (SQLite's BEGIN IMMEDIATE, PostgreSQL's BEGIN).
  static std::string controlText(Control op, size_t depth, std::string_view begin);
  // Whether the connection itself is inside a transaction (SQLite ends one
  // by itself after some errors).
  virtual bool transactionOpen() const = 0;
  // Open transaction levels: 0 none, 1 the transaction, 2+ savepoints.
  size_t depth() const { return levels_.size(); }
  // The engines report a storage failure here (see storageFailing()).
  void noteStorageFailure(std::string msg) {
    storage_failing_ = true;
    storage_error_ = std::move(msg);
  }

 private:
  struct Level {
    bool failed = false;   // a statement of this level failed
    bool changed = false;  // a statement of this level (or a released inner one) changed rows
    std::string why;       // the first failure of a held statement of this level
  };
  void noteResult(bool ok, int64_t changed);
  static std::string spoiled(const Level& level, std::string_view what);
  std::vector<Level> levels_;  // open transaction levels, outermost first
  bool storage_failing_ = false;
  std::string storage_error_;
};

// A transaction for one scope: begun at construction (see status()),
// rolled back at destruction unless commit() succeeded. Inside another
// transaction of the same Db it is a savepoint.
class Transaction {
 public:
  explicit Transaction(Db& db) : db_(db), status_(db.begin()) {}
  ~Transaction() {
    if (status_.isOk() && !committed_) db_.rollback();
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  // Whether the transaction began.
  const Status& status() const { return status_; }
  // Commits; a failed commit is rolled back.
  Status commit() {
    if (!status_.isOk()) return status_;
    committed_ = true;  // committed or rolled back: either way it has ended
    return db_.commit();
  }

 private:
  Db& db_;
  Status status_;
  bool committed_ = false;
};

namespace detail {
Result<std::unique_ptr<Db>> openSqlite(const std::string& path);
Result<std::unique_ptr<Db>> openPostgres(const std::string& uri);
}  // namespace detail

}  // namespace eq::store
