// The developer center's records (docs/contract.md §9, 006_portal.sql): people,
// one-time links, sessions, sign-in failures, the usage record, an account's
// keys, webhook settings and deliveries, and tasks as their owner lists them.
#include <algorithm>

#include "common/ascii.h"
#include "common/crypto.h"
#include "common/ids.h"
#include "store/rows.h"
#include "store/store.h"

namespace eq {

using store::Blob;
using store::Row;
using store::Sql;
using store::Transaction;
using store_detail::optText;

namespace {

// Registration grants 100 units per mode for 30 days (docs/contract.md §4,
// §9), whatever the tier; the operator changes units with eqctl.
constexpr int64_t kSignupUnits = 100;
constexpr int64_t kSignupQuotaMs = 30LL * 24 * 3'600'000;

// A new account of the developer center, and its person.
const Sql kInsertAccount{
    "INSERT INTO accounts (id, name, tier, quota_fast, quota_standard, quota_perfect, "
    "quota_expire_at, webhook_secret, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"};
const Sql kInsertPerson{
    "INSERT INTO people (id, email, account_id, password_hash, created_at, "
    "password_changed_at) VALUES (?, ?, ?, ?, ?, ?)"};

std::string newPersonId() { return "per_" + crypto::base64url(crypto::randomBytes(12)); }

Person personFromRow(const Row& r) {
  // id, email, account_id, status, coalesce(password_hash, ''), created_at
  return Person{std::string(r.text(0)), std::string(r.text(1)), std::string(r.text(2)),
                std::string(r.text(3)), std::string(r.text(4)), r.int64(5)};
}

// A transaction body: begins, runs, commits or (the guard) rolls back.
template <typename T, typename F>
Result<T> transact(store::Db& db, F&& body) {
  Transaction tx(db);
  if (!tx.status().isOk()) return tx.status();
  Result<T> r = body();
  if (!r.isOk()) return r;
  if (Status c = tx.commit(); !c.isOk()) return c;
  return r;
}

}  // namespace

// A person as read everywhere (sign-in, sessions' password checks, links,
// eqctl): disabled when the person or their account is, so that
// accounts.disabled_at counts wherever people.status does.
#define EQ_PERSON_COLUMNS                                               \
  "p.id, p.email, p.account_id, "                                       \
  "CASE WHEN a.disabled_at IS NULL THEN p.status ELSE 'disabled' END, " \
  "coalesce(p.password_hash, ''), p.created_at"
#define EQ_PERSON_FROM " FROM people p JOIN accounts a ON a.id = p.account_id "

// ---------------------------------------------------------------- links

Result<std::string> Store::createPortalLink(const std::string& kind, const std::string& email,
                                            const std::string& tier,
                                            const std::string& account_id, int64_t now_ms) {
  std::string address = lowerAscii(email);
  Result<std::optional<Person>> p = personByEmail(address);
  if (!p.isOk()) return p.status();
  if (kind == "reset") {
    if (!p.value()) return Status(404, "no person with email " + address);
    if (p.value()->status != "active") return Status(409, address + " is disabled");
  } else {
    // An invitation makes a person; for someone who has one it used to act
    // as a reset that silently dropped its tier and account.
    if (p.value()) {
      return Status(409, address +
                             " already has an account: send a password reset link instead "
                             "(eqctl account reset-password " +
                             address + ")");
    }
    if (!account_id.empty()) {
      if (Status s = inviteAccountFree(account_id); !s.isOk()) return s;
    }
  }
  std::string token = crypto::base64url(crypto::randomBytes(32));
  const std::string hash = crypto::sha256(token);
  auto r =
      exec("create link",
           Sql{"INSERT INTO portal_links (token_hash, kind, email, tier, account_id, "
               "expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)"},
           {Blob{hash}, kind, address, tier, optText(account_id), now_ms + kLinkTtlMs, now_ms});
  if (!r.isOk()) return r.status();
  return token;
}

Result<std::optional<PortalLink>> Store::portalLink(const std::string& token, int64_t now_ms) {
  const std::string hash = crypto::sha256(token);
  std::optional<PortalLink> out;
  auto r = exec("read link",
                Sql{"SELECT kind, email, tier, coalesce(account_id, ''), expires_at FROM "
                    "portal_links WHERE token_hash = ? AND used_at IS NULL AND expires_at > ?"},
                {Blob{hash}, now_ms}, [&](const Row& row) {
                  out = PortalLink{std::string(row.text(0)), std::string(row.text(1)),
                                   std::string(row.text(2)), std::string(row.text(3)),
                                   row.int64(4)};
                });
  if (!r.isOk()) return r.status();
  return out;
}

Status Store::inviteAccountFree(const std::string& account_id) {
  std::optional<std::pair<bool, std::string>> found;  // disabled, its person's email
  auto r = exec("read account",
                Sql{"SELECT a.disabled_at IS NOT NULL, coalesce((SELECT email FROM people WHERE "
                    "account_id = a.id), '') FROM accounts a WHERE a.id = ?"},
                {account_id}, [&](const Row& row) {
                  found.emplace(row.int64(0) != 0, std::string(row.text(1)));
                });
  if (!r.isOk()) return r.status();
  if (!found) return Status(404, "no account " + account_id);
  if (found->first) return Status(403, "account " + account_id + " is disabled");
  const std::string& holder = found->second;
  if (!holder.empty()) {
    return Status(409, "account " + account_id + " already has a person (" + holder +
                           "): send them a password reset link instead "
                           "(eqctl account reset-password " +
                           holder + ")");
  }
  return Status::ok();
}

Result<PortalLink> Store::usablePortalLink(const std::string& token, int64_t now_ms) {
  Result<std::optional<PortalLink>> link = portalLink(token, now_ms);
  if (!link.isOk()) return link.status();
  if (!link.value()) {
    return Status(404, "this link was used, has expired or is unknown; ask for a new one");
  }
  const PortalLink& l = *link.value();
  Result<std::optional<Person>> p = personByEmail(l.email);
  if (!p.isOk()) return p.status();
  if (l.kind == "reset") {
    if (!p.value()) {
      return Status(404, "this link was used, has expired or is unknown; ask for a new one");
    }
    if (p.value()->status != "active") return Status(403, "this account is disabled");
    return l;
  }
  if (p.value()) {
    return Status(409,
                  "this email already has an account: sign in, or ask for a password "
                  "reset link");
  }
  if (!l.account_id.empty()) {
    if (Status s = inviteAccountFree(l.account_id); !s.isOk()) {
      if (s.code() >= 500) return s;
      if (s.code() == 403) return Status(403, "this account is disabled");
      return Status(409,
                    "this account already has a person: sign in, or ask for a password "
                    "reset link");
    }
  }
  return l;
}

Status Store::revokePortalLinks(const std::string& email, int64_t now_ms) {
  return exec("revoke links",
              Sql{"UPDATE portal_links SET used_at = ? WHERE email = ? AND used_at IS NULL"},
              {now_ms, lowerAscii(email)})
      .status();
}

Result<Person> Store::usePortalLink(const std::string& token, const std::string& password_hash,
                                    int64_t now_ms) {
  return transact<Person>(*db_, [&]() -> Result<Person> {
    Result<PortalLink> link = usablePortalLink(token, now_ms);
    if (!link.isOk()) return link.status();
    const PortalLink& l = link.value();
    // This link and every other outstanding one of the email: one link
    // used, the others are of no more use and only a risk if they leak.
    if (Status s = revokePortalLinks(l.email, now_ms); !s.isOk()) return s;

    if (l.kind == "reset") {
      // Only the password: the account, its tier and its keys stay as they are.
      Result<std::optional<Person>> existing = personByEmail(l.email);
      if (!existing.isOk()) return existing.status();
      Person p = *existing.value();  // usablePortalLink found them
      if (Status s = setPassword(p.person_id, password_hash, now_ms); !s.isOk()) return s;
      if (auto r = exec("end sessions", Sql{"DELETE FROM portal_sessions WHERE person_id = ?"},
                        {p.person_id});
          !r.isOk()) {
        return r.status();
      }
      p.password_hash = password_hash;
      return p;
    }
    std::string account = l.account_id;
    if (account.empty()) {
      account = ids::newAccountId();
      if (auto r = exec("create account", kInsertAccount,
                        {account, l.email, l.tier, kSignupUnits, kSignupUnits, kSignupUnits,
                         now_ms + kSignupQuotaMs,
                         "whsec_" + crypto::base64(crypto::randomBytes(32)), now_ms});
          !r.isOk()) {
        return r.status();
      }
    }
    Person p{newPersonId(), l.email, account, "active", password_hash, now_ms};
    auto r = exec("create person", kInsertPerson,
                  {p.person_id, p.email, p.account_id, password_hash, now_ms, now_ms});
    if (r.status().code() == 409) return Status(409, "that account already has a person");
    if (!r.isOk()) return r.status();
    return p;
  });
}

Result<Person> Store::registerPerson(const std::string& email, const std::string& password_hash,
                                     int64_t now_ms) {
  std::string address = lowerAscii(email);
  return transact<Person>(*db_, [&]() -> Result<Person> {
    Result<std::optional<Person>> existing = personByEmail(address);
    if (!existing.isOk()) return existing.status();
    if (existing.value()) return Status(409, "an account with this email exists: sign in");
    Person p{newPersonId(), address, ids::newAccountId(), "active", password_hash, now_ms};
    if (auto r = exec("create account", kInsertAccount,
                      {p.account_id, address, "free", kSignupUnits, kSignupUnits, kSignupUnits,
                       now_ms + kSignupQuotaMs,
                       "whsec_" + crypto::base64(crypto::randomBytes(32)), now_ms});
        !r.isOk()) {
      return r.status();
    }
    // A concurrent registration of the same email (on PostgreSQL, where
    // the read above takes no lock) fails here on the unique email: 409.
    auto r = exec("create person", kInsertPerson,
                  {p.person_id, p.email, p.account_id, password_hash, now_ms, now_ms});
    if (r.status().code() == 409) return Status(409, "an account with this email exists: sign in");
    if (!r.isOk()) return r.status();
    return p;
  });
}

// ---------------------------------------------------------------- people

Result<std::optional<Person>> Store::personByEmail(const std::string& email) {
  std::optional<Person> out;
  auto r = exec("read person", Sql{"SELECT " EQ_PERSON_COLUMNS EQ_PERSON_FROM "WHERE p.email = ?"},
                {lowerAscii(email)}, [&](const Row& row) { out = personFromRow(row); });
  if (!r.isOk()) return r.status();
  return out;
}

Result<std::optional<Person>> Store::person(const std::string& person_id) {
  std::optional<Person> out;
  auto r = exec("read person", Sql{"SELECT " EQ_PERSON_COLUMNS EQ_PERSON_FROM "WHERE p.id = ?"},
                {person_id}, [&](const Row& row) { out = personFromRow(row); });
  if (!r.isOk()) return r.status();
  return out;
}

Result<std::vector<Person>> Store::listPeople() {
  std::vector<Person> out;
  auto r =
      exec("list people", Sql{"SELECT " EQ_PERSON_COLUMNS EQ_PERSON_FROM "ORDER BY p.created_at"},
           {}, [&](const Row& row) {
             out.push_back(personFromRow(row));
             out.back().password_hash.clear();  // never leaves the store through a listing
           });
  if (!r.isOk()) return r.status();
  return out;
}

Status Store::disablePerson(const std::string& email, int64_t now_ms) {
  Result<bool> r = transact<bool>(*db_, [&]() -> Result<bool> {
    Result<std::optional<Person>> p = personByEmail(email);
    if (!p.isOk()) return p.status();
    if (!p.value()) return Status(404, "no person with email " + lowerAscii(email));
    const std::string& person_id = p.value()->person_id;
    const std::string& account_id = p.value()->account_id;
    if (auto s = exec("disable person", Sql{"UPDATE people SET status = 'disabled' WHERE id = ?"},
                      {person_id});
        !s.isOk()) {
      return s.status();
    }
    if (auto s = exec("end sessions", Sql{"DELETE FROM portal_sessions WHERE person_id = ?"},
                      {person_id});
        !s.isOk()) {
      return s.status();
    }
    if (auto s = exec("disable account", Sql{"UPDATE accounts SET disabled_at = ? WHERE id = ?"},
                      {now_ms, account_id});
        !s.isOk()) {
      return s.status();
    }
    if (auto s = exec("revoke keys",
                      Sql{"UPDATE api_keys SET status = 'revoked', revoked_at = ? "
                          "WHERE account_id = ? AND status = 'active'"},
                      {now_ms, account_id});
        !s.isOk()) {
      return s.status();
    }
    return true;
  });
  return r.status();
}

Status Store::setPassword(const std::string& person_id, const std::string& password_hash,
                          int64_t now_ms) {
  auto r = exec("set password",
                Sql{"UPDATE people SET password_hash = ?, password_changed_at = ? WHERE id = ?"},
                {password_hash, now_ms, person_id});
  if (!r.isOk()) return r.status();
  if (r.value() == 0) return Status(404, "no person " + person_id);
  return Status::ok();
}

// ---------------------------------------------------------------- sessions

Result<NewSession> Store::createSession(const std::string& person_id, int64_t now_ms) {
  NewSession s{crypto::base64url(crypto::randomBytes(32)),
               crypto::base64url(crypto::randomBytes(24))};
  const std::string hash = crypto::sha256(s.session_id);
  auto r = exec("create session",
                Sql{"INSERT INTO portal_sessions (id_hash, person_id, csrf, created_at, "
                    "last_seen_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)"},
                {Blob{hash}, person_id, s.csrf, now_ms, now_ms, now_ms + kSessionMaxMs});
  if (!r.isOk()) return r.status();
  return s;
}

Result<std::optional<PortalSession>> Store::session(const std::string& session_id, int64_t now_ms) {
  std::optional<PortalSession> s;
  auto r = exec("read session",
                Sql{"SELECT s.person_id, p.email, p.account_id, s.csrf, s.created_at, "
                    "s.last_seen_at FROM portal_sessions s JOIN people p ON p.id = s.person_id "
                    "JOIN accounts a ON a.id = p.account_id "
                    "WHERE s.id_hash = ? AND s.expires_at > ? AND s.last_seen_at > ? AND "
                    "p.status = 'active' AND a.disabled_at IS NULL"},
                {Blob{crypto::sha256(session_id)}, now_ms, now_ms - kSessionIdleMs},
                [&](const Row& row) {
                  s = PortalSession{std::string(row.text(0)),
                                    std::string(row.text(1)),
                                    std::string(row.text(2)),
                                    std::string(row.text(3)),
                                    row.int64(4),
                                    row.int64(5)};
                });
  if (!r.isOk()) return r.status();
  return s;
}

Status Store::touchSession(const std::string& session_id, const PortalSession& s, int64_t now_ms) {
  if (!s.idleClockDue(now_ms)) return Status::ok();
  return exec("touch session",
              Sql{"UPDATE portal_sessions SET last_seen_at = ? WHERE id_hash = ? AND "
                  "last_seen_at < ?"},
              {now_ms, Blob{crypto::sha256(session_id)}, now_ms})
      .status();
}

Status Store::endSession(const std::string& session_id) {
  const std::string hash = crypto::sha256(session_id);
  return exec("end session", Sql{"DELETE FROM portal_sessions WHERE id_hash = ?"}, {Blob{hash}})
      .status();
}

Result<NewSession> Store::changePassword(const std::string& person_id,
                                         const std::string& password_hash, int64_t now_ms) {
  return transact<NewSession>(*db_, [&]() -> Result<NewSession> {
    Result<std::optional<Person>> p = person(person_id);
    if (!p.isOk()) return p.status();
    if (!p.value()) return Status(404, "no person " + person_id);
    if (Status s = setPassword(person_id, password_hash, now_ms); !s.isOk()) return s;
    if (auto r = exec("end sessions", Sql{"DELETE FROM portal_sessions WHERE person_id = ?"},
                      {person_id});
        !r.isOk()) {
      return r.status();
    }
    if (Status s = revokePortalLinks(p.value()->email, now_ms); !s.isOk()) return s;
    return createSession(person_id, now_ms);
  });
}

// ---------------------------------------------------------------- sign-in limits

Result<int64_t> Store::signinFailures(const std::string& scope, int64_t now_ms,
                                      int64_t window_ms) {
  int64_t n = 0;
  auto r = exec("count failures",
                Sql{"SELECT count(*) FROM signin_failures WHERE scope = ? AND at > ?"},
                {scope, now_ms - window_ms}, [&](const Row& row) { n = row.int64(0); });
  if (!r.isOk()) return r.status();
  return n;
}

Result<int64_t> Store::signinRetryAt(const std::string& scope, int64_t now_ms, int64_t window_ms,
                                     int64_t max) {
  // The limit lifts when the oldest failure that keeps it at the maximum
  // leaves the window.
  std::optional<int64_t> at;
  auto r = exec("read failures",
                Sql{"SELECT at FROM signin_failures WHERE scope = ? AND at > ? ORDER BY at DESC "
                    "LIMIT 1 OFFSET ?"},
                {scope, now_ms - window_ms, max - 1}, [&](const Row& row) { at = row.int64(0); });
  if (!r.isOk()) return r.status();
  if (!at) return now_ms;
  return *at + window_ms;
}

Result<int64_t> Store::recordSigninFailure(const std::string& scope, int64_t now_ms) {
  std::optional<int64_t> id;
  auto r = exec("record failure",
                Sql{"INSERT INTO signin_failures (scope, at) VALUES (?, ?) RETURNING id"},
                {scope, now_ms}, [&](const Row& row) { id = row.int64(0); });
  if (!r.isOk()) return r.status();
  if (!id) return Status(500, "record failure: no id returned");
  return *id;
}

Result<Store::PasswordAttempt> Store::beginPasswordAttempt(const std::vector<std::string>& scopes,
                                                           int64_t now_ms) {
  std::vector<AttemptLimit> limits;
  for (const std::string& scope : scopes) limits.push_back(AttemptLimit{scope});
  return beginLimitedAttempt(limits, now_ms);
}

Result<Store::PasswordAttempt> Store::beginLimitedAttempt(const std::vector<AttemptLimit>& limits,
                                                          int64_t now_ms) {
  PasswordAttempt a;
  for (const AttemptLimit& l : limits) {
    Result<int64_t> n = signinFailures(l.scope, now_ms, l.window_ms);
    if (!n.isOk()) return n.status();
    if (n.value() < l.max) continue;
    Result<int64_t> at = signinRetryAt(l.scope, now_ms, l.window_ms, l.max);
    if (!at.isOk()) return at.status();
    a.retry_at_ms = std::max(a.retry_at_ms, at.value());
  }
  if (a.retry_at_ms > 0) return a;
  for (const AttemptLimit& l : limits) {
    Result<int64_t> row = recordSigninFailure(l.scope, now_ms);
    if (!row.isOk()) return row.status();
    a.counted.push_back(row.value());
  }
  return a;
}

Status Store::forgetSigninFailures(const std::vector<int64_t>& rows) {
  for (int64_t row : rows) {
    if (auto r = exec("forget failure", Sql{"DELETE FROM signin_failures WHERE id = ?"}, {row});
        !r.isOk()) {
      return r.status();
    }
  }
  return Status::ok();
}

// ---------------------------------------------------------------- usage

Result<std::vector<UsageRow>> Store::usage(const std::string& account_id, int64_t since_ms) {
  std::vector<UsageRow> out;
  auto r = exec("read usage",
                Sql{"SELECT mode, hour, calls, refunded, tokens FROM usage_hourly "
                    "WHERE account_id = ? AND hour >= ? ORDER BY hour, mode"},
                {account_id, store_detail::usageHour(since_ms)}, [&](const Row& row) {
                  out.push_back(UsageRow{std::string(row.text(0)), row.int64(1), row.int64(2),
                                         row.int64(3), row.int64(4)});
                });
  if (!r.isOk()) return r.status();
  return out;
}

Status Store::recordTokens(const std::string& account_id, const std::string& mode,
                           int64_t tokens, int64_t now_ms) {
  return queue("record tokens",
               Sql{"INSERT INTO usage_hourly (account_id, mode, hour, tokens) VALUES (?, ?, ?, ?) "
                   "ON CONFLICT (account_id, mode, hour) DO UPDATE SET "
                   "tokens = usage_hourly.tokens + excluded.tokens"},
               {account_id, mode, store_detail::usageHour(now_ms), tokens});
}

// ---------------------------------------------------------------- keys

Result<std::vector<AccountKey>> Store::accountKeys(const std::string& account_id,
                                                   int64_t now_ms) {
  // Last used: the newest rate window the key was counted in, those
  // retention purged (an hour on) included: it keeps the newest of them in
  // key_last_used (purgeRateCountersBefore).
  std::vector<AccountKey> out;
  auto r = exec(
      "list account keys",
      Sql{"SELECT k.id, coalesce(k.name, ''), k.env, k.display_prefix, k.status, k.created_at, "
          "coalesce(k.expires_at, 0), "
          "coalesce((SELECT max(at) FROM (SELECT window_start AS at FROM rate_counters r "
          "WHERE r.key_id = k.id UNION ALL SELECT at FROM key_last_used u WHERE u.key_id = k.id) "
          "AS used), 0) "
          "FROM api_keys k WHERE k.account_id = ? ORDER BY k.created_at DESC, k.id"},
      {account_id}, [&](const Row& row) {
        AccountKey k{std::string(row.text(0)), std::string(row.text(1)), std::string(row.text(2)),
                     std::string(row.text(3)), std::string(row.text(4)), row.int64(5),
                     row.int64(7)};
        const int64_t expires = row.int64(6);
        if (k.status == "active" && expires != 0 && expires <= now_ms) k.status = "expired";
        out.push_back(std::move(k));
      });
  if (!r.isOk()) return r.status();
  return out;
}

Result<CreatedKey> Store::createAccountKey(const std::string& account_id, const std::string& name,
                                           const std::string& env, int64_t now_ms) {
  // A bound on what one account can make: every key is a row the
  // authentication index carries. (Two keys made at the same moment on
  // PostgreSQL may both pass it: the bound is against growth, not exact.)
  int64_t active = 0;
  auto n = exec("count keys",
                Sql{"SELECT count(*) FROM api_keys WHERE account_id = ? AND status = 'active'"},
                {account_id}, [&](const Row& row) { active = row.int64(0); });
  if (!n.isOk()) return n.status();
  if (active >= kMaxActiveKeys) {
    return Status(409, "this account has " + std::to_string(kMaxActiveKeys) +
                           " active keys: revoke one first");
  }
  CreatedKey out;
  out.account_id = account_id;
  out.key_id = ids::newKeyId();
  out.api_key = (env == "staging" ? "eq_test_" : "eq_live_") +
                crypto::base64url(crypto::randomBytes(32));
  out.display_prefix = out.api_key.substr(0, 16);
  const std::string hash = crypto::sha256(out.api_key);
  std::optional<std::string> tier;
  auto r = exec(
      "create key",
      Sql{"INSERT INTO api_keys (id, account_id, env, display_prefix, key_hash, created_at, name) "
          "SELECT ?, id, ?, ?, ?, ?, ? FROM accounts WHERE id = ? RETURNING (SELECT tier FROM "
          "accounts WHERE id = account_id)",
          "INSERT INTO api_keys (id, account_id, env, display_prefix, key_hash, created_at, name) "
          "SELECT ?::text, id, ?::text, ?::text, ?, ?::bigint, ?::text FROM accounts WHERE id = ? "
          "RETURNING (SELECT tier FROM accounts a WHERE a.id = api_keys.account_id)"},
      {out.key_id, env, out.display_prefix, Blob{hash}, now_ms, name, account_id},
      [&](const Row& row) { tier = std::string(row.text(0)); });
  if (!r.isOk()) return r.status();
  if (!tier) return Status(404, "no account " + account_id);
  out.tier = *tier;
  return out;
}

// ---------------------------------------------------------------- webhooks

Result<WebhookSettings> Store::webhookSettings(const std::string& account_id, int64_t now_ms) {
  std::optional<WebhookSettings> out;
  auto r = exec("read webhook settings",
                Sql{"SELECT coalesce(default_webhook_url, ''), webhook_secret, "
                    "CASE WHEN webhook_secret_prev_until > ?1 THEN webhook_secret_prev "
                    "ELSE '' END, CASE WHEN webhook_secret_prev_until > ?1 THEN webhook_secret_prev_until "
                    "ELSE 0 END FROM accounts WHERE id = ?2"},
                {now_ms, account_id}, [&](const Row& row) {
                  out = WebhookSettings{std::string(row.text(0)), std::string(row.text(1)),
                                        std::string(row.text(2)), row.int64(3)};
                });
  if (!r.isOk()) return r.status();
  if (!out) return Status(404, "no account " + account_id);
  return *out;
}

Result<std::pair<std::string, std::string>> Store::signingSecrets(const std::string& account_id,
                                                                  int64_t now_ms) {
  Result<WebhookSettings> w = webhookSettings(account_id, now_ms);
  if (!w.isOk()) return w.status();
  return std::make_pair(w.value().secret, w.value().previous_secret);
}

Status Store::setDefaultWebhookUrl(const std::string& account_id, const std::string& url) {
  auto r = exec("set webhook url",
                Sql{"UPDATE accounts SET default_webhook_url = ? WHERE id = ?"},
                {optText(url), account_id});
  if (!r.isOk()) return r.status();
  if (r.value() == 0) return Status(404, "no account " + account_id);
  return Status::ok();
}

Result<std::string> Store::rotateWebhookSecret(const std::string& account_id, int64_t now_ms) {
  std::string secret = "whsec_" + crypto::base64(crypto::randomBytes(32));
  auto r = exec("rotate secret",
                Sql{"UPDATE accounts SET webhook_secret_prev = webhook_secret, "
                    "webhook_secret_prev_until = ?, webhook_secret = ? WHERE id = ?"},
                {now_ms + kSecretOverlapMs, secret, account_id});
  if (!r.isOk()) return r.status();
  if (r.value() == 0) return Status(404, "no account " + account_id);
  return secret;
}

Result<DeliveryRecord> Store::createTestDelivery(const std::string& account_id,
                                                 const std::string& url, int64_t now_ms) {
  // One test event in flight per account: the button cannot be turned
  // into a request generator against someone's server.
  bool pending = false;
  auto p = exec("read test deliveries",
                Sql{"SELECT 1 FROM deliveries WHERE account_id = ? AND task_id IS NULL AND "
                    "status = 'pending' LIMIT 1"},
                {account_id}, [&](const Row&) { pending = true; });
  if (!p.isOk()) return p.status();
  if (pending) return Status(409, "a test event is still on its way; wait for its answer");
  std::string id = ids::newDeliveryId();
  if (auto r = exec("create test delivery",
                    Sql{"INSERT INTO deliveries (id, task_id, account_id, url, event, status, "
                        "created_at, next_attempt_at) VALUES (?, NULL, ?, ?, 'test', 'pending', "
                        "?, ?)"},
                    {id, account_id, url, now_ms, now_ms});
      !r.isOk()) {
    return r.status();
  }
  Result<std::optional<DeliveryRecord>> d = delivery(id);
  if (!d.isOk()) return d.status();
  if (!d.value()) return Status(500, "test delivery vanished");
  return *d.value();
}

// ---------------------------------------------------------------- listings

Result<std::vector<DeliveryRecord>> Store::accountDeliveries(const std::string& account_id,
                                                             std::optional<DeliveryStatus> status,
                                                             int limit) {
  std::vector<DeliveryRecord> out;
  Status bad;
  auto r = exec("list deliveries",
                Sql{"SELECT " EQ_DELIVERY_COLUMNS EQ_DELIVERY_LAST_ERROR
                    " FROM deliveries WHERE account_id = ?1 AND (?2 IS NULL OR status = ?2) "
                    "ORDER BY created_at DESC, id DESC LIMIT ?3",
                    "SELECT " EQ_DELIVERY_COLUMNS EQ_DELIVERY_LAST_ERROR
                    " FROM deliveries WHERE account_id = $1 AND "
                    "($2::text IS NULL OR status = $2::text) "
                    "ORDER BY created_at DESC, id DESC LIMIT $3"},
                {account_id, store_detail::optState(status), int64_t{limit}},
                store_detail::appendDelivery(out, bad, true));
  if (!r.isOk()) return r.status();
  if (!bad.isOk()) return bad;
  return out;
}

Result<std::vector<TaskRecord>> Store::accountTasks(const std::string& account_id,
                                                    const TaskFilter& f) {
  std::vector<TaskRecord> out;
  Status bad;
  auto r = exec("list tasks",
                Sql{"SELECT " EQ_TASK_COLUMNS(
                        "''") " FROM tasks WHERE account_id = ?1 AND "
                              "(?2 IS NULL OR status = ?2) AND (?3 IS NULL OR mode = ?3) "
                              "ORDER BY created_at DESC, id DESC LIMIT ?4",
                    "SELECT " EQ_TASK_COLUMNS("''") " FROM tasks WHERE account_id = $1 AND "
                                                    "($2::text IS NULL OR status = $2::text) AND "
                                                    "($3::text IS NULL OR mode = $3::text) "
                                                    "ORDER BY created_at DESC, id DESC LIMIT $4"},
                {account_id, store_detail::optState(f.status), optText(f.mode), int64_t{f.limit}},
                store_detail::appendTask(out, bad));
  if (!r.isOk()) return r.status();
  if (!bad.isOk()) return bad;
  return out;
}

// ---------------------------------------------------------------- retention

Result<int> Store::purgePortalBefore(int64_t cutoff_ms, int64_t now_ms, int limit) {
  return transact<int>(*db_, [&]() -> Result<int> {
    // One purging dispatcher at a time (store/retention.cc).
    if (auto l = exec("take the retention lock", store_detail::kTakeRetentionLock,
                      {store_detail::kRetentionLock});
        !l.isOk()) {
      return l.status();
    }
    int64_t n = 0;
    auto sessions = exec("purge sessions",
                         Sql{"DELETE FROM portal_sessions WHERE id_hash IN (SELECT id_hash FROM "
                             "portal_sessions WHERE expires_at <= ? OR last_seen_at <= ? LIMIT ?)"},
                         {now_ms, now_ms - kSessionIdleMs, int64_t{limit}});
    if (!sessions.isOk()) return sessions.status();
    n += sessions.value();
    auto links = exec("purge links",
                      Sql{"DELETE FROM portal_links WHERE token_hash IN (SELECT token_hash FROM "
                          "portal_links WHERE expires_at <= ? LIMIT ?)"},
                      {cutoff_ms, int64_t{limit}});
    if (!links.isOk()) return links.status();
    n += links.value();
    // Registration's rows count for up to a day, the others for 15 minutes.
    static_assert(kRegisterAddressWindowMs >= kRegisterAllWindowMs &&
                  kRegisterAddressWindowMs >= kSigninWindowMs);
    auto failures = exec(
        "purge failures",
        Sql{"DELETE FROM signin_failures WHERE id IN (SELECT id FROM signin_failures "
            "WHERE at <= ?1 AND (at <= ?2 OR substr(scope, 1, length(?3)) != ?3) LIMIT ?4)",
            "DELETE FROM signin_failures WHERE id IN (SELECT id FROM signin_failures "
            "WHERE at <= $1 AND (at <= $2 OR substr(scope, 1, length($3::text)) != $3::text) "
            "LIMIT $4)"},
        {now_ms - kSigninWindowMs, now_ms - kRegisterAddressWindowMs, kRegisterScopePrefix,
         int64_t{limit}});
    if (!failures.isOk()) return failures.status();
    n += failures.value();
    // Test events: attempts first (foreign keys), then the deliveries.
    if (auto attempts = exec("purge test attempts",
                             Sql{"DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id "
                                 "FROM deliveries WHERE task_id IS NULL AND status != 'pending' "
                                 "AND created_at < ? LIMIT ?)"},
                             {cutoff_ms, int64_t{limit}});
        !attempts.isOk()) {
      return attempts.status();
    }
    auto tests = exec("purge test deliveries",
                      Sql{"DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries WHERE "
                          "task_id IS NULL AND status != 'pending' AND created_at < ? LIMIT ?)"},
                      {cutoff_ms, int64_t{limit}});
    if (!tests.isOk()) return tests.status();
    n += tests.value();
    return static_cast<int>(n);
  });
}

}  // namespace eq
