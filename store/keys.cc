// Keys and accounts: creation, authentication, revocation, rotation, the key
// epoch of the cache in eq-api.
#include "store/store.h"

#include "common/crypto.h"
#include "common/ids.h"
#include "common/timefmt.h"
#include "store/query.h"

namespace eq {

using store_detail::Query;

std::string keyStatusAt(const KeyInfo& key, int64_t now_ms) {
  if (key.status == "active" && key.expires_at != 0 && key.expires_at <= now_ms) return "expired";
  return key.status;
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
        "INSERT INTO api_keys (id, account_id, env, display_prefix, key_hash, created_at, name) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)"));
    key.bind(1, out.key_id).bind(2, out.account_id).bind(3, req.env);
    key.bind(4, out.display_prefix).bindBlob(5, crypto::sha256(out.api_key)).bind(6, now);
    key.bind(7, req.name);
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
          "expires_at, name) VALUES (?, ?, ?, ?, ?, ?, ?, (SELECT name FROM api_keys WHERE id = ?))"));
      key.bind(1, out.key_id).bind(2, out.account_id).bind(3, env);
      key.bind(4, out.display_prefix).bindBlob(5, crypto::sha256(out.api_key)).bind(6, now_ms);
      if (expires != 0) key.bind(7, expires); else key.bindNull(7);
      key.bind(8, key_id);  // the new key keeps the old one's name
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

Result<int64_t> Store::keyEpoch() {
  Query q(prepare("SELECT epoch FROM key_epoch WHERE id = 1"));
  if (!q.valid()) return error("prepare key epoch");
  if (q.step() != SQLITE_ROW) return error("read key epoch");
  return q.int64(0);
}

}  // namespace eq
