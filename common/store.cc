#include "common/store.h"

#include <string_view>

#include "common/crypto.h"
#include "common/embedded.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/timefmt.h"

namespace eq {
namespace {

// The migrations compiled into the binary, in order. A new migration is a new
// file here and in CMakeLists.txt's eq_embed list; applied ones never change.
constexpr const char* kMigrations[] = {"schema/migrations/001_init.sql",
                                       "schema/migrations/002_contract.sql",
                                       "schema/migrations/003_delivery.sql",
                                       "schema/migrations/004_key_epoch.sql"};

// A cached prepared statement in use: binds by position, steps, reads columns
// and resets itself when it goes out of scope so the cache can reuse it.
class Query {
 public:
  explicit Query(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~Query() {
    if (stmt_ != nullptr) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
  }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  bool valid() const { return stmt_ != nullptr; }

  Query& bind(int i, std::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Query& bindBlob(int i, std::string_view v) {
    sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Query& bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Query& bindNull(int i) {
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  Query& bindOptText(int i, const std::string& v) { return v.empty() ? bindNull(i) : bind(i, v); }

  int step() { return sqlite3_step(stmt_); }

  std::string text(int col) const {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    return p == nullptr ? std::string()
                        : std::string(reinterpret_cast<const char*>(p),
                                      static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)));
  }
  std::string blob(int col) const {
    const void* p = sqlite3_column_blob(stmt_, col);
    return p == nullptr ? std::string()
                        : std::string(static_cast<const char*>(p),
                                      static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)));
  }
  int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }

 private:
  sqlite3_stmt* stmt_;
};

bool validMode(std::string_view mode) { return isModeName(mode); }

}  // namespace

std::string keyStatusAt(const KeyInfo& key, int64_t now_ms) {
  if (key.status == "active" && key.expires_at != 0 && key.expires_at <= now_ms) return "expired";
  return key.status;
}

Result<std::unique_ptr<Store>> Store::open(const std::string& path, int busy_timeout_ms) {
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
  sqlite3_busy_timeout(db, busy_timeout_ms);
  // WAL lets readers run beside one writer across processes; NORMAL sync in
  // WAL mode is durable against process crashes (a power cut may lose the
  // last commits, which the broker's redelivery then repeats).
  for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL",
                             "PRAGMA foreign_keys=ON"}) {
    if (Status s = store->exec(pragma); !s.isOk()) return s;
  }
  if (Status s = store->migrate(); !s.isOk()) return s;
  return store;
}

Store::~Store() {
  for (auto& [sql, stmt] : stmts_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

Status Store::error(const char* what) const {
  return Status(503, std::string(what) + ": " + sqlite3_errmsg(db_));
}

Status Store::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
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
  for (const char* name : kMigrations) {
    if (!s.isOk()) break;
    Query check(prepare("SELECT 1 FROM schema_migrations WHERE version = ?"));
    if (!check.valid()) {
      s = error("prepare");
      break;
    }
    check.bind(1, std::string_view(name));
    if (check.step() == SQLITE_ROW) continue;
    std::string_view sql = embedded::file(name);
    if (sql.empty()) {
      s = Status(500, std::string("migration not embedded: ") + name);
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

Status Store::begin() {
  if (depth_ > 0 && sqlite3_get_autocommit(db_) != 0) depth_ = 0;  // lost to an error
  if (depth_ == 0) {
    if (Status s = exec("BEGIN IMMEDIATE"); !s.isOk()) return s;
  } else {
    std::string sql = "SAVEPOINT sp" + std::to_string(depth_);
    if (Status s = exec(sql.c_str()); !s.isOk()) return s;
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
  if (depth_ > 0) {
    std::string sql = "RELEASE sp" + std::to_string(depth_);
    return exec(sql.c_str());
  }
  Status s = exec("COMMIT");
  // After some errors (SQLITE_FULL, SQLITE_IOERR) the transaction stays
  // open and would keep the write lock from every other process.
  if (!s.isOk() && sqlite3_get_autocommit(db_) == 0) exec("ROLLBACK");
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
    std::string sql = "ROLLBACK TO sp" + std::to_string(depth_);
    Status s = exec(sql.c_str());
    sql = "RELEASE sp" + std::to_string(depth_);
    Status r = exec(sql.c_str());
    return s.isOk() ? r : s;
  }
  return exec("ROLLBACK");
}

bool Store::inTransaction() const { return sqlite3_get_autocommit(db_) == 0; }

Result<int64_t> Store::keyEpoch() {
  Query q(prepare("SELECT epoch FROM key_epoch WHERE id = 1"));
  if (!q.valid()) return error("prepare key epoch");
  if (q.step() != SQLITE_ROW) return error("read key epoch");
  return q.int64(0);
}

void Store::setBusyTimeout(int ms) { sqlite3_busy_timeout(db_, ms); }

Status Store::ping() {
  if (Status s = begin(); !s.isOk()) return s;
  return rollback();
}

// ---------------------------------------------------------------- keys

Result<CreatedKey> Store::createKey(const NewKeyRequest& req) {
  CreatedKey out;
  out.account_id = ids::newAccountId();
  out.key_id = ids::newKeyId();
  std::string secret_part = crypto::base64url(crypto::randomBytes(32));  // 43 chars
  out.api_key = (req.env == "staging" ? "eq_test_" : "eq_live_") + secret_part;
  out.display_prefix = out.api_key.substr(0, 16);  // eq_live_ + 8 chars
  out.webhook_secret = "whsec_" + crypto::base64(crypto::randomBytes(32));
  out.tier = req.tier;
  int64_t now = nowMs();

  if (Status s = begin(); !s.isOk()) return s;
  Query acc(prepare(
      "INSERT INTO accounts (id, name, tier, quota_fast, quota_standard, quota_perfect, "
      "quota_expire_at, rate_limit_per_min, webhook_secret, created_at) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  acc.bind(1, out.account_id).bind(2, req.name).bind(3, req.tier).bind(4, req.quota.fast);
  acc.bind(5, req.quota.standard).bind(6, req.quota.perfect).bind(7, req.expire_at_ms);
  acc.bind(8, int64_t{req.rate_limit_per_min}).bind(9, out.webhook_secret).bind(10, now);
  Status s = acc.step() == SQLITE_DONE ? Status::ok() : error("insert account");
  if (s.isOk()) {
    Query key(prepare(
        "INSERT INTO api_keys (id, account_id, env, display_prefix, key_hash, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)"));
    key.bind(1, out.key_id).bind(2, out.account_id).bind(3, req.env);
    key.bind(4, out.display_prefix).bindBlob(5, crypto::sha256(out.api_key)).bind(6, now);
    if (key.step() != SQLITE_DONE) s = error("insert key");
  }
  if (!s.isOk()) {
    rollback();
    return s;
  }
  if (Status c = commit(); !c.isOk()) return c;
  return out;
}

Result<std::optional<AuthContext>> Store::authenticate(const std::string& api_key,
                                                       const std::string& env, int64_t now_ms) {
  return authenticateDigest(crypto::sha256(api_key), env, now_ms);
}

Result<std::optional<AuthContext>> Store::authenticateDigest(const std::string& digest,
                                                             const std::string& env,
                                                             int64_t now_ms) {
  // The lookup goes through the hash's unique index. Indexing on the digest
  // leaks nothing useful through timing (an attacker cannot steer the digest
  // of a guess), and the constant-time comparison of the fixed-length digests
  // below makes the final decision independent of where they differ.
  Query q(prepare(
      "SELECT k.id, k.account_id, k.display_prefix, k.key_hash, a.rate_limit_per_min, "
      "coalesce(k.expires_at, 0) "
      "FROM api_keys k JOIN accounts a ON a.id = k.account_id "
      "WHERE k.key_hash = ? AND k.status = 'active' AND k.env = ? "
      "AND (k.expires_at IS NULL OR k.expires_at > ?)"));
  if (!q.valid()) return error("prepare authenticate");
  q.bindBlob(1, digest).bind(2, env).bind(3, now_ms);
  int rc = q.step();
  if (rc == SQLITE_DONE) return std::optional<AuthContext>();
  if (rc != SQLITE_ROW) return error("authenticate");
  if (!crypto::constantTimeEqual(q.blob(3), digest)) return std::optional<AuthContext>();
  AuthContext ctx;
  ctx.key_id = q.text(0);
  ctx.account_id = q.text(1);
  ctx.display_prefix = q.text(2);
  ctx.rate_limit_per_min = static_cast<int>(q.int64(4));
  ctx.expires_at_ms = q.int64(5);
  return std::optional<AuthContext>(std::move(ctx));
}

Result<std::vector<KeyInfo>> Store::listKeys() {
  Query q(prepare(
      "SELECT k.id, k.account_id, a.name, k.env, k.display_prefix, k.status, a.tier, "
      "k.created_at, coalesce(k.expires_at, 0) "
      "FROM api_keys k JOIN accounts a ON a.id = k.account_id ORDER BY k.id"));
  if (!q.valid()) return error("prepare list keys");
  std::vector<KeyInfo> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    out.push_back(KeyInfo{q.text(0), q.text(1), q.text(2), q.text(3), q.text(4), q.text(5),
                          q.text(6), q.int64(7), q.int64(8)});
  }
  if (rc != SQLITE_DONE) return error("list keys");
  return out;
}

Status Store::revokeKey(const std::string& key_id) {
  Query q(prepare(
      "UPDATE api_keys SET status = 'revoked', revoked_at = ? WHERE id = ? AND status = 'active'"));
  q.bind(1, nowMs()).bind(2, key_id);
  if (q.step() != SQLITE_DONE) return error("revoke key");
  if (sqlite3_changes(db_) == 0) return Status(404, "no active key with id " + key_id);
  return Status::ok();
}

Result<KeyDetails> Store::keyDetails(const std::string& key_id) {
  Query q(prepare(
      "SELECT k.id, k.account_id, a.name, k.env, k.display_prefix, k.status, a.tier, "
      "k.created_at, coalesce(k.expires_at, 0), coalesce(k.revoked_at, 0), "
      "coalesce(k.rotated_to, ''), a.rate_limit_per_min, coalesce(a.default_webhook_url, ''), "
      "a.quota_fast, a.quota_standard, a.quota_perfect, a.quota_expire_at "
      "FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.id = ?"));
  if (!q.valid()) return error("prepare key details");
  q.bind(1, key_id);
  int rc = q.step();
  if (rc == SQLITE_DONE) return Status(404, "no key with id " + key_id);
  if (rc != SQLITE_ROW) return error("key details");
  KeyDetails d;
  d.key = KeyInfo{q.text(0), q.text(1), q.text(2), q.text(3), q.text(4),
                  q.text(5), q.text(6), q.int64(7), q.int64(8)};
  d.revoked_at = q.int64(9);
  d.rotated_to = q.text(10);
  d.rate_limit_per_min = static_cast<int>(q.int64(11));
  d.default_webhook_url = q.text(12);
  d.quota.remaining = QuotaUnits{q.int64(13), q.int64(14), q.int64(15)};
  d.quota.expire_at_ms = q.int64(16);
  d.quota.tier = d.key.tier;
  return d;
}

Result<CreatedKey> Store::rotateKey(const std::string& key_id,
                                    std::optional<int64_t> expires_at_ms, int64_t now_ms) {
  if (Status s = begin(); !s.isOk()) return s;
  CreatedKey out;
  Status s;
  {
    // Read inside the transaction: a concurrent revoke or rotation of the
    // same key either happens before (and we answer 404) or waits for us.
    Query old(prepare(
        "SELECT k.account_id, k.env, coalesce(k.expires_at, 0), a.tier "
        "FROM api_keys k JOIN accounts a ON a.id = k.account_id "
        "WHERE k.id = ? AND k.status = 'active'"));
    old.bind(1, key_id);
    int rc = old.step();
    if (rc == SQLITE_DONE) {
      s = Status(404, "no active key with id " + key_id);
    } else if (rc != SQLITE_ROW) {
      s = error("read key to rotate");
    } else {
      std::string env = old.text(1);
      int64_t expires = expires_at_ms ? *expires_at_ms : old.int64(2);
      out.account_id = old.text(0);
      out.tier = old.text(3);
      out.key_id = ids::newKeyId();
      out.api_key = (env == "staging" ? "eq_test_" : "eq_live_") +
                    crypto::base64url(crypto::randomBytes(32));
      out.display_prefix = out.api_key.substr(0, 16);
      Query key(prepare(
          "INSERT INTO api_keys (id, account_id, env, display_prefix, key_hash, created_at, "
          "expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)"));
      key.bind(1, out.key_id).bind(2, out.account_id).bind(3, env);
      key.bind(4, out.display_prefix).bindBlob(5, crypto::sha256(out.api_key)).bind(6, now_ms);
      if (expires != 0) key.bind(7, expires); else key.bindNull(7);
      if (key.step() != SQLITE_DONE) s = error("insert rotated key");
    }
  }
  if (s.isOk()) {
    Query revoke(prepare(
        "UPDATE api_keys SET status = 'revoked', revoked_at = ?, rotated_to = ? "
        "WHERE id = ? AND status = 'active'"));
    revoke.bind(1, now_ms).bind(2, out.key_id).bind(3, key_id);
    if (revoke.step() != SQLITE_DONE) s = error("revoke rotated key");
  }
  if (!s.isOk()) {
    rollback();
    return s;
  }
  if (Status c = commit(); !c.isOk()) return c;
  return out;
}

Status Store::updateKey(const std::string& key_id, const KeyUpdate& u) {
  // One transaction: the key's expiry is on api_keys, the rest on accounts,
  // and a half-applied `eqctl key set` would be a surprise.
  if (Status s = begin(); !s.isOk()) return s;
  Status s;
  {
    Query acc(prepare(
        "UPDATE accounts SET rate_limit_per_min = coalesce(?1, rate_limit_per_min), "
        "tier = coalesce(?2, tier), "
        "default_webhook_url = CASE WHEN ?3 IS NULL THEN default_webhook_url "
        "WHEN ?3 = '' THEN NULL ELSE ?3 END "
        "WHERE id = (SELECT account_id FROM api_keys WHERE id = ?4)"));
    if (u.rate_limit_per_min) acc.bind(1, int64_t{*u.rate_limit_per_min}); else acc.bindNull(1);
    if (u.tier) acc.bind(2, *u.tier); else acc.bindNull(2);
    if (u.default_webhook_url) acc.bind(3, *u.default_webhook_url); else acc.bindNull(3);
    acc.bind(4, key_id);
    if (acc.step() != SQLITE_DONE) {
      s = error("update account");
    } else if (sqlite3_changes(db_) == 0) {
      s = Status(404, "no key with id " + key_id);
    }
  }
  if (s.isOk() && u.expires_at_ms) {
    Query key(prepare("UPDATE api_keys SET expires_at = ? WHERE id = ?"));
    if (*u.expires_at_ms != 0) key.bind(1, *u.expires_at_ms); else key.bindNull(1);
    key.bind(2, key_id);
    if (key.step() != SQLITE_DONE) s = error("update key expiry");
  }
  if (!s.isOk()) {
    rollback();
    return s;
  }
  return commit();
}

Result<std::string> Store::accountOfKey(const std::string& key_id) {
  Query q(prepare("SELECT account_id FROM api_keys WHERE id = ?"));
  q.bind(1, key_id);
  int rc = q.step();
  if (rc == SQLITE_ROW) return q.text(0);
  if (rc == SQLITE_DONE) return Status(404, "no key with id " + key_id);
  return error("account of key");
}

// ---------------------------------------------------------------- quota

Result<ChargeOutcome> Store::chargeQuota(const std::string& account_id, const std::string& mode,
                                         int64_t now_ms) {
  if (!validMode(mode)) return Status(500, "charge: bad mode " + mode);
  // One statement per mode: column names cannot be bound parameters.
  const char* sql =
      mode == "fast"
          ? "UPDATE accounts SET quota_fast = quota_fast - 1 "
            "WHERE id = ? AND quota_fast > 0 AND quota_expire_at > ?"
      : mode == "standard"
          ? "UPDATE accounts SET quota_standard = quota_standard - 1 "
            "WHERE id = ? AND quota_standard > 0 AND quota_expire_at > ?"
          : "UPDATE accounts SET quota_perfect = quota_perfect - 1 "
            "WHERE id = ? AND quota_perfect > 0 AND quota_expire_at > ?";
  {
    Query q(prepare(sql));
    if (!q.valid()) return error("prepare charge");
    q.bind(1, account_id).bind(2, now_ms);
    if (q.step() != SQLITE_DONE) return error("charge quota");
    if (sqlite3_changes(db_) == 1) return ChargeOutcome::kCharged;
  }
  // Not charged: tell the caller whether it was expiry or exhaustion.
  Result<AccountQuota> q = quota(account_id);
  if (!q.isOk()) return q.status();
  return q.value().expire_at_ms <= now_ms ? ChargeOutcome::kExpired : ChargeOutcome::kExhausted;
}

Status Store::refundQuota(const std::string& account_id, const std::string& mode) {
  if (!validMode(mode)) return Status(500, "refund: bad mode " + mode);
  const char* sql = mode == "fast"
                        ? "UPDATE accounts SET quota_fast = quota_fast + 1 WHERE id = ?"
                    : mode == "standard"
                        ? "UPDATE accounts SET quota_standard = quota_standard + 1 WHERE id = ?"
                        : "UPDATE accounts SET quota_perfect = quota_perfect + 1 WHERE id = ?";
  Query q(prepare(sql));
  q.bind(1, account_id);
  if (q.step() != SQLITE_DONE) return error("refund quota");
  return Status::ok();
}

Result<AccountQuota> Store::quota(const std::string& account_id) {
  Query q(prepare(
      "SELECT quota_fast, quota_standard, quota_perfect, quota_expire_at, tier "
      "FROM accounts WHERE id = ?"));
  if (!q.valid()) return error("prepare quota");
  q.bind(1, account_id);
  int rc = q.step();
  if (rc == SQLITE_DONE) return Status(404, "no account " + account_id);
  if (rc != SQLITE_ROW) return error("read quota");
  AccountQuota out;
  out.remaining = QuotaUnits{q.int64(0), q.int64(1), q.int64(2)};
  out.expire_at_ms = q.int64(3);
  out.tier = q.text(4);
  return out;
}

Status Store::setQuota(const std::string& account_id, const QuotaChange& units,
                       std::optional<int64_t> expire_at_ms, std::optional<std::string> tier) {
  Query q(prepare(
      "UPDATE accounts SET quota_fast = coalesce(?, quota_fast), "
      "quota_standard = coalesce(?, quota_standard), quota_perfect = coalesce(?, quota_perfect), "
      "quota_expire_at = coalesce(?, quota_expire_at), tier = coalesce(?, tier) WHERE id = ?"));
  int slot = 1;
  for (const std::optional<int64_t>& v : {units.fast, units.standard, units.perfect}) {
    if (v) q.bind(slot, *v); else q.bindNull(slot);
    ++slot;
  }
  if (expire_at_ms) q.bind(4, *expire_at_ms); else q.bindNull(4);
  if (tier) q.bind(5, *tier); else q.bindNull(5);
  q.bind(6, account_id);
  if (q.step() != SQLITE_DONE) return error("set quota");
  if (sqlite3_changes(db_) == 0) return Status(404, "no account " + account_id);
  return Status::ok();
}

Status Store::grantQuota(const std::string& account_id, const QuotaUnits& add,
                         std::optional<int64_t> expire_at_ms) {
  Query q(prepare(
      "UPDATE accounts SET quota_fast = quota_fast + ?, quota_standard = quota_standard + ?, "
      "quota_perfect = quota_perfect + ?, quota_expire_at = coalesce(?, quota_expire_at) "
      "WHERE id = ?"));
  q.bind(1, add.fast).bind(2, add.standard).bind(3, add.perfect);
  if (expire_at_ms) q.bind(4, *expire_at_ms); else q.bindNull(4);
  q.bind(5, account_id);
  if (q.step() != SQLITE_DONE) return error("grant quota");
  if (sqlite3_changes(db_) == 0) return Status(404, "no account " + account_id);
  return Status::ok();
}

// ---------------------------------------------------------------- rate limit

Result<RateDecision> Store::countRequest(const AuthContext& auth, int64_t now_ms) {
  // Fixed one-minute windows: simple, exact across processes (the increment
  // is one UPSERT), and the reset time a client sees is the window's end.
  int64_t window = rateWindowStart(now_ms);
  Result<int64_t> count = countRequests(auth.key_id, window, 1);
  if (!count.isOk()) return count.status();
  return rateDecision(auth.rate_limit_per_min, count.value(), window, now_ms);
}

Result<int64_t> Store::countRequests(const std::string& key_id, int64_t window_start, int64_t n) {
  Query q(prepare(
      "INSERT INTO rate_counters (key_id, window_start, count) VALUES (?1, ?2, ?3) "
      "ON CONFLICT (key_id, window_start) DO UPDATE SET count = count + ?3 RETURNING count"));
  if (!q.valid()) return error("prepare rate");
  q.bind(1, key_id).bind(2, window_start).bind(3, n);
  if (q.step() != SQLITE_ROW) return error("count request");
  int64_t count = q.int64(0);
  while (q.step() == SQLITE_ROW) {
  }
  return count;
}

RateDecision Store::rateDecision(int limit, int64_t count, int64_t window_start, int64_t now_ms) {
  RateDecision d;
  d.limit = limit;
  d.allowed = count <= limit;
  d.remaining = static_cast<int>(count >= limit ? 0 : limit - count);
  d.reset_seconds = static_cast<int>((window_start + 60'000 - now_ms + 999) / 1000);
  return d;
}

// ---------------------------------------------------------------- idempotency

Result<IdempotencyBegin> Store::beginIdempotent(const IdempotencyRequest& req, int64_t now_ms) {
  // IMMEDIATE: the read of an existing row and the insert or takeover that
  // follows must not interleave with another process doing the same for a
  // concurrent duplicate, or both would run (and charge).
  if (Status s = begin(); !s.isOk()) return s;
  IdempotencyBegin out;
  Status s;
  {
    Query purge(prepare(
        "DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys "
        "WHERE created_at <= ? ORDER BY created_at LIMIT ?)"));
    purge.bind(1, now_ms - kIdempotencyTtlMs).bind(2, int64_t{kIdempotencyPurgeBatch});
    if (purge.step() != SQLITE_DONE) s = error("purge idempotency keys");
  }
  bool take = false;  // insert or take over the row
  if (s.isOk()) {
    Query q(prepare(
        "SELECT route, body_sha256, state, http_status, coalesce(response_body, ''), created_at "
        "FROM idempotency_keys WHERE account_id = ? AND idem_key = ?"));
    q.bind(1, req.account_id).bind(2, req.key);
    int rc = q.step();
    if (rc == SQLITE_DONE) {
      take = true;
    } else if (rc != SQLITE_ROW) {
      s = error("read idempotency key");
    } else {
      int64_t age = now_ms - q.int64(5);
      bool pending = q.text(2) == "pending";
      if (age >= kIdempotencyTtlMs || (pending && age >= kIdempotencyLeaseMs)) {
        // A lapsed record (the purge batch did not reach it yet) or a pending
        // one whose owner died: the key is free again.
        take = true;
      } else if (q.text(0) != req.route) {
        out.state = IdempotencyState::kConflict;
        out.other_route = true;
      } else if (q.blob(1) != req.body_sha256) {
        out.state = IdempotencyState::kConflict;
      } else if (pending) {
        out.state = IdempotencyState::kInProgress;
      } else {
        out.state = IdempotencyState::kReplay;
        out.http_status = static_cast<int>(q.int64(3));
        out.response_body = q.text(4);
      }
    }
  }
  if (s.isOk() && take) {
    Query ins(prepare(
        "INSERT INTO idempotency_keys (account_id, idem_key, route, body_sha256, state, "
        "request_id, created_at) VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?6) "
        "ON CONFLICT (account_id, idem_key) DO UPDATE SET route = ?3, body_sha256 = ?4, "
        "state = 'pending', request_id = ?5, http_status = NULL, response_body = NULL, "
        "created_at = ?6"));
    ins.bind(1, req.account_id).bind(2, req.key).bind(3, req.route);
    ins.bindBlob(4, req.body_sha256).bind(5, req.request_id).bind(6, now_ms);
    if (ins.step() != SQLITE_DONE) s = error("insert idempotency key");
    out.state = IdempotencyState::kStarted;
  }
  if (!s.isOk()) {
    rollback();
    return s;
  }
  if (Status c = commit(); !c.isOk()) return c;
  return out;
}

Status Store::completeIdempotent(const IdempotencyRequest& req, int http_status,
                                 const std::string& response_body) {
  Query q(prepare(
      "UPDATE idempotency_keys SET state = 'done', http_status = ?, response_body = ? "
      "WHERE account_id = ? AND idem_key = ? AND request_id = ? AND state = 'pending'"));
  q.bind(1, int64_t{http_status}).bind(2, response_body).bind(3, req.account_id);
  q.bind(4, req.key).bind(5, req.request_id);
  if (q.step() != SQLITE_DONE) return error("complete idempotency key");
  return Status::ok();
}

Status Store::abandonIdempotent(const IdempotencyRequest& req) {
  Query q(prepare(
      "DELETE FROM idempotency_keys WHERE account_id = ? AND idem_key = ? AND request_id = ? "
      "AND state = 'pending'"));
  q.bind(1, req.account_id).bind(2, req.key).bind(3, req.request_id);
  if (q.step() != SQLITE_DONE) return error("abandon idempotency key");
  return Status::ok();
}

// ---------------------------------------------------------------- tasks

Status Store::createTask(const TaskRecord& t) {
  Query q(prepare(
      "INSERT INTO tasks (id, account_id, key_id, request_id, mode, status, webhook_url, "
      "created_at) VALUES (?1, ?2, ?3, ?4, ?5, 'queued', "
      "coalesce(?6, (SELECT default_webhook_url FROM accounts WHERE id = ?2)), ?7)"));
  if (!q.valid()) return error("prepare create task");
  q.bind(1, t.task_id).bind(2, t.account_id).bind(3, t.key_id).bind(4, t.request_id);
  q.bind(5, t.mode).bindOptText(6, t.webhook_url).bind(7, t.created_at);
  if (q.step() != SQLITE_DONE) return error("create task");
  return Status::ok();
}

// The columns taskFromRow() reads, in its order; `result` is the result_json
// expression (listings select '' to leave the possibly large result out).
#define EQ_TASK_COLUMNS(result)                                                          \
  "id, account_id, key_id, request_id, mode, status, coalesce(webhook_url, ''), " result \
  ", coalesce(error_code, 0), coalesce(error_msg, ''), created_at, "                  \
  "coalesce(started_at, 0), coalesce(finished_at, 0)"

namespace {

TaskRecord taskFromRow(Query& q) {
  TaskRecord t;
  t.task_id = q.text(0);
  t.account_id = q.text(1);
  t.key_id = q.text(2);
  t.request_id = q.text(3);
  t.mode = q.text(4);
  t.status = q.text(5);
  t.webhook_url = q.text(6);
  t.result_json = q.text(7);
  t.error_code = static_cast<int>(q.int64(8));
  t.error_msg = q.text(9);
  t.created_at = q.int64(10);
  t.started_at = q.int64(11);
  t.finished_at = q.int64(12);
  return t;
}

}  // namespace

Result<std::optional<TaskRecord>> Store::task(const std::string& task_id) {
  Query q(prepare("SELECT " EQ_TASK_COLUMNS("coalesce(result_json, '')") " FROM tasks WHERE id = ?"));
  if (!q.valid()) return error("prepare task");
  q.bind(1, task_id);
  int rc = q.step();
  if (rc == SQLITE_DONE) return std::optional<TaskRecord>();
  if (rc != SQLITE_ROW) return error("read task");
  return std::optional<TaskRecord>(taskFromRow(q));
}

Result<bool> Store::markTaskRunning(const std::string& task_id, int64_t at_ms) {
  // queued -> running; a redelivered task that was already running keeps its
  // first started_at.
  Query q(prepare(
      "UPDATE tasks SET status = 'running', started_at = coalesce(started_at, ?) "
      "WHERE id = ? AND status = 'queued'"));
  q.bind(1, at_ms).bind(2, task_id);
  if (q.step() != SQLITE_DONE) return error("mark running");
  return sqlite3_changes(db_) == 1;
}

Result<bool> Store::markTaskSucceeded(const std::string& task_id, const std::string& result_json,
                                      int64_t at_ms) {
  Query q(prepare(
      "UPDATE tasks SET status = 'succeeded', result_json = ?, finished_at = ?, "
      "started_at = coalesce(started_at, ?) WHERE id = ? AND status IN ('queued', 'running')"));
  q.bind(1, result_json).bind(2, at_ms).bind(3, at_ms).bind(4, task_id);
  if (q.step() != SQLITE_DONE) return error("mark succeeded");
  return sqlite3_changes(db_) == 1;
}

Result<bool> Store::markTaskFailed(const std::string& task_id, int code, const std::string& msg,
                                   int64_t at_ms) {
  if (Status s = begin(); !s.isOk()) return s;
  bool changed = false;
  Status s;
  {
    Query q(prepare(
        "UPDATE tasks SET status = 'failed', error_code = ?, error_msg = ?, finished_at = ?, "
        "charged = 0 WHERE id = ? AND status IN ('queued', 'running') "
        "RETURNING account_id, mode"));
    q.bind(1, int64_t{code}).bind(2, msg).bind(3, at_ms).bind(4, task_id);
    int rc = q.step();
    if (rc == SQLITE_ROW) {
      changed = true;
      // Tasks are created charged and only this transition uncharges them, so
      // the status guard alone says the unit is still held: refund it.
      std::string account = q.text(0), mode = q.text(1);
      while (q.step() == SQLITE_ROW) {
      }
      s = refundQuota(account, mode);
    } else if (rc != SQLITE_DONE) {
      s = error("mark failed");
    }
  }
  if (!s.isOk()) {
    rollback();
    return s;
  }
  if (Status c = commit(); !c.isOk()) return c;
  return changed;
}

Result<std::string> Store::webhookSecret(const std::string& account_id) {
  Query q(prepare("SELECT webhook_secret FROM accounts WHERE id = ?"));
  q.bind(1, account_id);
  int rc = q.step();
  if (rc == SQLITE_ROW) return q.text(0);
  if (rc == SQLITE_DONE) return Status(404, "no account " + account_id);
  return error("webhook secret");
}

// ---------------------------------------------------------------- deliveries

Result<DeliveryRecord> Store::createDelivery(const std::string& task_id, const std::string& url,
                                             const std::string& event, int64_t now_ms) {
  // The task id is unique in deliveries: a second event for the same task
  // (a redelivered message) finds the existing row instead.
  Query q(prepare(
      "INSERT INTO deliveries (id, task_id, url, event, status, created_at, next_attempt_at) "
      "VALUES (?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT (task_id) DO NOTHING"));
  q.bind(1, ids::newDeliveryId()).bind(2, task_id).bind(3, url).bind(4, event);
  q.bind(5, now_ms).bind(6, now_ms);
  if (q.step() != SQLITE_DONE) return error("create delivery");
  Result<std::optional<DeliveryRecord>> d = deliveryForTask(task_id);
  if (!d.isOk()) return d.status();
  if (!d.value()) return Status(500, "delivery vanished for task " + task_id);
  return *d.value();
}

// The columns readDelivery expects, in order, as one literal (statements are
// cached by the literal's address). The last one reads the newest attempt's
// error, a subquery only worth running where a listing shows it.
#define EQ_DELIVERY_COLUMNS                                                                 \
  "id, task_id, url, event, status, attempts, coalesce(last_attempt_at, 0), "              \
  "coalesce(last_status, 0), CASE WHEN status = 'pending' THEN coalesce(next_attempt_at, 0) " \
  "ELSE 0 END, created_at, schedule_offset, coalesce(replayed_at, 0)"
#define EQ_DELIVERY_LAST_ERROR                                                 \
  ", coalesce((SELECT error FROM delivery_attempts a WHERE a.delivery_id = deliveries.id " \
  "ORDER BY a.attempt DESC LIMIT 1), '')"

namespace {

DeliveryRecord readDelivery(const Query& q, bool with_last_error) {
  DeliveryRecord d;
  d.delivery_id = q.text(0);
  d.task_id = q.text(1);
  d.url = q.text(2);
  d.event = q.text(3);
  d.status = q.text(4);
  d.attempts = static_cast<int>(q.int64(5));
  d.last_attempt_at = q.int64(6);
  d.last_status = static_cast<int>(q.int64(7));
  d.next_attempt_at = q.int64(8);
  d.created_at = q.int64(9);
  d.schedule_offset = static_cast<int>(q.int64(10));
  d.replayed_at = q.int64(11);
  if (with_last_error) d.last_error = q.text(12);
  return d;
}

}  // namespace

Result<std::optional<DeliveryRecord>> Store::deliveryForTask(const std::string& task_id) {
  Query q(prepare("SELECT " EQ_DELIVERY_COLUMNS " FROM deliveries WHERE task_id = ?"));
  if (!q.valid()) return error("prepare delivery");
  q.bind(1, task_id);
  int rc = q.step();
  if (rc == SQLITE_DONE) return std::optional<DeliveryRecord>();
  if (rc != SQLITE_ROW) return error("read delivery");
  return std::optional<DeliveryRecord>(readDelivery(q, false));
}

Result<std::optional<DeliveryRecord>> Store::delivery(const std::string& delivery_id) {
  Query q(prepare("SELECT " EQ_DELIVERY_COLUMNS EQ_DELIVERY_LAST_ERROR
                  " FROM deliveries WHERE id = ?"));
  if (!q.valid()) return error("prepare delivery");
  q.bind(1, delivery_id);
  int rc = q.step();
  if (rc == SQLITE_DONE) return std::optional<DeliveryRecord>();
  if (rc != SQLITE_ROW) return error("read delivery");
  return std::optional<DeliveryRecord>(readDelivery(q, true));
}

Result<std::vector<DeliveryRecord>> Store::listDeliveries(const DeliveryFilter& f) {
  // ?1/?2 are NULL when not filtering; SQLite still uses the (status,
  // created_at) index for a given status.
  Query q(prepare("SELECT " EQ_DELIVERY_COLUMNS EQ_DELIVERY_LAST_ERROR
                  " FROM deliveries WHERE (?1 IS NULL OR status = ?1) AND "
                  "(?2 IS NULL OR task_id = ?2) ORDER BY created_at DESC, id DESC LIMIT ?3"));
  if (!q.valid()) return error("prepare list deliveries");
  q.bindOptText(1, f.status).bindOptText(2, f.task_id).bind(3, int64_t{f.limit});
  std::vector<DeliveryRecord> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) out.push_back(readDelivery(q, true));
  if (rc != SQLITE_DONE) return error("list deliveries");
  return out;
}

Result<std::vector<DeliveryAttempt>> Store::deliveryAttempts(const std::string& delivery_id) {
  Query q(prepare(
      "SELECT attempt, at, coalesce(http_status, 0), latency_ms, coalesce(error, '') "
      "FROM delivery_attempts WHERE delivery_id = ? ORDER BY attempt"));
  if (!q.valid()) return error("prepare attempts");
  q.bind(1, delivery_id);
  std::vector<DeliveryAttempt> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    DeliveryAttempt a;
    a.number = static_cast<int>(q.int64(0));
    a.at = q.int64(1);
    a.http_status = static_cast<int>(q.int64(2));
    a.latency_ms = q.int64(3);
    a.error = q.text(4);
    out.push_back(std::move(a));
  }
  if (rc != SQLITE_DONE) return error("read attempts");
  return out;
}

Result<std::vector<DeliveryRecord>> Store::claimDueDeliveries(int64_t now_ms,
                                                              int64_t lease_until_ms, int limit) {
  // A read first: the sender scans every 200 ms, mostly finding nothing,
  // and in WAL mode a read takes no lock while an UPDATE, even of no rows,
  // takes the write lock that eq-api needs.
  {
    Query any(prepare(
        "SELECT 1 FROM deliveries WHERE status = 'pending' AND next_attempt_at <= ? LIMIT 1"));
    if (!any.valid()) return error("prepare due deliveries");
    any.bind(1, now_ms);
    int rc = any.step();
    if (rc == SQLITE_DONE) return std::vector<DeliveryRecord>();
    if (rc != SQLITE_ROW) return error("read due deliveries");
  }
  // One statement, so the claim is atomic across processes: two dispatchers
  // scanning at once never both take a row.
  Query q(prepare(
      "UPDATE deliveries SET next_attempt_at = ?1 WHERE id IN (SELECT id FROM deliveries "
      "WHERE status = 'pending' AND next_attempt_at <= ?2 ORDER BY next_attempt_at LIMIT ?3) "
      "RETURNING " EQ_DELIVERY_COLUMNS));
  if (!q.valid()) return error("prepare claim deliveries");
  q.bind(1, lease_until_ms).bind(2, now_ms).bind(3, int64_t{limit});
  std::vector<DeliveryRecord> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    DeliveryRecord d = readDelivery(q, false);
    d.next_attempt_at = lease_until_ms;
    out.push_back(std::move(d));
  }
  if (rc != SQLITE_DONE) return error("claim deliveries");
  return out;
}

Result<int64_t> Store::countPendingDeliveries() {
  Query q(prepare("SELECT COUNT(*) FROM deliveries WHERE status = 'pending'"));
  if (!q.valid()) return error("prepare count pending deliveries");
  if (q.step() != SQLITE_ROW) return error("count pending deliveries");
  return q.int64(0);
}

Result<bool> Store::finishAttempt(const std::string& delivery_id, const DeliveryAttempt& a,
                                  const std::string& new_status, int64_t next_attempt_at_ms) {
  if (Status s = begin(); !s.isOk()) return s;
  Status s;
  bool applied = false;
  {
    Query up(prepare(
        "UPDATE deliveries SET attempts = attempts + 1, last_attempt_at = ?1, last_status = ?2, "
        "status = ?3, next_attempt_at = CASE WHEN ?3 = 'pending' THEN ?4 ELSE NULL END "
        "WHERE id = ?5 AND status = 'pending' RETURNING attempts"));
    if (!up.valid()) {
      s = error("prepare finish attempt");
    } else {
      up.bind(1, a.at);
      if (a.http_status > 0) up.bind(2, int64_t{a.http_status}); else up.bindNull(2);
      up.bind(3, new_status).bind(4, next_attempt_at_ms).bind(5, delivery_id);
      int rc = up.step();
      if (rc == SQLITE_ROW) {
        applied = true;
        int64_t attempt = up.int64(0);
        while (up.step() == SQLITE_ROW) {
        }
        Query log(prepare(
            "INSERT INTO delivery_attempts (delivery_id, attempt, at, http_status, latency_ms, "
            "error) VALUES (?, ?, ?, ?, ?, ?)"));
        log.bind(1, delivery_id).bind(2, attempt).bind(3, a.at);
        if (a.http_status > 0) log.bind(4, int64_t{a.http_status}); else log.bindNull(4);
        log.bind(5, a.latency_ms).bindOptText(6, a.error);
        if (log.step() != SQLITE_DONE) s = error("log attempt");
      } else if (rc != SQLITE_DONE) {
        s = error("finish attempt");
      }
    }
  }
  if (!s.isOk()) {
    rollback();
    return s;
  }
  if (Status c = commit(); !c.isOk()) return c;
  return applied;
}

Status Store::releaseDelivery(const std::string& delivery_id, int64_t due_ms) {
  Query q(prepare(
      "UPDATE deliveries SET next_attempt_at = ? WHERE id = ? AND status = 'pending'"));
  q.bind(1, due_ms).bind(2, delivery_id);
  if (q.step() != SQLITE_DONE) return error("release delivery");
  return Status::ok();
}

Result<DeliveryRecord> Store::replayDelivery(const std::string& delivery_id, int64_t now_ms) {
  {
    Query q(prepare(
        "UPDATE deliveries SET status = 'pending', next_attempt_at = ?1, replayed_at = ?1, "
        "schedule_offset = attempts WHERE id = ?2 AND status IN ('delivered', 'failed')"));
    q.bind(1, now_ms).bind(2, delivery_id);
    if (q.step() != SQLITE_DONE) return error("replay delivery");
  }
  bool changed = sqlite3_changes(db_) == 1;
  Result<std::optional<DeliveryRecord>> d = delivery(delivery_id);
  if (!d.isOk()) return d.status();
  if (!d.value()) return Status(404, "no delivery " + delivery_id);
  if (!changed) {
    return Status(409, "delivery " + delivery_id + " is already pending (next attempt " +
                           iso8601(d.value()->next_attempt_at) + ")");
  }
  return *d.value();
}

// ---------------------------------------------------------------- retention

Result<int> Store::purgeTasksBefore(int64_t cutoff_ms, int limit) {
  if (Status s = begin(); !s.isOk()) return s;
  Status s;
  std::vector<std::string> ids;
  {
    Query q(prepare(
        "SELECT id FROM tasks WHERE created_at < ? AND NOT EXISTS (SELECT 1 FROM deliveries d "
        "WHERE d.task_id = tasks.id AND d.status = 'pending') ORDER BY created_at LIMIT ?"));
    q.bind(1, cutoff_ms).bind(2, int64_t{limit});
    int rc;
    while ((rc = q.step()) == SQLITE_ROW) ids.push_back(q.text(0));
    if (rc != SQLITE_DONE) s = error("select expired tasks");
  }
  // Children first: foreign keys are enforced (PRAGMA foreign_keys=ON).
  for (const std::string& id : ids) {
    if (!s.isOk()) break;
    Query attempts(prepare(
        "DELETE FROM delivery_attempts WHERE delivery_id IN "
        "(SELECT id FROM deliveries WHERE task_id = ?)"));
    attempts.bind(1, id);
    if (attempts.step() != SQLITE_DONE) {
      s = error("purge attempts");
      break;
    }
    Query delivery(prepare("DELETE FROM deliveries WHERE task_id = ?"));
    delivery.bind(1, id);
    if (delivery.step() != SQLITE_DONE) {
      s = error("purge delivery");
      break;
    }
    Query task(prepare("DELETE FROM tasks WHERE id = ?"));
    task.bind(1, id);
    if (task.step() != SQLITE_DONE) s = error("purge task");
  }
  if (!s.isOk()) {
    rollback();
    return s;
  }
  if (Status c = commit(); !c.isOk()) return c;
  return static_cast<int>(ids.size());
}

Result<int> Store::purgeIdempotencyBefore(int64_t cutoff_ms, int limit) {
  Query q(prepare(
      "DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys "
      "WHERE created_at < ? ORDER BY created_at LIMIT ?)"));
  q.bind(1, cutoff_ms).bind(2, int64_t{limit});
  if (q.step() != SQLITE_DONE) return error("purge idempotency keys");
  return sqlite3_changes(db_);
}

Result<int> Store::purgeRateCountersBefore(int64_t cutoff_ms, int limit) {
  Query q(prepare(
      "DELETE FROM rate_counters WHERE (key_id, window_start) IN (SELECT key_id, window_start "
      "FROM rate_counters WHERE window_start < ? LIMIT ?)"));
  q.bind(1, cutoff_ms).bind(2, int64_t{limit});
  if (q.step() != SQLITE_DONE) return error("purge rate counters");
  return sqlite3_changes(db_);
}

// ---------------------------------------------------------------- eqctl (issue 6)

Result<std::vector<TaskRecord>> Store::listTasks(const TaskFilter& f) {
  // ?n IS NULL switches a filter off. With an account the tasks_account
  // index serves both the filter and the order; otherwise tasks_created does.
  Query q(prepare(
      "SELECT " EQ_TASK_COLUMNS("''") " FROM tasks WHERE (?1 IS NULL OR account_id = ?1) AND "
      "(?2 IS NULL OR status = ?2) AND (?3 IS NULL OR mode = ?3) "
      "ORDER BY created_at DESC, id DESC LIMIT ?4"));
  if (!q.valid()) return error("prepare list tasks");
  q.bindOptText(1, f.account_id).bindOptText(2, f.status).bindOptText(3, f.mode);
  q.bind(4, int64_t{f.limit});
  std::vector<TaskRecord> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    out.push_back(taskFromRow(q));
  }
  if (rc != SQLITE_DONE) return error("list tasks");
  return out;
}

Result<std::vector<Store::TaskTiming>> Store::taskTimingsSince(int64_t since_ms) {
  Query q(
      prepare("SELECT mode, status, created_at, coalesce(started_at, 0), coalesce(finished_at, 0) "
              "FROM tasks WHERE created_at >= ?"));
  if (!q.valid()) return error("prepare task timings");
  q.bind(1, since_ms);
  std::vector<TaskTiming> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    out.push_back(TaskTiming{q.text(0), q.text(1), q.int64(2), q.int64(3), q.int64(4)});
  }
  if (rc != SQLITE_DONE) return error("read task timings");
  return out;
}

Result<std::map<std::string, int64_t>> Store::deliveryCountsSince(int64_t since_ms) {
  Query q(prepare("SELECT status, count(*) FROM deliveries WHERE created_at >= ? GROUP BY status"));
  if (!q.valid()) return error("prepare delivery counts");
  q.bind(1, since_ms);
  std::map<std::string, int64_t> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) out[q.text(0)] = q.int64(1);
  if (rc != SQLITE_DONE) return error("count deliveries");
  return out;
}

#undef EQ_TASK_COLUMNS
#undef EQ_DELIVERY_COLUMNS
#undef EQ_DELIVERY_LAST_ERROR

}  // namespace eq
