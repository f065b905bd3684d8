// The database seam over PostgreSQL (store/db.h), through libpq: one
// connection, server-side prepared statements, values and rows as text.
#include <libpq-fe.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
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

// The session settings of every connection: what a statement may take
// before the server cancels it (a 503: longer than any statement of ours,
// short enough that a stuck lock is answered), and bytea written in hex,
// which PgRow::blob reads, whatever the server's default.
constexpr const char* kSessionSettings = "SET statement_timeout = '10s'; SET bytea_output = 'hex'";
// A row lock held longer than this by another connection fails the
// statement waiting for it (a 503) unless setLockTimeout says otherwise.
constexpr int kDefaultLockTimeoutMs = 5000;
// The most statements held before they are sent without waiting for a
// statement that waits: a pipeline is written whole before its answers are
// read, so it must stay well within what the socket buffers hold while the
// server answers (a few kilobytes of command tags here), or both sides
// would wait on a full buffer.
constexpr size_t kMaxHeld = 64;
// How long opening (or reopening) a connection may take when the URL does
// not say (libpq's connect_timeout; its own default is to wait for ever):
// a server that cannot be reached answers 503 rather than hanging.
constexpr const char* kConnectTimeoutS = "3";

// A connection that can never work as configured: a value libpq refuses
// before it reaches any server (a port that is no number, an sslmode it
// does not know), or a server that answered and refused for good (a wrong
// password, no pg_hba.conf entry, a role or database that does not exist,
// no permission). The operator's to fix, not worth trying again; anything
// else (a server down, starting, shutting down, full, a timeout) passes.
// libpq reports these only as text, in English unless the server's
// lc_messages says otherwise: an unknown text is taken for one that passes.
bool refusedForGood(PGconn* conn, std::string_view msg) {
  if (PQconnectionNeedsPassword(conn) != 0) return true;
  for (std::string_view lasting :
       {"for connection option", "invalid sslmode", "invalid connection option",
        "password authentication failed", "no pg_hba.conf entry", "does not exist",
        "permission denied", "authentication method"}) {
    if (msg.find(lasting) != std::string_view::npos) return true;
  }
  return false;
}

// The Status of a failed statement from its SQLSTATE: integrity (class 23)
// is 409; what may pass (connection, resources, operator intervention,
// serialization and deadlock, lock not available, a cancelled statement)
// 503; the rest 500.
Status statusOf(const PGresult* res, PGconn* conn, std::string_view what, bool* storage = nullptr) {
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string msg = std::string(what) + ": ";
  const char* text = res != nullptr ? PQresultErrorMessage(res) : PQerrorMessage(conn);
  msg = trimmed(msg + ((text != nullptr && *text != '\0') ? text : PQerrorMessage(conn)));
  if (state == nullptr || PQstatus(conn) != CONNECTION_OK) return Status(503, std::move(msg));
  const std::string_view s(state);
  // disk_full, io_error: the storage failure of store/db.h.
  if (storage != nullptr) *storage = s == "53100" || s == "58030";
  if (s.starts_with("23")) return Status(409, std::move(msg));
  // 25P02: a statement of this transaction failed before (the seam's rule
  // on both engines: roll it back).
  if (s.starts_with("08") || s.starts_with("53") || s.starts_with("57") || s == "40001" ||
      s == "40P01" || s == "55P03" || s == "25P02") {
    return Status(503, std::move(msg));
  }
  return Status(500, std::move(msg));
}

// bytea's type OID (catalog/pg_type_d.h, stable across versions).
constexpr Oid kByteaOid = 17;

class PgRow final : public Row {
 public:
  PgRow(const PGresult* res, int row) : res_(res), row_(row) {}
  int columns() const override { return PQnfields(res_); }
  bool isNull(int col) const override { return PQgetisnull(res_, row_, col) != 0; }
  int64_t int64(int col) const override {
    const std::string_view t = text(col);
    if (t == "t") return 1;  // a boolean
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
  // A bytea comes as text in hex (\x0a1b...).
  std::string blob(int col) const override {
    const std::string_view t = text(col);
    if (PQftype(res_, col) != kByteaOid || !t.starts_with("\\x")) return std::string(t);
    std::string out;
    out.reserve((t.size() - 2) / 2);
    const auto nibble = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
    for (size_t i = 2; i + 1 < t.size(); i += 2) {
      out.push_back(static_cast<char>(nibble(t[i]) << 4 | nibble(t[i + 1])));
    }
    return out;
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

  void setBusyTimeout(int) override {}  // BEGIN takes no lock here

  // Set now and again on every reconnection. A failure now (the connection
  // is gone) is the next statement's to report.
  Status backupTo(const std::string&, bool) override {
    return Status(400,
                  "a PostgreSQL store is backed up with pg_dump: (umask 077; pg_dump "
                  "--format=custom --file=\"eq-$(date +%F).dump\" \"$EQ_DB_URL\") "
                  "(docs/operations.md, \"Backing up PostgreSQL\")");
  }

  void setLockTimeout(int ms) override {
    lock_timeout_ms_ = ms;
    needs_setup_ = true;  // applied by the next statement outside a transaction
  }

  // The session settings every connection (and every reconnection) needs;
  // until they took, every statement outside a transaction tries again.
  Status setUp() {
    Status st = runScript(std::string(kSessionSettings) +
                          "; SET lock_timeout = " + std::to_string(lock_timeout_ms_));
    needs_setup_ = !st.isOk();
    return st;
  }

 protected:
  Status runScript(std::string_view sql) override {
    if (Status st = ready(); !st.isOk()) return st;
    // A script waits for its answer like any statement: what is held goes first.
    if (!held_.empty()) exchange(std::nullopt);
    const std::string text(sql);
    PgResult res(PQexec(conn_, text.c_str()));
    const ExecStatusType status = PQresultStatus(res.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      return failure(res.get(), "script");
    }
    return Status::ok();
  }

  // BEGIN, SAVEPOINT and RELEASE are held and sent with the next statement
  // that waits for an answer (they fail only on a lost connection or in a
  // transaction already aborted, and then every level is spoiled: see
  // Db::noteHeld); COMMIT, ROLLBACK and ROLLBACK TO are sent at once, with
  // whatever is held before them.
  Status control(Control op, size_t depth) override {
    std::string text = controlText(op, depth, "BEGIN");
    if (op != Control::kBegin && PQstatus(conn_) != CONNECTION_OK) {
      forgetHeld();  // the transaction they belonged to is gone
      return Status(503, "postgres: the connection was lost during the transaction");
    }
    if (op == Control::kBegin) {
      if (Status st = ready(); !st.isOk()) return st;
      begin_held_ = true;
    }
    if (op == Control::kBegin || op == Control::kSavepoint || op == Control::kRelease) {
      held_.push_back(Held{std::move(text), {}, true});
      return Status::ok();
    }
    Result<PgResult> res = exchange(Held{text, {}, true});
    if (!res.isOk()) return res.status();
    if (PQresultStatus(res.value().get()) != PGRES_COMMAND_OK) {
      return failure(res.value().get(), text);
    }
    // COMMIT of a transaction an error aborted succeeds as a ROLLBACK.
    if (op == Control::kCommit && std::string_view(PQcmdStatus(res.value().get())) == "ROLLBACK") {
      return Status(503, "postgres: the transaction was rolled back");
    }
    return Status::ok();
  }

  // Held, as a statement the caller does not wait for (Db::queue).
  Status hold(const Sql& sql, std::span<const Value> values) override {
    Result<const Prepared*> p = preparedFor(sql, values);
    if (!p.isOk()) return p.status();
    held_.push_back(Held{p.value()->name, encode(values), false});
    if (held_.size() >= kMaxHeld) exchange(std::nullopt);
    return Status::ok();
  }

  void sendHeld() override {
    bool any_change = false;
    for (const Held& h : held_) any_change = any_change || !h.control;
    if (any_change) exchange(std::nullopt);
  }

  Status relax() override {
    held_.push_back(Held{"SET LOCAL synchronous_commit = off", {}, true});
    return Status::ok();
  }

  bool transactionOpen() const override {
    if (begin_held_) return true;  // BEGIN is held, not sent yet
    const PGTransactionStatusType t = PQtransactionStatus(conn_);
    return t == PQTRANS_INTRANS || t == PQTRANS_INERROR || t == PQTRANS_ACTIVE;
  }

  // A lost connection is reopened here, by the next statement; its prepared
  // statements went with it.
  Result<int64_t> run(const Sql& sql, std::span<const Value> values, const RowFn& onRow) override {
    if (Status st = ready(); !st.isOk()) return st;
    Result<const Prepared*> p = preparedFor(sql, values);
    if (!p.isOk()) return p.status();
    Result<PgResult> res = exchange(Held{p.value()->name, encode(values), false});
    if (!res.isOk()) return res.status();
    const ExecStatusType status = PQresultStatus(res.value().get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      return failure(res.value().get(), "statement");
    }
    if (onRow) {
      const int rows = PQntuples(res.value().get());
      for (int r = 0; r < rows; ++r) {
        const PgRow row(res.value().get(), r);
        onRow(row);
        if (row.stopped()) break;
      }
    }
    return changedRows(res.value().get());
  }

 private:
  struct Prepared {
    std::string name;  // the server-side statement's name
    int params;        // its placeholders
  };

  // Values as libpq takes them: text (numbers in their shortest exact
  // form), bytes as bytes, NULL as no pointer.
  struct Params {
    std::vector<std::string> texts;
    std::vector<char> null;
    std::vector<int> formats;
  };

  // A statement to send: a prepared one with its values, or a
  // transaction-control text without any.
  struct Held {
    std::string text;  // the prepared statement's name, or the control text
    Params params;
    bool control;
  };

  static Params encode(std::span<const Value> values) {
    Params out;
    out.texts.reserve(values.size());
    for (const Value& v : values) {
      int format = 0;
      out.null.push_back(std::holds_alternative<std::nullptr_t>(v) ? 1 : 0);
      if (std::holds_alternative<std::nullptr_t>(v)) {
        out.texts.emplace_back();
      } else if (const auto* n = std::get_if<int64_t>(&v)) {
        out.texts.push_back(std::to_string(*n));
      } else if (const auto* d = std::get_if<double>(&v)) {
        char buf[32];
        const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, *d);
        out.texts.emplace_back(buf, ec == std::errc() ? end : buf);
      } else if (const auto* b = std::get_if<Blob>(&v)) {
        out.texts.emplace_back(b->bytes);
        format = 1;
      } else {
        out.texts.emplace_back(std::get<std::string_view>(v));
      }
      out.formats.push_back(format);
    }
    return out;
  }

  // Rows changed: an INSERT, UPDATE or DELETE says how many; a SELECT
  // (whose tag also counts rows) changed none.
  static int64_t changedRows(const PGresult* res) {
    if (std::string_view(PQcmdStatus(const_cast<PGresult*>(res))).starts_with("SELECT")) return 0;
    const char* changed = PQcmdTuples(const_cast<PGresult*>(res));
    return changed != nullptr && *changed != '\0' ? std::atoll(changed) : 0;
  }

  // The server-side statement for this text, prepared on first use. Keyed
  // by the text written (PostgreSQL's where it has one), numbered only when
  // prepared: two statements that differ only in their PostgreSQL text, or
  // a text built at run time, never share a prepared statement, and a
  // statement that runs again costs one lookup.
  Result<const Prepared*> preparedFor(const Sql& sql, std::span<const Value> values) {
    const std::string_view source = sql.postgres.empty() ? sql.sqlite : sql.postgres;
    auto it = prepared_.find(source);
    if (it == prepared_.end()) {
      Result<Prepared> p = prepare(source, values);
      if (!p.isOk()) return p.status();
      it = prepared_.emplace(std::string(source), std::move(p).value()).first;
    }
    if (static_cast<int>(values.size()) != it->second.params) {
      return Status(500, "postgres: " + std::to_string(values.size()) + " values for " +
                             std::to_string(it->second.params) + " placeholders");
    }
    return &it->second;
  }

  bool send(const Held& h) {
    if (h.control) {
      return PQsendQueryParams(conn_, h.text.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0) ==
             1;
    }
    const Params& p = h.params;
    std::vector<const char*> values;
    std::vector<int> lengths;
    for (size_t i = 0; i < p.texts.size(); ++i) {
      values.push_back(p.null[i] != 0 ? nullptr : p.texts[i].data());
      lengths.push_back(static_cast<int>(p.texts[i].size()));
    }
    return PQsendQueryPrepared(conn_, h.text.c_str(), static_cast<int>(values.size()),
                               values.data(), lengths.data(), p.formats.data(), 0) == 1;
  }

  // One round trip: everything held, then `last` (when given), in one
  // pipeline; each held statement's outcome goes to Db::noteHeld, and
  // last's result is returned. A held statement that fails makes the server
  // skip the rest up to the pipeline's end: those (last too) fail with it.
  // Nothing held and a last to send: the plain exchange, no pipeline.
  Result<PgResult> exchange(std::optional<Held> last) {
    std::vector<Held> held;
    held.swap(held_);
    begin_held_ = false;
    if (held.empty()) {
      if (!last) return PgResult();
      if (!send(*last)) return Status(503, lost("send"));
      PgResult res = takeResult();
      if (!res) return Status(503, lost("statement"));
      return res;
    }
    if (PQenterPipelineMode(conn_) != 1) return broken(lost("pipeline"));
    bool sent = true;
    for (const Held& h : held) sent = sent && send(h);
    if (last) sent = sent && send(*last);
    // The sync point even after a failed send: the drain below reads up to
    // it, and without one it would wait for answers never asked for.
    const bool synced = PQpipelineSync(conn_) == 1;
    if (!sent || !synced) {
      const std::string why = lost("send");
      drainPipeline();
      return broken(why);
    }
    for (const Held& h : held) {
      PgResult res = takeResult();
      const ExecStatusType st = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
      const bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
      std::string why;
      if (!ok && st != PGRES_PIPELINE_ABORTED) {
        why = res ? failure(res.get(), "statement").msg() : lost("statement");
      }
      noteHeld(ok, ok ? changedRows(res.get()) : 0, h.control, why);
    }
    Result<PgResult> out = PgResult();
    if (last) {
      PgResult res = takeResult();
      if (!res) {
        out = Status(503, lost("statement"));
      } else if (PQresultStatus(res.get()) == PGRES_PIPELINE_ABORTED) {
        out = Status(503, "postgres: a statement sent before this one failed");
      } else {
        out = std::move(res);
      }
    }
    drainPipeline();
    return out;
  }

  // The result of the next statement sent, read up to the NULL that ends
  // it (in a pipeline, one statement's; outside, the last of several, as
  // libpq's PQexec keeps); null when none came (a lost connection).
  PgResult takeResult() {
    PgResult res(PQgetResult(conn_));
    if (!res) return res;
    while (PGresult* extra = PQgetResult(conn_)) res.reset(extra);
    return res;
  }

  // Reads up to the pipeline's sync point and leaves pipeline mode. A lost
  // connection leaves it too, when it is reset.
  void drainPipeline() {
    while (PQpipelineStatus(conn_) != PQ_PIPELINE_OFF && PQstatus(conn_) == CONNECTION_OK) {
      PgResult res(PQgetResult(conn_));
      if (res && PQresultStatus(res.get()) == PGRES_PIPELINE_SYNC) {
        PQexitPipelineMode(conn_);
        return;
      }
      if (!res && PQexitPipelineMode(conn_) == 1) return;
    }
  }

  // The held statements could not be sent: each fails, and with the
  // control statements among them, every level is spoiled.
  Status broken(const std::string& why) {
    noteHeld(false, 0, /*control=*/true, why);
    return Status(503, why);
  }

  void forgetHeld() {
    held_.clear();
    begin_held_ = false;
  }

  std::string lost(std::string_view what) const {
    return trimmed("postgres: " + std::string(what) + ": " + PQerrorMessage(conn_));
  }

  // Prepares the statement. Bytes are declared bytea (they are sent in
  // binary); every other parameter's type the server infers from where it
  // stands, so a statement where it cannot (`SELECT ?` inserted into a
  // bigint column) casts it in its PostgreSQL text. Declaring numbers as
  // bigint would break calls of functions that take an integer.
  Result<Prepared> prepare(std::string_view source, std::span<const Value> values) {
    const std::string text = numberPlaceholders(source);
    std::vector<Oid> types;
    for (const Value& v : values) {
      types.push_back(std::holds_alternative<Blob>(v) ? kByteaOid : Oid{0});
    }
    // Names are never reused on a connection, even after a failure.
    Prepared p{"eq" + std::to_string(next_name_++), 0};
    PgResult res(PQprepare(conn_, p.name.c_str(), text.c_str(), static_cast<int>(types.size()),
                           types.data()));
    if (PQresultStatus(res.get()) != PGRES_COMMAND_OK) return failure(res.get(), "prepare");
    PgResult described(PQdescribePrepared(conn_, p.name.c_str()));
    if (PQresultStatus(described.get()) != PGRES_COMMAND_OK) {
      return failure(described.get(), "describe");
    }
    p.params = PQnparams(described.get());
    return p;
  }

  Status failure(const PGresult* res, std::string_view what) {
    bool storage = false;
    Status st = statusOf(res, conn_, what, &storage);
    if (storage) noteStorageFailure(st.msg());
    return st;
  }

  // Never inside a transaction: a new connection would run the rest of it
  // in autocommit; the caller rolls back (503) and starts again.
  Status ready() {
    if (PQstatus(conn_) == CONNECTION_OK) {
      if (!needs_setup_ || depth() > 0 || in_setup_) return Status::ok();
      return applySettings();
    }
    if (depth() > 0) {
      return Status(503, "postgres: the connection was lost during the transaction");
    }
    PQreset(conn_);
    prepared_.clear();
    forgetHeld();
    if (PQstatus(conn_) != CONNECTION_OK) {
      return Status(503,
                    trimmed(std::string("postgres: connection lost: ") + PQerrorMessage(conn_)));
    }
    return applySettings();
  }

  // setUp from ready(): its own statement must not come back here.
  Status applySettings() {
    in_setup_ = true;
    Status st = setUp();
    in_setup_ = false;
    return st;
  }

  // Statements by their text, found by a string_view without building a
  // string on every call.
  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  PGconn* conn_;
  int lock_timeout_ms_ = kDefaultLockTimeoutMs;
  bool needs_setup_ = false;  // the session settings have not taken yet
  bool in_setup_ = false;     // setUp's own statement is running
  std::vector<Held> held_;    // sent with the next statement that waits (Db::queue)
  bool begin_held_ = false;   // held_ opens the transaction
  std::unordered_map<std::string, Prepared, TextHash, std::equal_to<>> prepared_;
  uint64_t next_name_ = 0;
};

}  // namespace

Result<std::unique_ptr<Db>> openPostgres(const std::string& uri) {
  // A URI libpq cannot read is the operator's to fix (400), not a server
  // that is down (503).
  // libpq's words about a URL it cannot read may quote the password
  // ("invalid percent-encoded token: ..."): never passed on.
  char* parseError = nullptr;
  PQconninfoOption* options = PQconninfoParse(uri.c_str(), &parseError);
  if (options == nullptr) {
    PQfreemem(parseError);
    return Status(400,
                  "the PostgreSQL URL cannot be read (postgresql://USER:PASSWORD@HOST:PORT/DB; "
                  "percent-encode any of :/?#[]@% in the password)");
  }
  PQconninfoFree(options);
  // Keywords in order, the later winning: the URL's own connect_timeout,
  // if it has one, over ours.
  // Keepalives and tcp_user_timeout make a server that vanished (a host
  // down, a network cut) an error within seconds, not after TCP's quarter
  // of an hour of retransmissions; statement_timeout, on the server, cannot.
  const char* const keys[] = {
      "connect_timeout",  "keepalives",       "keepalives_idle", "keepalives_interval",
      "keepalives_count", "tcp_user_timeout", "dbname",          nullptr};
  const char* const values[] = {kConnectTimeoutS, "1",         "10",   "5", "3",
                                "15000",          uri.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn == nullptr) return Status(503, "postgres: out of memory");
  if (PQstatus(conn) != CONNECTION_OK) {
    const std::string why = trimmed(PQerrorMessage(conn));
    const bool lasting = refusedForGood(conn, why);
    PQfinish(conn);
    return Status(lasting ? 400 : 503, "cannot connect to PostgreSQL: " + why);
  }
  // Notices (a DROP ... CASCADE listing what went with it) are the server
  // talking to a person at a prompt: libpq would print them on stderr,
  // among the processes' JSON log lines.
  PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);
  auto out = std::make_unique<PostgresDb>(conn);
  if (Status st = out->setUp(); !st.isOk()) return st;
  return std::unique_ptr<Db>(std::move(out));
}

}  // namespace eq::store::detail
