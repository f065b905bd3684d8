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
// it, and its commit rolls back and answers 503.
//
// Ownership and threads: a Db is one connection, owned by one thread at a
// time (in practice, each process's database thread opens its own). Its
// prepared statements are cached for its lifetime, keyed by their text.
// A Transaction borrows a Db for one scope.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

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

// `?` outside quotes and comments numbered $1, $2...: the PostgreSQL form
// of a statement.
std::string numberPlaceholders(std::string_view sql);

// A value bound to a placeholder.
using Value = std::variant<std::nullptr_t, int64_t, double, std::string_view>;

// One row of a result, valid only during the callback that receives it.
class Row {
 public:
  virtual ~Row() = default;
  virtual int columns() const = 0;
  virtual bool isNull(int col) const = 0;
  virtual int64_t int64(int col) const = 0;  // 0 for NULL
  virtual double real(int col) const = 0;    // 0 for NULL
  virtual std::string_view text(int col) const = 0;  // "" for NULL
};

using RowFn = std::function<void(const Row&)>;

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
  virtual Result<int64_t> exec(const Sql& sql, std::initializer_list<Value> values = {},
                               const RowFn& onRow = {}) = 0;
  // Runs statements without values, separated by ';' (a schema, a
  // migration), in the engine's own text.
  virtual Status script(std::string_view sql) = 0;

  // Transaction control, for Transaction below.
  virtual Status begin() = 0;
  virtual Status commit() = 0;
  virtual void rollback() = 0;

 protected:
  Db() = default;
};

// A transaction for one scope: begun at construction (see status()),
// rolled back at destruction unless commit() succeeded.
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
    Status st = db_.commit();
    committed_ = st.isOk();
    return st;
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
