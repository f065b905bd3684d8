// Keys and accounts: creation, authentication, revocation, rotation, the key
// epoch of the cache in eq-api.
#include "store/store.h"

#include "common/crypto.h"
#include "common/ids.h"
#include "common/timefmt.h"
#include "store/rows.h"

namespace eq {

using store::Blob;
using store::Row;
using store::Sql;
using store::Transaction;
using store_detail::optInt;

std::string keyStatusAt(const KeyInfo& key, int64_t now_ms) {
  if (key.status == "active" && key.expires_at != 0 && key.expires_at <= now_ms) return "expired";
  return key.status;
}

namespace {

KeyInfo keyFromRow(const Row& r) {
  return KeyInfo{std::string(r.text(0)), std::string(r.text(1)), std::string(r.text(2)),
                 std::string(r.text(3)), std::string(r.text(4)), std::string(r.text(5)),
                 std::string(r.text(6)), r.int64(7),             r.int64(8)};
}

}  // namespace

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
  const int64_t now = nowMs();

  Transaction tx(*db_);
  if (!tx.status().isOk()) return tx.status();
  if (auto r = exec("insert account",
                    Sql{"INSERT INTO accounts (id, name, tier, quota_fast, quota_standard, "
                        "quota_perfect, quota_expire_at, rate_limit_per_min, webhook_secret, "
                        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"},
                    {out.account_id, req.name, req.tier, req.quota.fast, req.quota.standard,
                     req.quota.perfect, req.expire_at_ms, int64_t{req.rate_limit_per_min},
                     out.webhook_secret, now});
      !r.isOk()) {
    return r.status();
  }
  const std::string hash = crypto::sha256(out.api_key);
  if (auto r = exec("insert key",
                    Sql{"INSERT INTO api_keys (id, account_id, env, display_prefix, key_hash, "
                        "created_at, name) VALUES (?, ?, ?, ?, ?, ?, ?)"},
                    {out.key_id, out.account_id, req.env, out.display_prefix, Blob{hash}, now,
                     req.name});
      !r.isOk()) {
    return r.status();
  }
  if (Status c = tx.commit(); !c.isOk()) return c;
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
  std::optional<AuthContext> out;
  auto r = exec(
      "authenticate",
      Sql{"SELECT k.id, k.account_id, k.display_prefix, k.key_hash, a.rate_limit_per_min, "
          "coalesce(k.expires_at, 0) "
          "FROM api_keys k JOIN accounts a ON a.id = k.account_id "
          "WHERE k.key_hash = ? AND k.status = 'active' AND k.env = ? "
          "AND (k.expires_at IS NULL OR k.expires_at > ?)"},
      {Blob{digest}, env, now_ms}, [&](const Row& row) {
        if (!crypto::constantTimeEqual(row.blob(3), digest)) return;
        AuthContext ctx;
        ctx.key_id = row.text(0);
        ctx.account_id = row.text(1);
        ctx.display_prefix = row.text(2);
        ctx.rate_limit_per_min = static_cast<int>(row.int64(4));
        ctx.expires_at_ms = row.int64(5);
        out = std::move(ctx);
      });
  if (!r.isOk()) return r.status();
  return out;
}

Result<std::vector<KeyInfo>> Store::listKeys() {
  std::vector<KeyInfo> out;
  auto r = exec("list keys",
                Sql{"SELECT k.id, k.account_id, a.name, k.env, k.display_prefix, k.status, a.tier, "
                    "k.created_at, coalesce(k.expires_at, 0) "
                    "FROM api_keys k JOIN accounts a ON a.id = k.account_id ORDER BY k.id"},
                {}, [&](const Row& row) { out.push_back(keyFromRow(row)); });
  if (!r.isOk()) return r.status();
  return out;
}

Status Store::revokeKey(const std::string& key_id) {
  auto r = exec("revoke key",
                Sql{"UPDATE api_keys SET status = 'revoked', revoked_at = ? WHERE id = ? AND "
                    "status = 'active'"},
                {nowMs(), key_id});
  if (!r.isOk()) return r.status();
  if (r.value() == 0) return Status(404, "no active key with id " + key_id);
  return Status::ok();
}

Result<KeyDetails> Store::keyDetails(const std::string& key_id) {
  std::optional<KeyDetails> out;
  auto r = exec(
      "key details",
      Sql{"SELECT k.id, k.account_id, a.name, k.env, k.display_prefix, k.status, a.tier, "
          "k.created_at, coalesce(k.expires_at, 0), coalesce(k.revoked_at, 0), "
          "coalesce(k.rotated_to, ''), a.rate_limit_per_min, coalesce(a.default_webhook_url, ''), "
          "a.quota_fast, a.quota_standard, a.quota_perfect, a.quota_expire_at "
          "FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.id = ?"},
      {key_id}, [&](const Row& row) {
        KeyDetails d;
        d.key = keyFromRow(row);
        d.revoked_at = row.int64(9);
        d.rotated_to = row.text(10);
        d.rate_limit_per_min = static_cast<int>(row.int64(11));
        d.default_webhook_url = row.text(12);
        d.quota.remaining = QuotaUnits{row.int64(13), row.int64(14), row.int64(15)};
        d.quota.expire_at_ms = row.int64(16);
        d.quota.tier = d.key.tier;
        out = std::move(d);
      });
  if (!r.isOk()) return r.status();
  if (!out) return Status(404, "no key with id " + key_id);
  return *out;
}

Result<CreatedKey> Store::rotateKey(const std::string& key_id, std::optional<int64_t> expires_at_ms,
                                    int64_t now_ms, std::optional<int64_t> old_until_ms) {
  Transaction tx(*db_);
  if (!tx.status().isOk()) return tx.status();
  // Read inside the transaction. On SQLite a concurrent revoke or rotation
  // of the same key either happens before (and we answer 404) or waits for
  // us; on PostgreSQL both may read the key active, and the revoke below,
  // which changes only an active key, is what lets one of them through.
  struct Old {
    std::string account_id, env, tier, rotated_to;
    int64_t expires_at = 0;
  };
  std::optional<Old> old;
  auto read = exec("read key to rotate",
                   Sql{"SELECT k.account_id, k.env, coalesce(k.expires_at, 0), a.tier, "
                       "coalesce(k.rotated_to, '') "
                       "FROM api_keys k JOIN accounts a ON a.id = k.account_id "
                       "WHERE k.id = ? AND k.status = 'active'"},
                   {key_id}, [&](const Row& row) {
                     old = Old{std::string(row.text(0)), std::string(row.text(1)),
                               std::string(row.text(3)), std::string(row.text(4)), row.int64(2)};
                   });
  if (!read.isOk()) return read.status();
  if (!old) return Status(404, "no active key with id " + key_id);
  if (!old->rotated_to.empty()) {
    return Status(409, "key " + key_id + " was rotated already, to " + old->rotated_to +
                           ", and works until its expiry; revoke it, or rotate " + old->rotated_to);
  }
  const int64_t expires = expires_at_ms ? *expires_at_ms : old->expires_at;
  CreatedKey out;
  out.account_id = old->account_id;
  out.tier = old->tier;
  out.key_id = ids::newKeyId();
  out.api_key = (old->env == "staging" ? "eq_test_" : "eq_live_") +
                crypto::base64url(crypto::randomBytes(32));
  out.display_prefix = out.api_key.substr(0, 16);
  const std::string hash = crypto::sha256(out.api_key);
  // The new key keeps the old one's name.
  if (auto r = exec("insert rotated key",
                    Sql{"INSERT INTO api_keys (id, account_id, env, display_prefix, key_hash, "
                        "created_at, expires_at, name) VALUES (?, ?, ?, ?, ?, ?, ?, "
                        "(SELECT name FROM api_keys WHERE id = ?))"},
                    {out.key_id, out.account_id, old->env, out.display_prefix, Blob{hash}, now_ms,
                     optInt(expires != 0 ? std::optional<int64_t>(expires) : std::nullopt),
                     key_id});
      !r.isOk()) {
    return r.status();
  }
  // Either way only a key still active and not rotated changes: of two
  // rotations at once (two hosts) one goes through, the other rolls back.
  auto retired =
      old_until_ms
          ? exec("end rotated key at the overlap",
                 Sql{"UPDATE api_keys SET expires_at = CASE WHEN expires_at IS NOT NULL AND "
                     "expires_at < ?1 THEN expires_at ELSE ?1 END, rotated_to = ?2 "
                     "WHERE id = ?3 AND status = 'active' AND rotated_to IS NULL"},
                 {*old_until_ms, out.key_id, key_id})
          : exec("revoke rotated key",
                 Sql{"UPDATE api_keys SET status = 'revoked', revoked_at = ?, rotated_to = ? "
                     "WHERE id = ? AND status = 'active' AND rotated_to IS NULL"},
                 {now_ms, out.key_id, key_id});
  if (!retired.isOk()) return retired.status();
  if (retired.value() == 0) return Status(409, "key " + key_id + " changed meanwhile; try again");
  if (Status c = tx.commit(); !c.isOk()) return c;
  return out;
}

Status Store::updateKey(const std::string& key_id, const KeyUpdate& u) {
  // One transaction: the key's expiry is on api_keys, the rest on accounts,
  // and a half-applied `eqctl key set` would be a surprise.
  Transaction tx(*db_);
  if (!tx.status().isOk()) return tx.status();
  const std::optional<int64_t> rate =
      u.rate_limit_per_min ? std::optional<int64_t>(*u.rate_limit_per_min) : std::nullopt;
  auto acc = exec(
      "update account",
      Sql{"UPDATE accounts SET rate_limit_per_min = coalesce(?1, rate_limit_per_min), "
          "tier = coalesce(?2, tier), "
          "default_webhook_url = CASE WHEN ?3 IS NULL THEN default_webhook_url "
          "WHEN ?3 = '' THEN NULL ELSE ?3 END "
          "WHERE id = (SELECT account_id FROM api_keys WHERE id = ?4)",
          "UPDATE accounts SET rate_limit_per_min = coalesce($1::bigint, rate_limit_per_min), "
          "tier = coalesce($2::text, tier), "
          "default_webhook_url = CASE WHEN $3::text IS NULL THEN default_webhook_url "
          "WHEN $3::text = '' THEN NULL ELSE $3::text END "
          "WHERE id = (SELECT account_id FROM api_keys WHERE id = $4)"},
      {optInt(rate), u.tier ? store::Value(std::string_view(*u.tier)) : store::Value(nullptr),
       u.default_webhook_url ? store::Value(std::string_view(*u.default_webhook_url))
                             : store::Value(nullptr),
       key_id});
  if (!acc.isOk()) return acc.status();
  if (acc.value() == 0) return Status(404, "no key with id " + key_id);
  if (u.expires_at_ms) {
    const std::optional<int64_t> expires =
        *u.expires_at_ms != 0 ? std::optional<int64_t>(*u.expires_at_ms) : std::nullopt;
    if (auto r = exec("update key expiry", Sql{"UPDATE api_keys SET expires_at = ? WHERE id = ?"},
                      {optInt(expires), key_id});
        !r.isOk()) {
      return r.status();
    }
  }
  return tx.commit();
}

Result<std::string> Store::accountOfKey(const std::string& key_id) {
  std::optional<std::string> out;
  auto r = exec("account of key", Sql{"SELECT account_id FROM api_keys WHERE id = ?"}, {key_id},
                [&](const Row& row) { out = std::string(row.text(0)); });
  if (!r.isOk()) return r.status();
  if (!out) return Status(404, "no key with id " + key_id);
  return *out;
}

Result<int64_t> Store::keyEpoch() {
  std::optional<int64_t> out;
  auto r = exec("read key epoch", Sql{"SELECT epoch FROM key_epoch WHERE id = 1"}, {},
                [&](const Row& row) { out = row.int64(0); });
  if (!r.isOk()) return r.status();
  if (!out) return Status(500, "read key epoch: no row");
  return *out;
}

}  // namespace eq
