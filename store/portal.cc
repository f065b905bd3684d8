// The developer center's records (PRODUCT.md §9, 006_portal.sql): people,
// one-time links, sessions, sign-in failures, the usage record, an account's
// keys, webhook settings and deliveries, and tasks as their owner lists them.
#include <algorithm>
#include <cctype>

#include "common/crypto.h"
#include "common/ids.h"
#include "store/query.h"
#include "store/store.h"

namespace eq {

using store_detail::Query;

namespace {

// Registration grants 100 units per mode for 30 days (interface-spec, PRODUCT
// §4), whatever the tier; the operator changes units with eqctl.
constexpr int64_t kSignupUnits = 100;
constexpr int64_t kSignupQuotaMs = 30LL * 24 * 3'600'000;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string newPersonId() { return "per_" + crypto::base64url(crypto::randomBytes(12)); }

Person personFromRow(const Query& q) {
  // id, email, account_id, status, coalesce(password_hash, ''), created_at
  return Person{q.text(0), q.text(1), q.text(2), q.text(3), q.text(4), q.int64(5)};
}

// A transaction body: begins, runs, commits or rolls back.
template <typename T, typename F>
Result<T> transact(Store& store, F&& body) {
  if (Status s = store.begin(); !s.isOk()) return s;
  Result<T> r = body();
  if (!r.isOk()) {
    store.rollback();
    return r;
  }
  if (Status c = store.commit(); !c.isOk()) return c;
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
  std::string address = lower(email);
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
  Query q(prepare(
      "INSERT INTO portal_links (token_hash, kind, email, tier, account_id, expires_at, "
      "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)"));
  q.bindBlob(1, crypto::sha256(token)).bind(2, kind).bind(3, address).bind(4, tier);
  q.bindOptText(5, account_id).bind(6, now_ms + kLinkTtlMs).bind(7, now_ms);
  if (q.step() != SQLITE_DONE) return error("create link");
  return token;
}

Result<std::optional<PortalLink>> Store::portalLink(const std::string& token, int64_t now_ms) {
  Query q(prepare(
      "SELECT kind, email, tier, coalesce(account_id, ''), expires_at FROM portal_links "
      "WHERE token_hash = ? AND used_at IS NULL AND expires_at > ?"));
  q.bindBlob(1, crypto::sha256(token)).bind(2, now_ms);
  int rc = q.step();
  if (rc == SQLITE_DONE) return std::optional<PortalLink>();
  if (rc != SQLITE_ROW) return error("read link");
  return std::optional<PortalLink>(
      PortalLink{q.text(0), q.text(1), q.text(2), q.text(3), q.int64(4)});
}

Status Store::inviteAccountFree(const std::string& account_id) {
  Query q(prepare(
      "SELECT a.disabled_at IS NOT NULL, coalesce((SELECT email FROM people WHERE account_id = "
      "a.id), '') FROM accounts a WHERE a.id = ?"));
  q.bind(1, account_id);
  int rc = q.step();
  if (rc == SQLITE_DONE) return Status(404, "no account " + account_id);
  if (rc != SQLITE_ROW) return error("read account");
  if (q.int64(0) != 0) return Status(403, "account " + account_id + " is disabled");
  std::string holder = q.text(1);
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
  Query q(prepare("UPDATE portal_links SET used_at = ? WHERE email = ? AND used_at IS NULL"));
  q.bind(1, now_ms).bind(2, lower(email));
  if (q.step() != SQLITE_DONE) return error("revoke links");
  return Status::ok();
}

Result<Person> Store::usePortalLink(const std::string& token, const std::string& password_hash,
                                    int64_t now_ms) {
  return transact<Person>(*this, [&]() -> Result<Person> {
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
      Query end(prepare("DELETE FROM portal_sessions WHERE person_id = ?"));
      end.bind(1, p.person_id);
      if (end.step() != SQLITE_DONE) return error("end sessions");
      p.password_hash = password_hash;
      return p;
    }
    std::string account = l.account_id;
    if (account.empty()) {
      account = ids::newAccountId();
      Query acc(prepare(
          "INSERT INTO accounts (id, name, tier, quota_fast, quota_standard, quota_perfect, "
          "quota_expire_at, webhook_secret, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"));
      acc.bind(1, account).bind(2, l.email).bind(3, l.tier).bind(4, kSignupUnits);
      acc.bind(5, kSignupUnits).bind(6, kSignupUnits).bind(7, now_ms + kSignupQuotaMs);
      acc.bind(8, "whsec_" + crypto::base64(crypto::randomBytes(32))).bind(9, now_ms);
      if (acc.step() != SQLITE_DONE) return error("create account");
    }
    Person p{newPersonId(), l.email, account, "active", password_hash, now_ms};
    Query ins(prepare(
        "INSERT INTO people (id, email, account_id, password_hash, created_at, "
        "password_changed_at) VALUES (?, ?, ?, ?, ?, ?)"));
    ins.bind(1, p.person_id).bind(2, p.email).bind(3, p.account_id).bind(4, password_hash);
    ins.bind(5, now_ms).bind(6, now_ms);
    int rc = ins.step();
    if (rc == SQLITE_CONSTRAINT) return Status(409, "that account already has a person");
    if (rc != SQLITE_DONE) return error("create person");
    return p;
  });
}

Result<Person> Store::registerPerson(const std::string& email, const std::string& password_hash,
                                     int64_t now_ms) {
  std::string address = lower(email);
  return transact<Person>(*this, [&]() -> Result<Person> {
    Result<std::optional<Person>> existing = personByEmail(address);
    if (!existing.isOk()) return existing.status();
    if (existing.value()) return Status(409, "an account with this email exists: sign in");
    Person p{newPersonId(), address, ids::newAccountId(), "active", password_hash, now_ms};
    Query acc(prepare(
        "INSERT INTO accounts (id, name, tier, quota_fast, quota_standard, quota_perfect, "
        "quota_expire_at, webhook_secret, created_at) VALUES (?, ?, 'free', ?, ?, ?, ?, ?, ?)"));
    acc.bind(1, p.account_id).bind(2, address).bind(3, kSignupUnits).bind(4, kSignupUnits);
    acc.bind(5, kSignupUnits).bind(6, now_ms + kSignupQuotaMs);
    acc.bind(7, "whsec_" + crypto::base64(crypto::randomBytes(32))).bind(8, now_ms);
    if (acc.step() != SQLITE_DONE) return error("create account");
    Query ins(prepare(
        "INSERT INTO people (id, email, account_id, password_hash, created_at, "
        "password_changed_at) VALUES (?, ?, ?, ?, ?, ?)"));
    ins.bind(1, p.person_id).bind(2, p.email).bind(3, p.account_id).bind(4, password_hash);
    ins.bind(5, now_ms).bind(6, now_ms);
    if (ins.step() != SQLITE_DONE) return error("create person");
    return p;
  });
}

// ---------------------------------------------------------------- people

Result<std::optional<Person>> Store::personByEmail(const std::string& email) {
  Query q(prepare("SELECT " EQ_PERSON_COLUMNS EQ_PERSON_FROM "WHERE p.email = ?"));
  q.bind(1, lower(email));
  int rc = q.step();
  if (rc == SQLITE_DONE) return std::optional<Person>();
  if (rc != SQLITE_ROW) return error("read person");
  return std::optional<Person>(personFromRow(q));
}

Result<std::optional<Person>> Store::person(const std::string& person_id) {
  Query q(prepare("SELECT " EQ_PERSON_COLUMNS EQ_PERSON_FROM "WHERE p.id = ?"));
  q.bind(1, person_id);
  int rc = q.step();
  if (rc == SQLITE_DONE) return std::optional<Person>();
  if (rc != SQLITE_ROW) return error("read person");
  return std::optional<Person>(personFromRow(q));
}

Result<std::vector<Person>> Store::listPeople() {
  Query q(prepare("SELECT " EQ_PERSON_COLUMNS EQ_PERSON_FROM "ORDER BY p.created_at"));
  std::vector<Person> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    out.push_back(personFromRow(q));
    out.back().password_hash.clear();  // never leaves the store through a listing
  }
  if (rc != SQLITE_DONE) return error("list people");
  return out;
}

Status Store::disablePerson(const std::string& email, int64_t now_ms) {
  Result<bool> r = transact<bool>(*this, [&]() -> Result<bool> {
    Result<std::optional<Person>> p = personByEmail(email);
    if (!p.isOk()) return p.status();
    if (!p.value()) return Status(404, "no person with email " + lower(email));
    Query off(prepare("UPDATE people SET status = 'disabled' WHERE id = ?"));
    off.bind(1, p.value()->person_id);
    if (off.step() != SQLITE_DONE) return error("disable person");
    Query end(prepare("DELETE FROM portal_sessions WHERE person_id = ?"));
    end.bind(1, p.value()->person_id);
    if (end.step() != SQLITE_DONE) return error("end sessions");
    Query acc(prepare("UPDATE accounts SET disabled_at = ? WHERE id = ?"));
    acc.bind(1, now_ms).bind(2, p.value()->account_id);
    if (acc.step() != SQLITE_DONE) return error("disable account");
    Query keys(prepare(
        "UPDATE api_keys SET status = 'revoked', revoked_at = ? "
        "WHERE account_id = ? AND status = 'active'"));
    keys.bind(1, now_ms).bind(2, p.value()->account_id);
    if (keys.step() != SQLITE_DONE) return error("revoke keys");
    return true;
  });
  return r.status();
}

Status Store::setPassword(const std::string& person_id, const std::string& password_hash,
                          int64_t now_ms) {
  Query q(prepare("UPDATE people SET password_hash = ?, password_changed_at = ? WHERE id = ?"));
  q.bind(1, password_hash).bind(2, now_ms).bind(3, person_id);
  if (q.step() != SQLITE_DONE) return error("set password");
  if (sqlite3_changes(db_) == 0) return Status(404, "no person " + person_id);
  return Status::ok();
}

// ---------------------------------------------------------------- sessions

Result<NewSession> Store::createSession(const std::string& person_id, int64_t now_ms) {
  NewSession s{crypto::base64url(crypto::randomBytes(32)),
               crypto::base64url(crypto::randomBytes(24))};
  Query q(prepare(
      "INSERT INTO portal_sessions (id_hash, person_id, csrf, created_at, last_seen_at, "
      "expires_at) VALUES (?, ?, ?, ?, ?, ?)"));
  q.bindBlob(1, crypto::sha256(s.session_id)).bind(2, person_id).bind(3, s.csrf);
  q.bind(4, now_ms).bind(5, now_ms).bind(6, now_ms + kSessionMaxMs);
  if (q.step() != SQLITE_DONE) return error("create session");
  return s;
}

Result<std::optional<PortalSession>> Store::session(const std::string& session_id,
                                                     int64_t now_ms) {
  std::string digest = crypto::sha256(session_id);
  Query r(prepare(
      "SELECT s.person_id, p.email, p.account_id, s.csrf, s.created_at, s.last_seen_at "
      "FROM portal_sessions s JOIN people p ON p.id = s.person_id "
      "JOIN accounts a ON a.id = p.account_id "
      "WHERE s.id_hash = ? AND s.expires_at > ? AND s.last_seen_at > ? AND p.status = 'active' "
      "AND a.disabled_at IS NULL"));
  r.bindBlob(1, digest).bind(2, now_ms).bind(3, now_ms - kSessionIdleMs);
  int rc = r.step();
  if (rc == SQLITE_DONE) return std::optional<PortalSession>();
  if (rc != SQLITE_ROW) return error("read session");
  PortalSession s{r.text(0), r.text(1), r.text(2), r.text(3), r.int64(4)};
  int64_t last_seen = r.int64(5);
  r.step();
  // The idle clock moves at most once a minute: a page's burst of requests
  // costs one write, not one each.
  if (now_ms - last_seen >= 60'000) {
    Query touch(prepare("UPDATE portal_sessions SET last_seen_at = ? WHERE id_hash = ?"));
    touch.bind(1, now_ms).bindBlob(2, digest);
    if (touch.step() != SQLITE_DONE) return error("touch session");
  }
  return std::optional<PortalSession>(std::move(s));
}

Status Store::endSession(const std::string& session_id) {
  Query q(prepare("DELETE FROM portal_sessions WHERE id_hash = ?"));
  q.bindBlob(1, crypto::sha256(session_id));
  if (q.step() != SQLITE_DONE) return error("end session");
  return Status::ok();
}

Result<NewSession> Store::changePassword(const std::string& person_id,
                                         const std::string& password_hash, int64_t now_ms) {
  return transact<NewSession>(*this, [&]() -> Result<NewSession> {
    Result<std::optional<Person>> p = person(person_id);
    if (!p.isOk()) return p.status();
    if (!p.value()) return Status(404, "no person " + person_id);
    if (Status s = setPassword(person_id, password_hash, now_ms); !s.isOk()) return s;
    Query end(prepare("DELETE FROM portal_sessions WHERE person_id = ?"));
    end.bind(1, person_id);
    if (end.step() != SQLITE_DONE) return error("end sessions");
    if (Status s = revokePortalLinks(p.value()->email, now_ms); !s.isOk()) return s;
    return createSession(person_id, now_ms);
  });
}

// ---------------------------------------------------------------- sign-in limits

Result<int64_t> Store::signinFailures(const std::string& scope, int64_t now_ms,
                                      int64_t window_ms) {
  Query q(prepare("SELECT count(*) FROM signin_failures WHERE scope = ? AND at > ?"));
  q.bind(1, scope).bind(2, now_ms - window_ms);
  if (q.step() != SQLITE_ROW) return error("count failures");
  return q.int64(0);
}

Result<int64_t> Store::signinRetryAt(const std::string& scope, int64_t now_ms, int64_t window_ms,
                                     int64_t max) {
  // The limit lifts when the oldest failure that keeps it at the maximum
  // leaves the window.
  Query q(prepare(
      "SELECT at FROM signin_failures WHERE scope = ? AND at > ? ORDER BY at DESC "
      "LIMIT 1 OFFSET ?"));
  q.bind(1, scope).bind(2, now_ms - window_ms).bind(3, max - 1);
  int rc = q.step();
  if (rc == SQLITE_DONE) return now_ms;
  if (rc != SQLITE_ROW) return error("read failures");
  return q.int64(0) + window_ms;
}

Result<int64_t> Store::recordSigninFailure(const std::string& scope, int64_t now_ms) {
  Query q(prepare("INSERT INTO signin_failures (scope, at) VALUES (?, ?)"));
  q.bind(1, scope).bind(2, now_ms);
  if (q.step() != SQLITE_DONE) return error("record failure");
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
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
    Query q(prepare("DELETE FROM signin_failures WHERE rowid = ?"));
    q.bind(1, row);
    if (q.step() != SQLITE_DONE) return error("forget failure");
  }
  return Status::ok();
}

// ---------------------------------------------------------------- usage

Result<std::vector<UsageRow>> Store::usage(const std::string& account_id, int64_t since_ms) {
  Query q(prepare(
      "SELECT mode, hour, calls, refunded, tokens FROM usage_hourly "
      "WHERE account_id = ? AND hour >= ? ORDER BY hour, mode"));
  q.bind(1, account_id).bind(2, since_ms - since_ms % 3'600'000);
  std::vector<UsageRow> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    out.push_back(UsageRow{q.text(0), q.int64(1), q.int64(2), q.int64(3), q.int64(4)});
  }
  if (rc != SQLITE_DONE) return error("read usage");
  return out;
}

Status Store::recordTokens(const std::string& account_id, const std::string& mode,
                           int64_t tokens, int64_t now_ms) {
  Query q(prepare(
      "INSERT INTO usage_hourly (account_id, mode, hour, tokens) VALUES (?, ?, ?, ?) "
      "ON CONFLICT (account_id, mode, hour) DO UPDATE SET tokens = tokens + excluded.tokens"));
  q.bind(1, account_id).bind(2, mode).bind(3, now_ms - now_ms % 3'600'000).bind(4, tokens);
  if (q.step() != SQLITE_DONE) return error("record tokens");
  return Status::ok();
}

// ---------------------------------------------------------------- keys

Result<std::vector<AccountKey>> Store::accountKeys(const std::string& account_id,
                                                   int64_t now_ms) {
  // Last used: the newest rate window the key was counted in (rate counters
  // are kept for a day by retention; older use shows as never).
  Query q(prepare(
      "SELECT k.id, coalesce(k.name, ''), k.env, k.display_prefix, k.status, k.created_at, "
      "coalesce(k.expires_at, 0), "
      "coalesce((SELECT max(window_start) FROM rate_counters r WHERE r.key_id = k.id), 0) "
      "FROM api_keys k WHERE k.account_id = ? ORDER BY k.created_at DESC, k.id"));
  q.bind(1, account_id);
  std::vector<AccountKey> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    AccountKey k{q.text(0), q.text(1), q.text(2), q.text(3), q.text(4), q.int64(5), q.int64(7)};
    int64_t expires = q.int64(6);
    if (k.status == "active" && expires != 0 && expires <= now_ms) k.status = "expired";
    out.push_back(std::move(k));
  }
  if (rc != SQLITE_DONE) return error("list account keys");
  return out;
}

Result<CreatedKey> Store::createAccountKey(const std::string& account_id, const std::string& name,
                                           const std::string& env, int64_t now_ms) {
  {
    // A bound on what one account can make: every key is a row the
    // authentication index carries.
    Query n(prepare("SELECT count(*) FROM api_keys WHERE account_id = ? AND status = 'active'"));
    n.bind(1, account_id);
    if (n.step() != SQLITE_ROW) return error("count keys");
    if (n.int64(0) >= kMaxActiveKeys) {
      return Status(409, "this account has " + std::to_string(kMaxActiveKeys) +
                             " active keys: revoke one first");
    }
  }
  CreatedKey out;
  out.account_id = account_id;
  out.key_id = ids::newKeyId();
  out.api_key = (env == "staging" ? "eq_test_" : "eq_live_") +
                crypto::base64url(crypto::randomBytes(32));
  out.display_prefix = out.api_key.substr(0, 16);
  Query q(prepare(
      "INSERT INTO api_keys (id, account_id, env, display_prefix, key_hash, created_at, name) "
      "SELECT ?, id, ?, ?, ?, ?, ? FROM accounts WHERE id = ? RETURNING (SELECT tier FROM "
      "accounts WHERE id = account_id)"));
  q.bind(1, out.key_id).bind(2, env).bind(3, out.display_prefix);
  q.bindBlob(4, crypto::sha256(out.api_key)).bind(5, now_ms).bind(6, name).bind(7, account_id);
  int rc = q.step();
  if (rc == SQLITE_DONE) return Status(404, "no account " + account_id);
  if (rc != SQLITE_ROW) return error("create key");
  out.tier = q.text(0);
  q.step();
  return out;
}

// ---------------------------------------------------------------- webhooks

Result<WebhookSettings> Store::webhookSettings(const std::string& account_id, int64_t now_ms) {
  Query q(prepare(
      "SELECT coalesce(default_webhook_url, ''), webhook_secret, "
      "CASE WHEN webhook_secret_prev_until > ?1 THEN webhook_secret_prev ELSE '' END, "
      "CASE WHEN webhook_secret_prev_until > ?1 THEN webhook_secret_prev_until ELSE 0 END "
      "FROM accounts WHERE id = ?2"));
  q.bind(1, now_ms).bind(2, account_id);
  int rc = q.step();
  if (rc == SQLITE_DONE) return Status(404, "no account " + account_id);
  if (rc != SQLITE_ROW) return error("read webhook settings");
  return WebhookSettings{q.text(0), q.text(1), q.text(2), q.int64(3)};
}

Result<std::pair<std::string, std::string>> Store::signingSecrets(const std::string& account_id,
                                                                  int64_t now_ms) {
  Result<WebhookSettings> w = webhookSettings(account_id, now_ms);
  if (!w.isOk()) return w.status();
  return std::make_pair(w.value().secret, w.value().previous_secret);
}

Status Store::setDefaultWebhookUrl(const std::string& account_id, const std::string& url) {
  Query q(prepare("UPDATE accounts SET default_webhook_url = ? WHERE id = ?"));
  q.bindOptText(1, url).bind(2, account_id);
  if (q.step() != SQLITE_DONE) return error("set webhook url");
  if (sqlite3_changes(db_) == 0) return Status(404, "no account " + account_id);
  return Status::ok();
}

Result<std::string> Store::rotateWebhookSecret(const std::string& account_id, int64_t now_ms) {
  std::string secret = "whsec_" + crypto::base64(crypto::randomBytes(32));
  Query q(prepare(
      "UPDATE accounts SET webhook_secret_prev = webhook_secret, "
      "webhook_secret_prev_until = ?, webhook_secret = ? WHERE id = ?"));
  q.bind(1, now_ms + kSecretOverlapMs).bind(2, secret).bind(3, account_id);
  if (q.step() != SQLITE_DONE) return error("rotate secret");
  if (sqlite3_changes(db_) == 0) return Status(404, "no account " + account_id);
  return secret;
}

Result<DeliveryRecord> Store::createTestDelivery(const std::string& account_id,
                                                 const std::string& url, int64_t now_ms) {
  {
    // One test event in flight per account: the button cannot be turned
    // into a request generator against someone's server.
    Query pending(prepare(
        "SELECT 1 FROM deliveries WHERE account_id = ? AND task_id IS NULL AND status = 'pending' "
        "LIMIT 1"));
    pending.bind(1, account_id);
    int rc = pending.step();
    if (rc == SQLITE_ROW) return Status(409, "a test event is still on its way; wait for its answer");
    if (rc != SQLITE_DONE) return error("read test deliveries");
  }
  std::string id = ids::newDeliveryId();
  Query q(prepare(
      "INSERT INTO deliveries (id, task_id, account_id, url, event, status, created_at, "
      "next_attempt_at) VALUES (?, NULL, ?, ?, 'test', 'pending', ?, ?)"));
  q.bind(1, id).bind(2, account_id).bind(3, url).bind(4, now_ms).bind(5, now_ms);
  if (q.step() != SQLITE_DONE) return error("create test delivery");
  Result<std::optional<DeliveryRecord>> d = delivery(id);
  if (!d.isOk()) return d.status();
  if (!d.value()) return Status(500, "test delivery vanished");
  return *d.value();
}

// ---------------------------------------------------------------- listings

Result<std::vector<DeliveryRecord>> Store::accountDeliveries(const std::string& account_id,
                                                             const std::string& status,
                                                             int limit) {
  Query q(prepare("SELECT " EQ_DELIVERY_COLUMNS EQ_DELIVERY_LAST_ERROR
                  " FROM deliveries WHERE account_id = ?1 AND (?2 IS NULL OR status = ?2) "
                  "ORDER BY created_at DESC, id DESC LIMIT ?3"));
  q.bind(1, account_id).bindOptText(2, status).bind(3, int64_t{limit});
  std::vector<DeliveryRecord> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) out.push_back(store_detail::readDelivery(q, true));
  if (rc != SQLITE_DONE) return error("list deliveries");
  return out;
}

Result<std::vector<TaskRecord>> Store::accountTasks(const std::string& account_id,
                                                    const TaskFilter& f) {
  Query q(prepare("SELECT " EQ_TASK_COLUMNS("''") " FROM tasks WHERE account_id = ?1 AND "
                  "(?2 IS NULL OR status = ?2) AND (?3 IS NULL OR mode = ?3) "
                  "ORDER BY created_at DESC, id DESC LIMIT ?4"));
  q.bind(1, account_id).bindOptText(2, f.status).bindOptText(3, f.mode);
  q.bind(4, int64_t{f.limit});
  std::vector<TaskRecord> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) out.push_back(store_detail::taskFromRow(q));
  if (rc != SQLITE_DONE) return error("list tasks");
  return out;
}

// ---------------------------------------------------------------- retention

Result<int> Store::purgePortalBefore(int64_t cutoff_ms, int64_t now_ms, int limit) {
  return transact<int>(*this, [&]() -> Result<int> {
    int n = 0;
    Query sessions(prepare(
        "DELETE FROM portal_sessions WHERE id_hash IN (SELECT id_hash FROM portal_sessions "
        "WHERE expires_at <= ? OR last_seen_at <= ? LIMIT ?)"));
    sessions.bind(1, now_ms).bind(2, now_ms - kSessionIdleMs).bind(3, int64_t{limit});
    if (sessions.step() != SQLITE_DONE) return error("purge sessions");
    n += sqlite3_changes(db_);
    Query links(prepare(
        "DELETE FROM portal_links WHERE token_hash IN (SELECT token_hash FROM portal_links "
        "WHERE expires_at <= ? LIMIT ?)"));
    links.bind(1, cutoff_ms).bind(2, int64_t{limit});
    if (links.step() != SQLITE_DONE) return error("purge links");
    n += sqlite3_changes(db_);
    // Registration's rows count for up to a day, the others for 15 minutes.
    static_assert(kRegisterAddressWindowMs >= kRegisterAllWindowMs &&
                  kRegisterAddressWindowMs >= kSigninWindowMs);
    Query failures(prepare(
        "DELETE FROM signin_failures WHERE rowid IN (SELECT rowid FROM signin_failures "
        "WHERE at <= ?1 AND (at <= ?2 OR substr(scope, 1, length(?3)) != ?3) LIMIT ?4)"));
    failures.bind(1, now_ms - kSigninWindowMs)
        .bind(2, now_ms - kRegisterAddressWindowMs)
        .bind(3, std::string(kRegisterScopePrefix))
        .bind(4, int64_t{limit});
    if (failures.step() != SQLITE_DONE) return error("purge failures");
    n += sqlite3_changes(db_);
    // Test events: attempts first (foreign keys), then the deliveries.
    Query attempts(prepare(
        "DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM deliveries "
        "WHERE task_id IS NULL AND status != 'pending' AND created_at < ? LIMIT ?)"));
    attempts.bind(1, cutoff_ms).bind(2, int64_t{limit});
    if (attempts.step() != SQLITE_DONE) return error("purge test attempts");
    Query tests(prepare(
        "DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries WHERE task_id IS NULL "
        "AND status != 'pending' AND created_at < ? LIMIT ?)"));
    tests.bind(1, cutoff_ms).bind(2, int64_t{limit});
    if (tests.step() != SQLITE_DONE) return error("purge test deliveries");
    n += sqlite3_changes(db_);
    return n;
  });
}

}  // namespace eq
