// The store: keys, accounts and quota, rate counters, Idempotency-Key
// records, tasks, webhook deliveries and their retention: one class over one
// connection of the database seam (store/db.h: SQLite or PostgreSQL), its
// statements in one file per concept in this folder (store.cc: open,
// migrations, transactions; keys.cc, quota.cc, rate.cc, idempotency.cc,
// tasks.cc, deliveries.cc, settlement.cc, retention.cc, portal.cc), each
// written once, with its PostgreSQL text beside it where the dialects
// differ. eqctl's report queries are in tools/reports.cc.
//
// A Store owns one connection (a store::Db) and its prepared statements. It
// is not thread-safe: each thread (in practice, each process's loop thread)
// opens its own. Several processes may share one database: on SQLite, WAL
// mode and a busy timeout let eq-api instances, eq-dispatcher and eqctl
// write concurrently, every read-modify-write being one statement or one
// IMMEDIATE transaction; on PostgreSQL a read-modify-write is one statement,
// or locks the rows it reads (docs/scaling.md, "Several hosts"). Either way
// quota and rate counts stay exact across processes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/enums.h"
#include "common/status.h"
#include "common/timefmt.h"
#include "store/db.h"

namespace eq {

namespace tools {
class Reports;
}

struct QuotaUnits {
  int64_t fast = 0;
  int64_t standard = 0;
  int64_t perfect = 0;
  int64_t of(Mode mode) const {
    return mode == Mode::kFast ? fast : mode == Mode::kStandard ? standard : perfect;
  }
};

// Absolute new values for some modes (eqctl quota set); absent modes keep
// their count, untouched by the write.
struct QuotaChange {
  std::optional<int64_t> fast;
  std::optional<int64_t> standard;
  std::optional<int64_t> perfect;
  std::optional<int64_t> monthly_limit;  // 0: no monthly limit
};

struct NewKeyRequest {
  std::string name;
  std::string env = "production";
  std::string tier = "free";
  QuotaUnits quota;
  int64_t expire_at_ms = 0;
  int rate_limit_per_min = 60;
};

// What eqctl prints once: the full key and secret are never stored.
struct CreatedKey {
  std::string key_id;
  std::string account_id;
  std::string api_key;
  std::string webhook_secret;
  std::string tier;
  std::string display_prefix;
};

// The identity of an authenticated request. The rate limit lives on the
// account, so a rotated key keeps the limit of the key it replaced.
struct AuthContext {
  std::string key_id;
  std::string account_id;
  std::string display_prefix;
  int rate_limit_per_min = 60;
  int64_t expires_at_ms = 0;  // the key's expiry; 0: never
};

struct KeyInfo {
  std::string key_id;
  std::string account_id;
  std::string name;
  std::string env;
  std::string display_prefix;
  std::string status;  // active | revoked (see keyStatusAt for "expired")
  std::string tier;
  int64_t created_at = 0;
  int64_t expires_at = 0;  // 0: never
};

// "active", "revoked" or "expired": what an operator needs to know about a
// key at now_ms. Expiry is not a stored state (see 002_contract.sql).
std::string keyStatusAt(const KeyInfo& key, int64_t now_ms);

struct AccountQuota {
  QuotaUnits remaining;
  int64_t expire_at_ms = 0;
  std::string tier;
  // The monthly volume (docs/contract.md §11): units a calendar month (UTC)
  // over all modes, 0 for none; month_used counts the month that starts at
  // month_start_ms.
  int64_t monthly_limit = 0;
  int64_t month_start_ms = 0;
  int64_t month_used = 0;
  // The units charged in the month of now_ms (or the month that starts at
  // month_start): month_used, or 0 when it counts an earlier month (the
  // next charge starts the count again).
  int64_t usedInMonthOf(int64_t now_ms) const;
  int64_t usedInMonthStarting(int64_t month_start) const {
    return month_start_ms >= month_start ? month_used : 0;
  }
  // Whether the month of now_ms has no unit left under the limit.
  bool monthlyReached(int64_t now_ms) const {
    return monthly_limit > 0 && usedInMonthOf(now_ms) >= monthly_limit;
  }
};

// Everything eqctl key show prints: the key, its account's settings and quota.
struct KeyDetails {
  KeyInfo key;
  int64_t revoked_at = 0;           // 0: not revoked
  std::string rotated_to;           // the key that replaced this one; empty: none
  int rate_limit_per_min = 0;       // the account's
  std::string default_webhook_url;  // the account's; empty: none
  AccountQuota quota;
};

// A partial update of a key and its account (eqctl key set); absent fields
// stay as they are.
struct KeyUpdate {
  std::optional<int> rate_limit_per_min;
  std::optional<std::string> tier;
  std::optional<std::string> default_webhook_url;  // empty string: remove it
  std::optional<int64_t> expires_at_ms;            // 0: never expires
};

// kMonthlyLimit: the mode has units, but the account's monthly volume is
// reached (docs/contract.md §11).
enum class ChargeOutcome { kCharged, kExhausted, kExpired, kMonthlyLimit };

struct RateDecision {
  bool allowed = true;
  int limit = 0;
  int remaining = 0;
  int reset_seconds = 0;  // until the current window ends
};

// Idempotency-Key (docs/contract.md §3). beginIdempotent decides, atomically
// across processes, what a request carrying a key does:
enum class IdempotencyState {
  kStarted,     // first use (or the old record lapsed): run it, then complete or abandon
  kReplay,      // a final response is stored: send it again, charge nothing
  kConflict,    // the key was used with another body or on another endpoint
  kInProgress,  // the first request with this key has not finished yet
};

struct IdempotencyRequest {
  std::string account_id;
  std::string key;          // the header's value
  std::string route;        // "/api/v1/reply" or "/api/v1/reply/async"
  std::string body_sha256;  // raw digest of the request body
  std::string request_id;   // owner of the pending row
};

struct IdempotencyBegin {
  IdempotencyState state = IdempotencyState::kStarted;
  bool other_route = false;   // kConflict: the key was first used on the other endpoint
  int http_status = 0;        // kReplay
  std::string response_body;  // kReplay
};

struct TaskRecord {
  std::string task_id;
  std::string account_id;
  std::string key_id;
  std::string request_id;
  std::string mode;
  // Typed from the store's row on (tasks.status has the same names as its
  // CHECK constraint); createTask always makes a queued task.
  TaskStatus status = TaskStatus::kQueued;
  std::string webhook_url;  // empty: none
  std::string result_json;  // ReplyResponse data once succeeded
  int error_code = 0;
  std::string error_msg;
  int64_t created_at = 0;
  int64_t started_at = 0;  // 0: not yet
  int64_t finished_at = 0;
};

// One webhook delivery of a task (docs/contract.md §6): one id for every attempt,
// retried on a schedule while pending. Its retry state is durable: a pending
// delivery is due at next_attempt_at, whichever dispatcher process is running
// then.
struct DeliveryRecord {
  std::string delivery_id;
  std::string task_id;  // empty: a test event (event "test"), which has no task
  std::string account_id;
  std::string url;
  std::string event;
  DeliveryStatus status = DeliveryStatus::kPending;
  int attempts = 0;  // every attempt ever made, replays included
  int64_t last_attempt_at = 0;
  int last_status = 0;          // HTTP status of the last attempt; 0 when none came back
  int64_t next_attempt_at = 0;  // pending: when the next attempt is due; else 0
  int64_t created_at = 0;
  // Attempts made before the current retry schedule started: a replay starts
  // the schedule over without resetting `attempts`.
  int schedule_offset = 0;
  int64_t replayed_at = 0;  // 0: never replayed
  std::string last_error;   // the last attempt's error; empty when none (or not read)
};

struct DeliveryAttempt {
  int64_t at = 0;
  int http_status = 0;  // 0: no HTTP answer (refused, timed out, blocked)
  int64_t latency_ms = 0;
  std::string error;
  int number = 0;  // 1-based, over the delivery's whole life (filled when read)
};

// An attempt to record and the delivery's state after it
// (Store::finishAttempts).
struct FinishedAttempt {
  std::string delivery_id;
  DeliveryAttempt attempt;
  DeliveryStatus new_status = DeliveryStatus::kPending;
  int64_t next_attempt_at_ms = 0;  // pending: when the next attempt is due
};

// Which deliveries eqctl delivery list shows; empty fields do not filter.
struct DeliveryFilter {
  std::optional<DeliveryStatus> status;
  std::string task_id;
  int limit = 100;  // newest first
};

// An eq-api charge not yet settled (see Store::openCharge).
struct OpenCharge {
  std::string request_id;
  std::string instance_id;
  std::string account_id;
  std::string mode;
  std::string task_id;  // async only
  int64_t deadline_at_ms = 0;
  int64_t created_at_ms = 0;
  // Async only: the job as published (msg::encodeJob), kept until the
  // broker confirmed it so that a sweeper can publish it again. Empty for
  // charges opened by an eq-api older than schema version 7.
  std::string job;
  // The call's Idempotency-Key, empty without one.
  std::string idem_key;
};

// What a sweeper did with an orphaned charge.
struct Settlement {
  OpenCharge charge;
  // "refunded" | "task_failed" | "kept" | "republished"
  // (schema/migrations/007_republish.sql says when each applies).
  std::string action;
  std::string reason;
  bool task_changed = false;  // task_failed: the task was still queued or running
};

// The developer center (docs/contract.md §9, schema/migrations/006_portal.sql).
struct Person {
  std::string person_id;
  std::string email;
  std::string account_id;
  // active | disabled: disabled when the person is (people.status) or their
  // account is (accounts.disabled_at); both are set by disablePerson.
  std::string status;
  std::string password_hash;  // empty until the first password is set
  int64_t created_at = 0;
};

// A one-time link, as read by its token.
struct PortalLink {
  std::string kind;  // invite | reset
  std::string email;
  std::string tier;
  std::string account_id;  // invite: an existing account to attach; else empty
  int64_t expires_at = 0;
};

// A session, as read by its id: who it is and its CSRF token.
struct PortalSession {
  std::string person_id;
  std::string email;
  std::string account_id;
  std::string csrf;
  int64_t created_at = 0;
  int64_t last_seen_at = 0;  // the idle clock

  // The idle clock moves at most once a minute (Store::touchSession): a
  // page's burst of requests costs one write, not one each.
  bool idleClockDue(int64_t now_ms) const { return now_ms - last_seen_at >= 60'000; }
};

// What creating a session returns: the cookie's value, shown once.
struct NewSession {
  std::string session_id;
  std::string csrf;
};

struct UsageRow {
  std::string mode;
  int64_t hour = 0;  // unix ms of the hour's start
  int64_t calls = 0;
  int64_t refunded = 0;
  int64_t tokens = 0;
};

// A key as its account's owner sees it in the developer center.
struct AccountKey {
  std::string key_id;
  std::string name;
  std::string env;
  std::string display_prefix;
  std::string status;  // active | revoked | expired
  int64_t created_at = 0;
  int64_t last_used_at = 0;  // the start of the last rate window it was used in; 0: never
};

// The account's webhook settings; the secrets are read only to be shown to
// their owner after a password check, or to sign.
struct WebhookSettings {
  std::string default_url;
  std::string secret;
  std::string previous_secret;  // empty unless a rotation's overlap is running
  int64_t previous_until = 0;
};

struct TaskFilter {
  std::optional<TaskStatus> status;
  std::string mode;
  int limit = 50;  // newest first
};

class Store {
 public:
  // Opens (creating if needed) the database and applies pending migrations.
  // busy_timeout_ms bounds how long a statement waits for another process's
  // write lock before failing with 503: short in eq-api, which must answer
  // within a second, longer in background processes.
  static Result<std::unique_ptr<Store>> open(const std::string& path,
                                             int busy_timeout_ms = kDefaultBusyTimeoutMs);
  // The same on either engine (EQ_DB_URL): a SQLite file or a PostgreSQL
  // database. busy_timeout_ms is SQLite's (store::Db::setBusyTimeout).
  static Result<std::unique_ptr<Store>> open(const store::DbUrl& url,
                                             int busy_timeout_ms = kDefaultBusyTimeoutMs);
  static constexpr int kDefaultBusyTimeoutMs = 5000;
  // The store a process is configured with (Config::db_url, EQ_DB_URL),
  // the URL's password never in a message. A 503 is a database that cannot
  // be reached now (a supervisor may start the process again); anything
  // else is the operator's to fix: a URL that cannot be read, a password
  // refused, a migration that cannot run (processes exit with 2).
  static Result<std::unique_ptr<Store>> openUrl(std::string_view url,
                                                int busy_timeout_ms = kDefaultBusyTimeoutMs);
  // The exit status of a process whose store would not open: 1 when the
  // database cannot be reached now (503), 2 for what the operator must fix.
  static int exitStatusFor(const Status& open_failure) {
    return open_failure.code() == 503 ? 1 : 2;
  }
  // A stored Idempotency-Key response is replayed for 24 h (docs/contract.md §3).
  static constexpr int64_t kIdempotencyTtlMs = 24 * 3'600'000LL;
  // A pending row older than this belongs to a request whose process died
  // before answering (a live one answers within its sync deadline, 180 s at
  // most by default), so a retry may take it over rather than wait 24 h.
  static constexpr int64_t kIdempotencyLeaseMs = 10 * 60'000LL;
  // Rows purged per insert: bounded so that a backlog never makes one
  // request slow; steady traffic purges faster than rows lapse.
  static constexpr int kIdempotencyPurgeBatch = 100;
  ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Transactions nest (store::Db): begin() opens BEGIN IMMEDIATE (on
  // PostgreSQL, BEGIN) at the outermost level and a SAVEPOINT inside one,
  // so every method below that needs its own transaction also works inside
  // a caller's (eq-api's database thread runs many requests in one batch
  // transaction, one savepoint each). commit()
  // releases the innermost level (COMMIT at the outermost, rolling back if
  // COMMIT itself failed); rollback() undoes only the innermost level.
  Status begin();
  Status commit();
  Status rollback();
  bool inTransaction() const;
  // The same for one scope: begun here, rolled back when it goes unless
  // committed (`auto tx = store.transaction();`). Callers that write a
  // batch use it rather than pairing begin() with rollback() on every path.
  store::Transaction transaction() { return store::Transaction(*db_); }
  // Inside a transaction: its commit need not wait for the disk
  // (store::Db::relaxDurability): for transactions that write only what
  // costs nothing to lose in a database server's crash.
  Status relaxDurability() { return db_->relaxDurability(); }
  // Changes the busy timeout (the database thread of eq-api waits in short
  // slices so that it can give up on requests whose deadline passed). On
  // SQLite the wait polls finely (store/db_sqlite.cc), not SQLite's default
  // back-off.
  void setBusyTimeout(int ms) { db_->setBusyTimeout(ms); }
  // How long a statement waits for a row lock another connection holds
  // (PostgreSQL's lock_timeout; store::Db::setLockTimeout). Open sets it
  // to busy_timeout_ms as well.
  void setLockTimeout(int ms) { db_->setLockTimeout(ms); }
  store::DbEngine engine() const { return db_->engine(); }

  // WAL checkpoints. By default a connection checkpoints in the COMMIT
  // that takes the WAL past 1000 pages, inside whatever the committing
  // thread holds. The dispatcher turns that off on its connections (its
  // commits happen under its write gate) and checkpoints from the sender
  // thread's loop instead, outside the gate: PASSIVE copies what no reader
  // needs and never waits for or blocks a writer. Both do nothing on
  // PostgreSQL, which has no WAL file of ours to checkpoint.
  Status disableAutoCheckpoint();
  Status checkpointPassive();

  // Readiness probe for /readyz: takes and releases the write lock, because
  // every request eq-api serves writes (the rate counter); a database that
  // can be read but not written is not ready. Taking the lock writes
  // nothing, so a full disk does not stop it: ping() also fails while
  // storageFailing().
  Status ping();

  // True from a write that failed for want of space or with an I/O error
  // (SQLITE_FULL, SQLITE_IOERR_*: on the database file, its WAL or a
  // journal; PostgreSQL's disk_full and io_error) until a later write of
  // this connection commits. While it holds, reads still work and every
  // write fails, so a process can answer "not ready" instead of "busy"; it
  // clears by itself once space is freed and something writes again
  // (eq-api's instance heartbeat retries every 100 ms, api/db_thread.h).
  // Per connection, like the rest of a Store.
  bool storageFailing() const { return db_->storageFailing(); }
  // Status(503) naming the storage failure while storageFailing(), else ok.
  Status storageStatus() const;

  // Keys and accounts.
  Result<CreatedKey> createKey(const NewKeyRequest& req);
  // Looks a presented key up by its hash. nullopt: unknown, revoked, expired
  // at now_ms, or a key of the other environment.
  Result<std::optional<AuthContext>> authenticate(const std::string& api_key,
                                                  const std::string& env, int64_t now_ms);
  // The same lookup by the key's SHA-256 digest (eq-api hashes on its loop
  // thread, where its key cache is keyed by the digest).
  Result<std::optional<AuthContext>> authenticateDigest(const std::string& digest,
                                                        const std::string& env, int64_t now_ms);
  Result<std::vector<KeyInfo>> listKeys();
  // Moves (by trigger, 004_key_epoch.sql) with every change to a key or to
  // an account's rate limit: a copy of an AuthContext read under an older
  // epoch may be stale.
  Result<int64_t> keyEpoch();
  Result<KeyDetails> keyDetails(const std::string& key_id);
  Status revokeKey(const std::string& key_id);
  // Issues a new key for the same account (quota, tasks, webhook secret,
  // default webhook URL and rate limit stay: they belong to the account).
  // Without old_until_ms the old key is revoked in the same transaction, so
  // there is no moment with both or neither working; with it the old key
  // keeps working until then (its expiry moves there, never later than it
  // was), so that clients can switch in the meantime. The new key expires
  // when the old one did, unless expires_at_ms says otherwise (0: never).
  // The returned CreatedKey has no webhook_secret: the account's secret is
  // unchanged and was printed when the account was created. 404 when the
  // key is unknown or revoked; 409 when it was rotated already (it is in
  // its overlap: revoke it, or rotate the key that replaced it).
  Result<CreatedKey> rotateKey(const std::string& key_id, std::optional<int64_t> expires_at_ms,
                               int64_t now_ms, std::optional<int64_t> old_until_ms = {});
  // 404 when the key is unknown.
  Status updateKey(const std::string& key_id, const KeyUpdate& update);
  // The account behind a key id, for eqctl commands that take a key id.
  Result<std::string> accountOfKey(const std::string& key_id);

  // Quota. charge/refund are single statements, so two concurrent callers
  // never both take the last unit.
  Result<ChargeOutcome> chargeQuota(const std::string& account_id, const std::string& mode,
                                    int64_t now_ms);
  // Both also keep the usage record of the hour (usage_hourly), in the same
  // transaction: calls - refunded is always what the quota lost.
  // A refund gives the unit back to the month it was charged in
  // (charged_at_ms): a unit charged last month leaves this month's count
  // alone.
  Status refundQuota(const std::string& account_id, const std::string& mode, int64_t charged_at_ms,
                     int64_t now_ms);
  Result<AccountQuota> quota(const std::string& account_id);
  // A call's admission: the charge of chargeQuota and, when it is charged,
  // its open charge (openCharge) and, for an async call (charge.task_id
  // set), its queued task (createTask: the call's id, account, mode and
  // time, made with key_id and webhook_url, empty for the account's
  // default), all or none. One statement on PostgreSQL, one round trip
  // where there were two; the same statements in turn on SQLite.
  Result<ChargeOutcome> chargeAndOpen(const OpenCharge& charge, const std::string& key_id,
                                      const std::string& webhook_url);
  // A batch's admissions at once, each as chargeAndOpen would make it: per
  // account and mode, in their order, the calls are charged while the mode
  // has units and the month volume (one outcome each, in `calls`' order;
  // the groups taken in the order of their first calls, on both engines, so
  // a later call of an earlier group may take a month's last unit before an
  // earlier call of another mode). A group's quota expiry is judged at its
  // latest call's time. Inside a transaction that is lost midway, the calls
  // left fail (503) rather than being charged in a new one.
  // On PostgreSQL one statement per account and mode, which takes the
  // account's row once for all of them (a row updated once a call, each in
  // a savepoint of its own, grows a chain of versions every later update
  // of the batch walks); in a savepoint each, so that one failing fails
  // only its own calls. On SQLite chargeAndOpen for each.
  struct ChargeCall {
    OpenCharge charge;
    std::string key_id;
    std::string webhook_url;  // empty: the account's default
  };
  std::vector<Result<ChargeOutcome>> chargeAndOpenAll(const std::vector<ChargeCall>& calls);
  // The quota of several accounts, by account id (one statement on
  // PostgreSQL); an account that does not exist is absent.
  Result<std::map<std::string, AccountQuota>> quotas(const std::vector<std::string>& account_ids);
  // A copy of the whole database in a new file (store::Db::backupTo):
  // SQLite only, while the stack runs.
  Status backupTo(const std::string& path, bool replace) { return db_->backupTo(path, replace); }
  // Takes the accounts' advisory locks, held until the transaction ends, in
  // one order (PostgreSQL; on SQLite the transaction holds the database's
  // write lock already, and these do nothing). Whatever writes the rows of
  // several accounts in one transaction (their quota, their usage rows)
  // takes them first: eq-api's batches and eq-dispatcher's batches of task
  // events. Two transactions that share accounts then wait for each
  // other's commit instead of each holding a row the other wants until the
  // lock timeout. Row locks would order them too, but a row locked by the
  // transaction and then updated in a savepoint costs a MultiXact each
  // time. A failure (a lock timeout) undoes only the locks. (The sweeps of
  // a dead eq-api's charges lock those first and do without these: rare,
  // and a crossing there is what PostgreSQL's deadlock check ends.)
  Status lockAccounts(const std::vector<std::string>& account_ids);
  // The advisory locks of the accounts that own these tasks.
  Status lockTaskAccounts(const std::vector<std::string>& task_ids);
  // One UPDATE; modes absent from `units` are not written, so a charge
  // landing meanwhile is never undone.
  Status setQuota(const std::string& account_id, const QuotaChange& units,
                  std::optional<int64_t> expire_at_ms, std::optional<std::string> tier);
  // Adds units to each mode in one UPDATE (a concurrent charge is neither
  // lost nor doubled), and optionally moves expire_at.
  Status grantQuota(const std::string& account_id, const QuotaUnits& add,
                    std::optional<int64_t> expire_at_ms);

  // Counts one request against the key's current one-minute window.
  Result<RateDecision> countRequest(const AuthContext& auth, int64_t now_ms);
  // Counts n requests of one key in the window that starts at window_start
  // with one UPSERT and returns the window's count after them: the n
  // requests own the counts (count - n, count], in order, exactly as if
  // each had been counted alone, across every process on this database.
  Result<int64_t> countRequests(const std::string& key_id, int64_t window_start, int64_t n);
  // The same for several keys (or windows) at once, each (key_id,
  // window_start) given once; the counts come back in the increments'
  // order. On PostgreSQL one statement for them all, taking their rows in
  // one order (so two processes' batches never wait on each other in a
  // cycle) for one round trip, where a statement a key cost one each.
  struct RateIncrement {
    std::string key_id;
    int64_t window_start = 0;
    int64_t n = 0;
  };
  Result<std::vector<int64_t>> countRequests(const std::vector<RateIncrement>& increments);
  // The decision for the request that got `count` in its window.
  static RateDecision rateDecision(int limit, int64_t count, int64_t window_start, int64_t now_ms);
  static int64_t rateWindowStart(int64_t now_ms) { return now_ms - now_ms % 60'000; }
  // The developer center's playground (issue 25): one request of the
  // account's session, counted against the account's rate limit under the
  // counter "portal:<account_id>", the playground being one more caller of
  // the account beside its keys.
  Result<RateDecision> countPlaygroundRequest(const std::string& account_id, int64_t now_ms);

  // Idempotency-Key records. beginIdempotent inserts a pending row or reads
  // the existing one, in one transaction (store/idempotency.cc says how it
  // stays atomic across processes on each engine), and purges a bounded
  // batch of rows older than kIdempotencyTtlMs on the way. complete stores
  // the final response; abandon deletes the row so a retry runs again. Both
  // touch the row only while request_id still owns it.
  Result<IdempotencyBegin> beginIdempotent(const IdempotencyRequest& req, int64_t now_ms);
  Status completeIdempotent(const IdempotencyRequest& req, int http_status,
                            const std::string& response_body);
  Status abandonIdempotent(const IdempotencyRequest& req);

  // Tasks: creation and one function per transition of docs/contract.md §5. A
  // transition from a state that does not allow it changes nothing and
  // returns false (events may arrive twice or late; handlers are idempotent).
  // Without a webhook_url the account's default one (eqctl) is used, if any.
  Status createTask(const TaskRecord& task);
  Result<std::optional<TaskRecord>> task(const std::string& task_id);
  // Those of the tasks that exist, by id (one read on PostgreSQL).
  Result<std::map<std::string, TaskRecord>> tasks(const std::vector<std::string>& task_ids);
  // Task transitions, guarded by the current state: true when applied.
  Result<bool> markTaskRunning(const std::string& task_id, int64_t at_ms);
  // markTaskRunning, queued (store::Db::queue): whether it applied is not
  // known, and a failure shows at the next statement or the commit.
  Status queueTaskRunning(const std::string& task_id, int64_t at_ms);
  // When applied and `after` is given, the task as it now is.
  Result<bool> markTaskSucceeded(const std::string& task_id, const std::string& result_json,
                                 int64_t at_ms, TaskRecord* after = nullptr);
  // Also refunds the task's quota unit, in the same transaction.
  Result<bool> markTaskFailed(const std::string& task_id, int code, const std::string& msg,
                              int64_t at_ms);
  // Account's webhook secret (for signing).
  Result<std::string> webhookSecret(const std::string& account_id);
  // Both secrets that sign at now_ms: the current one, and the previous one
  // during a rotation's overlap (empty otherwise).
  Result<std::pair<std::string, std::string>> signingSecrets(const std::string& account_id,
                                                             int64_t now_ms);

  // Deliveries. createDelivery inserts the task's delivery, pending and due
  // at now_ms, or returns the existing one (a task has at most one delivery,
  // so a redelivered event never sends twice).
  Result<DeliveryRecord> createDelivery(const std::string& task_id, const std::string& url,
                                        const std::string& event, int64_t now_ms);
  // Inserts the task's delivery, pending and due at due_at_ms: now, or the
  // end of a claim's lease when the caller sends the first attempt itself
  // (the dispatcher's consumer, dispatcher/slots.h). Nullopt, and nothing
  // inserted, when the task has a delivery already.
  Result<std::optional<DeliveryRecord>> insertDelivery(const std::string& task_id,
                                                       const std::string& url,
                                                       const std::string& event, int64_t now_ms,
                                                       int64_t due_at_ms);
  Result<std::optional<DeliveryRecord>> deliveryForTask(const std::string& task_id);
  Result<std::optional<DeliveryRecord>> delivery(const std::string& delivery_id);
  // Newest first, with last_error filled.
  Result<std::vector<DeliveryRecord>> listDeliveries(const DeliveryFilter& filter);
  // Every attempt of a delivery, oldest first.
  Result<std::vector<DeliveryAttempt>> deliveryAttempts(const std::string& delivery_id);
  // Claims up to `limit` pending deliveries due at now_ms, oldest due first,
  // in one transaction: each one's next_attempt_at moves to lease_until_ms,
  // so neither a later scan nor another dispatcher picks it up while its
  // attempt runs, and if this process dies mid-attempt it becomes due again
  // then. `admit`, when given, is asked about each due delivery's account in
  // that order and may refuse it (the account has its share of attempts in
  // flight): a refused delivery stays due and unclaimed, and later ones are
  // still considered. An account `admit` refuses once it refuses for the
  // rest of the walk (a share only fills as the walk claims), so the walk
  // may pass over that account's later rows without asking. last_error is
  // not filled.
  Result<std::vector<DeliveryRecord>> claimDueDeliveries(
      int64_t now_ms, int64_t lease_until_ms, int limit,
      const std::function<bool(const std::string& account_id)>& admit = {});
  // Whether any pending delivery is due at now_ms: a read only, so that a
  // caller can skip opening a write transaction for a claim that finds
  // nothing (most periodic scans).
  Result<bool> anyDeliveryDue(int64_t now_ms);
  // Records one attempt (delivery_attempts row, counters) and the delivery's
  // new state in one transaction: "pending" with next_attempt_at_ms, or
  // "delivered" / "failed". Only a pending delivery is changed; false when
  // it was not pending (or no longer exists).
  Result<bool> finishAttempt(const std::string& delivery_id, const DeliveryAttempt& attempt,
                             DeliveryStatus new_status, int64_t next_attempt_at_ms);
  // finishAttempt for each: whether each was recorded, in their order. On
  // PostgreSQL in one statement (all or none); on SQLite each in a
  // transaction of its own (a savepoint inside the caller's), and a failure
  // stops at that attempt.
  Result<std::vector<bool>> finishAttempts(const std::vector<FinishedAttempt>& attempts);
  // Hands a claimed delivery back without an attempt (shutdown): due at due_ms.
  Status releaseDelivery(const std::string& delivery_id, int64_t due_ms);
  // eqctl delivery replay: a delivered or failed delivery becomes pending
  // and due at now_ms, with the same id; its attempts keep counting and its
  // retry schedule starts over. 404 unknown, 409 already pending.
  Result<DeliveryRecord> replayDelivery(const std::string& delivery_id, int64_t now_ms);
  // eq-dispatcher's metrics: deliveries still pending (the retry queue
  // depth), a read on the deliveries_due index.
  Result<int64_t> countPendingDeliveries();

  // Crash-safe accounting (schema/migrations/005_settlement.sql). An eq-api
  // process registers itself and keeps its heartbeat; every charge it has
  // not settled yet is an open charge, opened in the transaction that
  // charges and closed in the one that settles.
  Status registerInstance(const std::string& instance_id, int64_t pid, int64_t now_ms);
  Status heartbeatInstance(const std::string& instance_id, int64_t now_ms);
  // A clean exit: the process settled what it had; anything left is swept.
  Status removeInstance(const std::string& instance_id);
  Status openCharge(const OpenCharge& charge);
  // Deletes the open charge; false when there was none (a sweeper settled
  // it first). Settle only when true: that is what makes settling exact.
  Result<bool> closeCharge(const std::string& request_id);
  // closeCharge for many answered calls at once (one statement on
  // PostgreSQL): the request ids it closed, in no particular order.
  Result<std::vector<std::string>> closeCharges(const std::vector<std::string>& request_ids);
  // Settles every open charge whose process has had no heartbeat since
  // now_ms - stale_ms, or whose deadline passed before now_ms - grace_ms,
  // except those claimOrphanedJobs() takes: a sync charge is refunded; an
  // async one whose task has left `queued` is kept (its job reached the
  // broker, the task's own outcome settles the unit); an async one whose
  // task is queued and whose job was not kept (an eq-api older than schema
  // version 7) fails its task, which refunds it. Each is recorded in
  // settlements. Runs in a transaction of its own (a savepoint inside the
  // caller's); on PostgreSQL the charges it settles are locked until the
  // outermost commit and passed over by other sweepers meanwhile, so each
  // is settled once whatever number of dispatchers sweep.
  Result<std::vector<Settlement>> settleOrphanedCharges(int64_t now_ms, int64_t stale_ms,
                                                        int64_t grace_ms);
  // Whether any orphaned charge (as above) of an async call has its task
  // still queued and its job kept, claimed or not: a read, which the
  // republisher's sweep makes before it connects and claims.
  Result<bool> anyOrphanedJob(int64_t now_ms, int64_t stale_ms, int64_t grace_ms);
  // Claims those charges, oldest first, at most `limit`, that nobody's
  // claim holds: each gets a lease until lease_until_ms, during which no
  // other claim takes it (several dispatchers each take different ones).
  // Nobody can tell whether their job reached the broker, so the caller
  // publishes each again and, once the broker confirmed it, settles it
  // with settleRepublished(); what it does not settle it hands back with
  // releaseOrphanedJobs(), or the lease ends. A job may then run twice; its
  // task still ends once (transitions are guarded by state) and is charged
  // once.
  Result<std::vector<OpenCharge>> claimOrphanedJobs(int64_t now_ms, int64_t stale_ms,
                                                    int64_t grace_ms, int64_t lease_until_ms,
                                                    int limit);
  // Ends the claims of claimOrphanedJobs() on these charges, those that
  // still hold the lease it set (lease_until_ms).
  Status releaseOrphanedJobs(const std::vector<std::string>& request_ids, int64_t lease_until_ms);
  // Closes the open charge of a job published again and records it
  // (action "republished"); false when someone else closed it first. Runs
  // inside the caller's transaction.
  Result<bool> settleRepublished(const OpenCharge& charge, int64_t now_ms);
  // Fails the task of an orphaned job the broker keeps refusing, which
  // refunds it, closes the charge and records it (action "task_failed");
  // false when someone else closed the charge first. Runs inside the
  // caller's transaction.
  Result<bool> settleUnpublishable(const OpenCharge& charge, int64_t now_ms,
                                   const std::string& reason);
  // Drops the job kept with an open charge: its call is not going to be
  // accepted (eq-api answered 503), so a sweeper must fail the task rather
  // than publish the job again.
  Status forgetChargeJob(const std::string& request_id);
  // Settlement records and dead instances older than cutoff_ms.
  Result<int> purgeSettlementsBefore(int64_t cutoff_ms, int limit);

  // The developer center (store/portal.cc). Emails are matched
  // lower-cased. One-time link and session ids are random 256-bit values;
  // only their SHA-256 is stored.
  static constexpr int64_t kLinkTtlMs = 72 * 3'600'000LL;
  static constexpr int64_t kSessionIdleMs = 12 * 3'600'000LL;
  static constexpr int64_t kSessionMaxMs = 7 * 24 * 3'600'000LL;
  static constexpr int64_t kSecretOverlapMs = 24 * 3'600'000LL;
  static constexpr int64_t kSigninWindowMs = 15 * 60'000LL;
  static constexpr int kSigninMaxFailures = 10;
  static constexpr int64_t kMaxActiveKeys = 50;  // per account, made in the developer center
  // An invitation (kind "invite") or a reset link; returns the token, which
  // is shown once. A reset needs a person with that email (404) who is not
  // disabled (409). An invitation is for someone new: an email that has a
  // person, or an account (account_id) that has one, is refused (409; a
  // reset link is what such a person needs), and so is a disabled account.
  Result<std::string> createPortalLink(const std::string& kind, const std::string& email,
                                       const std::string& tier, const std::string& account_id,
                                       int64_t now_ms);
  // A link that is unused and unexpired at now_ms; nullopt otherwise.
  Result<std::optional<PortalLink>> portalLink(const std::string& token, int64_t now_ms);
  // The link as it can be used now: 404 when used, revoked, expired or
  // unknown (or a reset whose person is gone), 403 when its person or
  // account is disabled, 409 when an invitation's email (or account) has a
  // person by now (registered, or invited by another link since).
  Result<PortalLink> usablePortalLink(const std::string& token, int64_t now_ms);
  // Sets the password through a link and uses the link up, in one
  // transaction: an invitation makes the person (and, unless the link names
  // one, a new account with its tier's quota), a reset replaces the
  // password and ends every session, and never touches the account, its
  // tier or its keys. Every other outstanding link of the email is revoked
  // with it. Refused as usablePortalLink() says.
  Result<Person> usePortalLink(const std::string& token, const std::string& password_hash,
                               int64_t now_ms);
  // Revokes every unused link of the email (marks it used at now_ms).
  Status revokePortalLinks(const std::string& email, int64_t now_ms);
  // A password change by a signed-in person, in one transaction: the new
  // hash, every session of theirs ended (the one that asked included), their
  // outstanding links revoked, and a new session for the one that asked,
  // with a new id and CSRF token (a copied cookie does not outlive it).
  Result<NewSession> changePassword(const std::string& person_id, const std::string& password_hash,
                                    int64_t now_ms);
  // Open registration: a new account on the free tier and its person; 409
  // when the email is taken.
  Result<Person> registerPerson(const std::string& email, const std::string& password_hash,
                                int64_t now_ms);
  Result<std::optional<Person>> personByEmail(const std::string& email);
  Result<std::optional<Person>> person(const std::string& person_id);
  Result<std::vector<Person>> listPeople();
  // Disables the person (every session ends) and the account's keys.
  Status disablePerson(const std::string& email, int64_t now_ms);
  Status setPassword(const std::string& person_id, const std::string& password_hash,
                     int64_t now_ms);
  Result<NewSession> createSession(const std::string& person_id, int64_t now_ms);
  // The live session with this id at now_ms; nullopt when unknown, idle
  // for 12 h, older than 7 days, or its person or account is disabled. A
  // read: the caller moves the idle clock (touchSession) once it holds the
  // session's account lock, as every writer of the account's rows does.
  Result<std::optional<PortalSession>> session(const std::string& session_id, int64_t now_ms);
  // Moves the session's idle clock to now_ms when it is due
  // (PortalSession::idleClockDue); nothing otherwise.
  Status touchSession(const std::string& session_id, const PortalSession& s, int64_t now_ms);
  Status endSession(const std::string& session_id);
  // Failed sign-ins in the window before now_ms, per scope.
  Result<int64_t> signinFailures(const std::string& scope, int64_t now_ms,
                                 int64_t window_ms = kSigninWindowMs);
  // Records one; returns its row id (for forgetSigninFailures).
  Result<int64_t> recordSigninFailure(const std::string& scope, int64_t now_ms);
  // When the limit of `max` in the window lifts: the oldest attempt that
  // keeps it at the maximum leaves the window.
  Result<int64_t> signinRetryAt(const std::string& scope, int64_t now_ms,
                                int64_t window_ms = kSigninWindowMs,
                                int64_t max = kSigninMaxFailures);
  // A password about to be checked (a sign-in, or a signed-in person's
  // password before a secret is shown or changed), in one writing step: if
  // any scope has kSigninMaxFailures in the window, retry_at_ms says when
  // the first of them lifts and nothing is recorded; otherwise the attempt
  // is recorded as a failure in every scope now, before the slow check, so
  // that attempts running at the same time count each other. A right
  // password takes its rows back (forgetSigninFailures).
  struct PasswordAttempt {
    int64_t retry_at_ms = 0;       // > 0: limited, not recorded
    std::vector<int64_t> counted;  // the rows recorded
  };
  Result<PasswordAttempt> beginPasswordAttempt(const std::vector<std::string>& scopes,
                                               int64_t now_ms);
  // The same with a limit of its own per scope: at most `max` attempts in
  // the `window_ms` before now (beginPasswordAttempt is this with
  // kSigninMaxFailures in kSigninWindowMs for every scope).
  struct AttemptLimit {
    std::string scope;
    int64_t max = kSigninMaxFailures;
    int64_t window_ms = kSigninWindowMs;
  };
  Result<PasswordAttempt> beginLimitedAttempt(const std::vector<AttemptLimit>& limits,
                                              int64_t now_ms);
  // Open registration's scopes (issue 25), kept in signin_failures (and
  // purged) for the longest of their windows. Every registration is
  // recorded in both, a successful one too, and none is taken back.
  static constexpr std::string_view kRegisterScopePrefix = "register:";
  static constexpr int64_t kRegisterAddressWindowMs = 24 * 3'600'000LL;
  static constexpr int64_t kRegisterAllWindowMs = 3'600'000LL;
  Status forgetSigninFailures(const std::vector<int64_t>& rows);

  Result<std::vector<UsageRow>> usage(const std::string& account_id, int64_t since_ms);
  // Tokens of a call that succeeded, added to its hour.
  Status recordTokens(const std::string& account_id, const std::string& mode, int64_t tokens,
                      int64_t now_ms);
  Result<std::vector<AccountKey>> accountKeys(const std::string& account_id, int64_t now_ms);
  // A new key for an existing account (the account's secret is unchanged
  // and not returned); 409 at kMaxActiveKeys active keys.
  Result<CreatedKey> createAccountKey(const std::string& account_id, const std::string& name,
                                      const std::string& env, int64_t now_ms);
  Result<WebhookSettings> webhookSettings(const std::string& account_id, int64_t now_ms);
  Status setDefaultWebhookUrl(const std::string& account_id, const std::string& url);
  // A new secret; the current one keeps signing for kSecretOverlapMs.
  // Returns the new secret.
  Result<std::string> rotateWebhookSecret(const std::string& account_id, int64_t now_ms);
  // A delivery of event "test" to url, pending and due now; one attempt.
  // 409 while the account's previous test event is still pending.
  Result<DeliveryRecord> createTestDelivery(const std::string& account_id, const std::string& url,
                                            int64_t now_ms);
  Result<std::vector<DeliveryRecord>> accountDeliveries(const std::string& account_id,
                                                        std::optional<DeliveryStatus> status,
                                                        int limit);
  Result<std::vector<TaskRecord>> accountTasks(const std::string& account_id,
                                               const TaskFilter& filter);
  // Expired sessions, links and failures, and finished test deliveries
  // older than cutoff_ms (run by eq-dispatcher's retention).
  Result<int> purgePortalBefore(int64_t cutoff_ms, int64_t now_ms, int limit);

  // Retention (run by eq-dispatcher). Each call deletes at most `limit` rows
  // (tasks: with their delivery and its attempts) in one transaction, oldest
  // first, and returns how many it deleted; callers repeat while the answer
  // equals `limit`. A task whose delivery is still pending is kept until the
  // delivery has finished.
  Result<int> purgeTasksBefore(int64_t cutoff_ms, int limit);
  Result<int> purgeIdempotencyBefore(int64_t cutoff_ms, int limit);
  Result<int> purgeRateCountersBefore(int64_t cutoff_ms, int limit);

 private:
  // Why chargeQuota charged nothing: the quota expired or ran out.
  Result<ChargeOutcome> whyNotCharged(const std::string& account_id, std::string_view mode,
                                      int64_t now_ms);
  // eqctl's report queries (tools/reports.h) are SQL too, but no process
  // but eqctl needs them: they live in tools/ and run on the Store's connection.
  friend class tools::Reports;
  explicit Store(std::unique_ptr<store::Db> db) : db_(std::move(db)) {}
  // One statement on the connection; a failure's message names `what`.
  Result<int64_t> exec(const char* what, const store::Sql& sql,
                       std::initializer_list<store::Value> values = {},
                       const store::RowFn& onRow = {});
  // One statement whose answer nobody waits for (store::Db::queue): inside
  // a transaction on PostgreSQL it goes with the next statement that does.
  Status queue(const char* what, const store::Sql& sql,
               std::initializer_list<store::Value> values = {});
  // An account an invitation may attach (--key): 404 unknown, 403 disabled,
  // 409 already has a person.
  Status inviteAccountFree(const std::string& account_id);
  // lockAccounts' and lockTaskAccounts' statement, its one parameter the ids.
  Status lockAccountsWhere(const char* what, const std::string& pg_text,
                           const std::vector<std::string>& ids);
  // The usage record's side of a charge (calls) or refund (refunded).
  Status countUsage(const std::string& account_id, const std::string& mode, int64_t now_ms,
                    int64_t calls, int64_t refunded);
  // A sweeper's settlement row (schema/migrations/005_settlement.sql).
  Status recordSettlement(const Settlement& s, int64_t now_ms);
  // Settles the Idempotency-Key record of a settled charge, if the call had
  // one: kept or republished, the record answers with the task the client
  // was charged for; refunded or failed, it is dropped so a retry runs.
  Status settleIdempotencyOf(const Settlement& s);
  // beginIdempotent's read of an existing record, inside its transaction.
  Result<IdempotencyBegin> readIdempotent(const IdempotencyRequest& req, int64_t now_ms,
                                          bool* take);

  std::unique_ptr<store::Db> db_;
};

}  // namespace eq
