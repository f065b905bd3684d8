// The database seam over PostgreSQL (store/db.h), through libpq: one
// connection, server-side prepared statements, values and rows as text.
#include <libpq-fe.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/db.h"

namespace eq::store::detail {
namespace {

// libpq's messages end in a newline.
std::string trimmed(std::string msg) {
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  return msg;
}

// What a statement may take before the server cancels it (a 503): longer
// than any statement of ours, short enough that a stuck lock is answered.
constexpr const char* kStatementTimeout = "SET statement_timeout = '10s'";

// The Status of a failed statement from its SQLSTATE: integrity (class 23)
// is 409; what may pass (connection, resources, operator intervention,
// serialization and deadlock, lock not available, a cancelled statement)
// 503; the rest 500.
Status statusOf(const PGresult* res, PGconn* conn, std::string_view what) {
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string msg = std::string(what) + ": ";
  const char* text = res != nullptr ? PQresultErrorMessage(res) : PQerrorMessage(conn);
  msg = trimmed(msg + ((text != nullptr && *text != '\0') ? text : PQerrorMessage(conn)));
  if (state == nullptr || PQstatus(conn) != CONNECTION_OK) return Status(503, std::move(msg));
  const std::string_view s(state);
  if (s.starts_with("23")) return Status(409, std::move(msg));
  // 25P02: a statement of this transaction failed before (the seam's rule
  // on both engines: roll it back).
  if (s.starts_with("08") || s.starts_with("53") || s.starts_with("57") || s == "40001" ||
      s == "40P01" || s == "55P03" || s == "25P02") {
    return Status(503, std::move(msg));
  }
  return Status(500, std::move(msg));
}

class PgRow final : public Row {
 public:
  PgRow(const PGresult* res, int row) : res_(res), row_(row) {}
  int columns() const override { return PQnfields(res_); }
  bool isNull(int col) const override { return PQgetisnull(res_, row_, col) != 0; }
  int64_t int64(int col) const override {
    const std::string_view t = text(col);
    int64_t v = 0;
    std::from_chars(t.data(), t.data() + t.size(), v);
    return v;
  }
  double real(int col) const override {
    return isNull(col) ? 0 : std::strtod(PQgetvalue(res_, row_, col), nullptr);
  }
  std::string_view text(int col) const override {
    if (isNull(col)) return {};
    return {PQgetvalue(res_, row_, col), static_cast<size_t>(PQgetlength(res_, row_, col))};
  }

 private:
  const PGresult* res_;
  int row_;
};

// Frees a PGresult at the end of a scope.
struct ResultFree {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultFree>;

class PostgresDb final : public Db {
 public:
  explicit PostgresDb(PGconn* conn) : conn_(conn) {}
  ~PostgresDb() override { PQfinish(conn_); }

  DbEngine engine() const override { return DbEngine::kPostgres; }

  Result<int64_t> exec(const Sql& sql, std::initializer_list<Value> values,
                       const RowFn& onRow) override {
    Result<int64_t> out = run(sql, values, onRow);
    if (!out.isOk() && in_transaction_) failed_ = true;
    return out;
  }

  Status script(std::string_view sql) override {
    if (Status st = ready(); !st.isOk()) return st;
    const std::string text(sql);
    PgResult res(PQexec(conn_, text.c_str()));
    const ExecStatusType status = PQresultStatus(res.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      if (in_transaction_) failed_ = true;
      return statusOf(res.get(), conn_, "script");
    }
    return Status::ok();
  }

  Status begin() override {
    if (in_transaction_) return Status(500, "postgres: a transaction is open");
    Status st = script("BEGIN");
    in_transaction_ = st.isOk();
    failed_ = false;
    return st;
  }
  Status commit() override {
    if (!in_transaction_) return Status(500, "postgres: commit without a transaction");
    in_transaction_ = false;
    if (PQstatus(conn_) != CONNECTION_OK) {
      return Status(503, "postgres: the connection was lost during the transaction");
    }
    if (failed_) {
      PgResult res(PQexec(conn_, "ROLLBACK"));
      return Status(503, "postgres: a statement of the transaction failed; rolled back");
    }
    PgResult res(PQexec(conn_, "COMMIT"));
    if (PQresultStatus(res.get()) != PGRES_COMMAND_OK) return statusOf(res.get(), conn_, "commit");
    // COMMIT of a transaction an error aborted succeeds as a ROLLBACK.
    if (std::string_view(PQcmdStatus(res.get())) == "ROLLBACK") {
      return Status(503, "postgres: the transaction was rolled back");
    }
    return Status::ok();
  }
  void rollback() override {
    in_transaction_ = false;
    if (PQstatus(conn_) == CONNECTION_OK && PQtransactionStatus(conn_) != PQTRANS_IDLE) {
      PgResult res(PQexec(conn_, "ROLLBACK"));
    }
  }

  // The session settings every connection (and every reconnection) needs.
  Status setUp() { return script(kStatementTimeout); }

 private:
  // A lost connection is reopened here, by the next statement; its prepared
  // statements went with it.
  Result<int64_t> run(const Sql& sql, std::initializer_list<Value> values, const RowFn& onRow) {
    if (Status st = ready(); !st.isOk()) return st;
    // Keyed by the text that runs, not by its address: two statements that
    // differ only in their PostgreSQL text, or a text built at run time,
    // can never share a prepared statement.
    const std::string text = numberPlaceholders(sql.postgres.empty() ? sql.sqlite : sql.postgres);
    auto it = prepared_.find(text);
    if (it == prepared_.end()) {
      // Names are never reused on a connection, even after a failure.
      Prepared p{"eq" + std::to_string(next_name_++), 0};
      PgResult res(PQprepare(conn_, p.name.c_str(), text.c_str(), 0, nullptr));
      if (PQresultStatus(res.get()) != PGRES_COMMAND_OK) return statusOf(res.get(), conn_, "prepare");
      PgResult described(PQdescribePrepared(conn_, p.name.c_str()));
      if (PQresultStatus(described.get()) != PGRES_COMMAND_OK) {
        return statusOf(described.get(), conn_, "describe");
      }
      p.params = PQnparams(described.get());
      it = prepared_.emplace(text, std::move(p)).first;
    }
    if (static_cast<int>(values.size()) != it->second.params) {
      return Status(500, "postgres: " + std::to_string(values.size()) + " values for " +
                             std::to_string(it->second.params) + " placeholders");
    }
    // Values as text: numbers in their shortest exact form.
    std::vector<std::string> texts;
    std::vector<const char*> params;
    texts.reserve(values.size());
    for (const Value& v : values) {
      if (std::holds_alternative<std::nullptr_t>(v)) {
        texts.emplace_back();
      } else if (const auto* n = std::get_if<int64_t>(&v)) {
        texts.push_back(std::to_string(*n));
      } else if (const auto* d = std::get_if<double>(&v)) {
        char buf[32];
        const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, *d);
        texts.emplace_back(buf, ec == std::errc() ? end : buf);
      } else {
        texts.emplace_back(std::get<std::string_view>(v));
      }
    }
    size_t i = 0;
    for (const Value& v : values) {
      params.push_back(std::holds_alternative<std::nullptr_t>(v) ? nullptr : texts[i].c_str());
      ++i;
    }
    PgResult res(PQexecPrepared(conn_, it->second.name.c_str(), static_cast<int>(params.size()),
                                params.data(), nullptr, nullptr, 0));
    const ExecStatusType status = PQresultStatus(res.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      return statusOf(res.get(), conn_, "statement");
    }
    if (onRow) {
      const int rows = PQntuples(res.get());
      for (int r = 0; r < rows; ++r) onRow(PgRow(res.get(), r));
    }
    // Rows changed: an INSERT, UPDATE or DELETE says how many; a SELECT
    // (whose tag also counts rows) changed none.
    if (std::string_view(PQcmdStatus(res.get())).starts_with("SELECT")) return int64_t{0};
    const char* changed = PQcmdTuples(res.get());
    return int64_t{changed != nullptr && *changed != '\0' ? std::atoll(changed) : 0};
  }

  // Never inside a transaction: a new connection would run the rest of it
  // in autocommit; the caller rolls back (503) and starts again.
  Status ready() {
    if (PQstatus(conn_) == CONNECTION_OK) return Status::ok();
    if (in_transaction_) {
      failed_ = true;
      return Status(503, "postgres: the connection was lost during the transaction");
    }
    PQreset(conn_);
    prepared_.clear();
    if (PQstatus(conn_) != CONNECTION_OK) {
      return Status(503, trimmed(std::string("postgres: connection lost: ") + PQerrorMessage(conn_)));
    }
    return setUp();
  }

  struct Prepared {
    std::string name;  // the server-side statement's name
    int params;        // its placeholders
  };
  PGconn* conn_;
  std::unordered_map<std::string, Prepared> prepared_;  // keyed by the text that runs
  uint64_t next_name_ = 0;
  bool in_transaction_ = false;
  bool failed_ = false;  // a statement of the open transaction failed
};

}  // namespace

Result<std::unique_ptr<Db>> openPostgres(const std::string& uri) {
  // A URI libpq cannot read is the operator's to fix (400), not a server
  // that is down (503).
  char* parseError = nullptr;
  PQconninfoOption* options = PQconninfoParse(uri.c_str(), &parseError);
  if (options == nullptr) {
    Status st(400, trimmed(std::string("bad PostgreSQL URL: ") +
                           (parseError != nullptr ? parseError : "cannot be read")));
    PQfreemem(parseError);
    return st;
  }
  PQconninfoFree(options);
  PGconn* conn = PQconnectdb(uri.c_str());
  if (conn == nullptr) return Status(503, "postgres: out of memory");
  if (PQstatus(conn) != CONNECTION_OK) {
    Status st(503, trimmed(std::string("cannot connect to PostgreSQL: ") + PQerrorMessage(conn)));
    PQfinish(conn);
    return st;
  }
  auto out = std::make_unique<PostgresDb>(conn);
  if (Status st = out->setUp(); !st.isOk()) return st;
  return std::unique_ptr<Db>(std::move(out));
}

}  // namespace eq::store::detail
