#include "common/store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <string>

#include "common/crypto.h"
#include "common/timefmt.h"

using namespace eq;

namespace {

// A fresh database file per test, removed afterwards.
struct TempDb {
  std::string path;
  std::unique_ptr<Store> store;
  TempDb() {
    char tmpl[] = "/tmp/eq-store-XXXXXX";
    int fd = mkstemp(tmpl);
    ::close(fd);
    path = tmpl;
    auto s = Store::open(path);
    BOOST_REQUIRE(s.isOk());
    store = std::move(s).value();
  }
  ~TempDb() {
    store.reset();
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  }
  CreatedKey key(int64_t units = 100, const std::string& env = "production") {
    NewKeyRequest req;
    req.name = "test";
    req.env = env;
    req.quota = QuotaUnits{units, units, units};
    req.expire_at_ms = nowMs() + 86'400'000;
    auto k = store->createKey(req);
    BOOST_REQUIRE(k.isOk());
    return k.value();
  }
  // Reads one text cell straight from SQLite, bypassing the Store.
  std::string scalar(const std::string& sql) {
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr);
    std::string out;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_blob(st, 0) != nullptr) {
      out.assign(static_cast<const char*>(sqlite3_column_blob(st, 0)),
                 static_cast<size_t>(sqlite3_column_bytes(st, 0)));
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(store_tests)

BOOST_AUTO_TEST_CASE(keys_are_stored_only_as_sha256) {
  TempDb db;
  CreatedKey k = db.key();
  BOOST_TEST(k.api_key.rfind("eq_live_", 0) == 0);
  BOOST_TEST(k.api_key.size() == 8u + 43u);
  BOOST_TEST(k.webhook_secret.rfind("whsec_", 0) == 0);
  std::string stored = db.scalar("SELECT key_hash FROM api_keys");
  BOOST_TEST(stored == crypto::sha256(k.api_key));
  // Nothing in the file holds the key itself.
  BOOST_TEST(db.scalar("SELECT count(*) FROM api_keys WHERE instr(key_hash, '" + k.api_key +
                       "') > 0 OR instr(display_prefix, '" + k.api_key + "') > 0") == "0");
  BOOST_TEST(db.scalar("SELECT display_prefix FROM api_keys") == k.api_key.substr(0, 16));
}

BOOST_AUTO_TEST_CASE(authenticate_checks_hash_env_and_revocation) {
  TempDb db;
  CreatedKey k = db.key();
  auto ok = db.store->authenticate(k.api_key, "production", nowMs());
  BOOST_REQUIRE(ok.isOk());
  BOOST_REQUIRE(ok.value().has_value());
  BOOST_TEST(ok.value()->account_id == k.account_id);
  std::string wrong = k.api_key;
  wrong.back() = wrong.back() == 'A' ? 'B' : 'A';
  BOOST_TEST(!db.store->authenticate(wrong, "production", nowMs()).value().has_value());
  BOOST_TEST(!db.store->authenticate(k.api_key, "staging", nowMs()).value().has_value());
  BOOST_TEST(db.store->revokeKey(k.key_id).isOk());
  BOOST_TEST(!db.store->authenticate(k.api_key, "production", nowMs()).value().has_value());
  BOOST_TEST(db.store->revokeKey(k.key_id).code() == 404);
}

BOOST_AUTO_TEST_CASE(quota_charges_down_to_zero_then_refuses) {
  TempDb db;
  CreatedKey k = db.key(2);
  int64_t now = nowMs();
  BOOST_TEST((db.store->chargeQuota(k.account_id, "fast", now).value() == ChargeOutcome::kCharged));
  BOOST_TEST((db.store->chargeQuota(k.account_id, "fast", now).value() == ChargeOutcome::kCharged));
  BOOST_TEST((db.store->chargeQuota(k.account_id, "fast", now).value() == ChargeOutcome::kExhausted));
  BOOST_TEST(db.store->quota(k.account_id).value().remaining.fast == 0);
  BOOST_TEST(db.store->quota(k.account_id).value().remaining.standard == 2);
  BOOST_TEST(db.store->refundQuota(k.account_id, "fast").isOk());
  BOOST_TEST(db.store->quota(k.account_id).value().remaining.fast == 1);
  // Past expire_at nothing is charged, and the caller learns why.
  BOOST_TEST((db.store->chargeQuota(k.account_id, "standard", now + 2 * 86'400'000).value() ==
              ChargeOutcome::kExpired));
}

BOOST_AUTO_TEST_CASE(rate_counter_allows_the_limit_per_window) {
  TempDb db;
  CreatedKey k = db.key();
  AuthContext who = db.store->authenticate(k.api_key, "production", nowMs()).value().value();
  int64_t t = 1'800'000'000'000;  // a window boundary (divisible by 60 000)
  for (int i = 1; i <= 60; ++i) {
    RateDecision d = db.store->countRequest(who, t + 10).value();
    BOOST_TEST(d.allowed);
    BOOST_TEST(d.remaining == 60 - i);
  }
  RateDecision over = db.store->countRequest(who, t + 20'000).value();
  BOOST_TEST(!over.allowed);
  BOOST_TEST(over.reset_seconds == 40);
  BOOST_TEST(db.store->countRequest(who, t + 60'000).value().allowed);  // next window
}

BOOST_AUTO_TEST_CASE(task_transitions_are_guarded_and_failure_refunds) {
  TempDb db;
  CreatedKey k = db.key(5);
  TaskRecord t;
  t.task_id = "tsk_a";
  t.account_id = k.account_id;
  t.key_id = k.key_id;
  t.request_id = "req_a";
  t.mode = "perfect";
  t.created_at = nowMs();
  BOOST_TEST(db.store->chargeQuota(k.account_id, "perfect", nowMs()).isOk());
  BOOST_TEST(db.store->createTask(t).isOk());
  BOOST_TEST(db.store->markTaskRunning("tsk_a", 1).value());
  BOOST_TEST(!db.store->markTaskRunning("tsk_a", 2).value());  // already running
  BOOST_TEST(db.store->task("tsk_a").value()->started_at == 1);
  BOOST_TEST(db.store->markTaskFailed("tsk_a", 500, "boom", 3).value());
  BOOST_TEST(db.store->quota(k.account_id).value().remaining.perfect == 5);  // refunded
  BOOST_TEST(!db.store->markTaskFailed("tsk_a", 500, "boom", 4).value());   // once only
  BOOST_TEST(db.store->quota(k.account_id).value().remaining.perfect == 5);
  BOOST_TEST(!db.store->markTaskSucceeded("tsk_a", "{}", 5).value());  // final stays final
  BOOST_TEST(db.store->task("tsk_a").value()->status == "failed");
}

BOOST_AUTO_TEST_CASE(status_check_constraint_rejects_unknown_states) {
  TempDb db;
  CreatedKey k = db.key();
  TaskRecord t{"tsk_b", k.account_id, k.key_id, "req_b", "fast", "", "", "", 0, "", 1, 0, 0};
  BOOST_TEST(db.store->createTask(t).isOk());
  sqlite3* raw = nullptr;
  sqlite3_open(db.path.c_str(), &raw);
  int rc = sqlite3_exec(raw, "UPDATE tasks SET status = 'lost'", nullptr, nullptr, nullptr);
  sqlite3_close(raw);
  BOOST_TEST(rc == SQLITE_CONSTRAINT);
}

BOOST_AUTO_TEST_CASE(migrations_apply_once) {
  TempDb db;
  db.store.reset();
  auto again = Store::open(db.path);  // a second process starting on the same file
  BOOST_REQUIRE(again.isOk());
  BOOST_TEST(db.scalar("SELECT count(*) FROM schema_migrations") == "2");
}

BOOST_AUTO_TEST_CASE(expired_key_is_not_authenticated) {
  TempDb db;
  CreatedKey k = db.key();
  int64_t t = nowMs() + 3'600'000;
  KeyUpdate u;
  u.expires_at_ms = t;
  BOOST_REQUIRE(db.store->updateKey(k.key_id, u).isOk());
  BOOST_TEST(db.store->authenticate(k.api_key, "production", t - 1).value().has_value());
  BOOST_TEST(!db.store->authenticate(k.api_key, "production", t).value().has_value());
  BOOST_TEST(keyStatusAt(db.store->keyDetails(k.key_id).value().key, t) == "expired");
  // Clearing the expiry brings the key back; expiry is not a stored state.
  u.expires_at_ms = 0;
  BOOST_REQUIRE(db.store->updateKey(k.key_id, u).isOk());
  BOOST_TEST(db.store->authenticate(k.api_key, "production", t + 1).value().has_value());
  BOOST_TEST(db.store->updateKey("key_missing", u).code() == 404);
}

BOOST_AUTO_TEST_CASE(rotation_keeps_account_quota_and_settings_and_stops_the_old_key) {
  TempDb db;
  CreatedKey old = db.key(5);
  KeyUpdate u;
  u.rate_limit_per_min = 7;
  u.default_webhook_url = "https://hooks.example/eq";
  u.expires_at_ms = nowMs() + 86'400'000;
  BOOST_REQUIRE(db.store->updateKey(old.key_id, u).isOk());
  BOOST_TEST((db.store->chargeQuota(old.account_id, "fast", nowMs()).value() ==
              ChargeOutcome::kCharged));

  Result<CreatedKey> rotated = db.store->rotateKey(old.key_id, std::nullopt, nowMs());
  BOOST_REQUIRE(rotated.isOk());
  const CreatedKey& fresh = rotated.value();
  BOOST_TEST(fresh.account_id == old.account_id);
  BOOST_TEST(fresh.key_id != old.key_id);
  BOOST_TEST(fresh.api_key != old.api_key);
  BOOST_TEST(fresh.api_key.rfind("eq_live_", 0) == 0u);
  BOOST_TEST(fresh.webhook_secret.empty());  // the account's secret is unchanged, not reissued

  BOOST_TEST(!db.store->authenticate(old.api_key, "production", nowMs()).value().has_value());
  auto who = db.store->authenticate(fresh.api_key, "production", nowMs());
  BOOST_REQUIRE(who.value().has_value());
  BOOST_TEST(who.value()->account_id == old.account_id);
  BOOST_TEST(who.value()->rate_limit_per_min == 7);

  KeyDetails before = db.store->keyDetails(old.key_id).value();
  KeyDetails after = db.store->keyDetails(fresh.key_id).value();
  BOOST_TEST(before.key.status == "revoked");
  BOOST_TEST(before.rotated_to == fresh.key_id);
  BOOST_TEST(after.quota.remaining.fast == 4);  // the charge made with the old key stays
  BOOST_TEST(after.quota.remaining.standard == 5);
  BOOST_TEST(after.default_webhook_url == "https://hooks.example/eq");
  BOOST_TEST(after.key.expires_at == *u.expires_at_ms);  // inherited
  BOOST_TEST(db.store->webhookSecret(after.key.account_id).value() == old.webhook_secret);

  // A revoked key cannot be rotated again; an explicit expiry overrides.
  BOOST_TEST(db.store->rotateKey(old.key_id, std::nullopt, nowMs()).status().code() == 404);
  Result<CreatedKey> again = db.store->rotateKey(fresh.key_id, int64_t{0}, nowMs());
  BOOST_REQUIRE(again.isOk());
  BOOST_TEST(db.store->keyDetails(again.value().key_id).value().key.expires_at == 0);
}

BOOST_AUTO_TEST_CASE(grant_adds_units_and_set_writes_only_named_modes) {
  TempDb db;
  CreatedKey k = db.key(3);
  BOOST_TEST((db.store->chargeQuota(k.account_id, "perfect", nowMs()).value() ==
              ChargeOutcome::kCharged));
  BOOST_REQUIRE(db.store->grantQuota(k.account_id, QuotaUnits{10, 0, 1}, std::nullopt).isOk());
  AccountQuota q = db.store->quota(k.account_id).value();
  BOOST_TEST(q.remaining.fast == 13);
  BOOST_TEST(q.remaining.standard == 3);
  BOOST_TEST(q.remaining.perfect == 3);
  BOOST_REQUIRE(db.store->grantQuota(k.account_id, QuotaUnits{}, int64_t{42}).isOk());
  BOOST_TEST(db.store->quota(k.account_id).value().expire_at_ms == 42);
  BOOST_TEST(db.store->grantQuota("acc_missing", QuotaUnits{1, 1, 1}, std::nullopt).code() ==
             404);

  QuotaChange only_fast;
  only_fast.fast = 0;
  BOOST_REQUIRE(db.store->setQuota(k.account_id, only_fast, std::nullopt, std::nullopt).isOk());
  q = db.store->quota(k.account_id).value();
  BOOST_TEST(q.remaining.fast == 0);
  BOOST_TEST(q.remaining.standard == 3);
  BOOST_TEST(q.remaining.perfect == 3);
}

namespace {

IdempotencyRequest idem(const CreatedKey& k, const std::string& key, const std::string& body,
                        const std::string& request_id,
                        const std::string& route = "/api/v1/reply") {
  return IdempotencyRequest{k.account_id, key, route, crypto::sha256(body), request_id};
}

}  // namespace

BOOST_AUTO_TEST_CASE(idempotency_first_use_runs_then_replays_or_conflicts) {
  TempDb db;
  CreatedKey k = db.key();
  int64_t t = 1'800'000'000'000;
  auto first = idem(k, "order-1", R"({"mode":"fast","message":"hi"})", "req_1");
  BOOST_TEST((db.store->beginIdempotent(first, t).value().state == IdempotencyState::kStarted));

  // A duplicate while the first is pending must not run (it would charge).
  auto dup = idem(k, "order-1", R"({"mode":"fast","message":"hi"})", "req_2");
  BOOST_TEST((db.store->beginIdempotent(dup, t + 5).value().state ==
              IdempotencyState::kInProgress));

  BOOST_REQUIRE(db.store->completeIdempotent(first, 200, R"({"code":0})").isOk());
  IdempotencyBegin replay = db.store->beginIdempotent(dup, t + 10).value();
  BOOST_TEST((replay.state == IdempotencyState::kReplay));
  BOOST_TEST(replay.http_status == 200);
  BOOST_TEST(replay.response_body == R"({"code":0})");

  auto other_body = idem(k, "order-1", R"({"mode":"fast","message":"bye"})", "req_3");
  IdempotencyBegin conflict = db.store->beginIdempotent(other_body, t + 20).value();
  BOOST_TEST((conflict.state == IdempotencyState::kConflict));
  BOOST_TEST(!conflict.other_route);
  auto other_route =
      idem(k, "order-1", R"({"mode":"fast","message":"hi"})", "req_4", "/api/v1/reply/async");
  conflict = db.store->beginIdempotent(other_route, t + 30).value();
  BOOST_TEST((conflict.state == IdempotencyState::kConflict));
  BOOST_TEST(conflict.other_route);

  // Keys are scoped to the account: another account's "order-1" is its own.
  CreatedKey stranger = db.key();
  BOOST_TEST((db.store->beginIdempotent(idem(stranger, "order-1", "{}", "req_5"), t + 40)
                  .value()
                  .state == IdempotencyState::kStarted));
}

BOOST_AUTO_TEST_CASE(idempotency_abandon_frees_the_key_and_only_the_owner_settles) {
  TempDb db;
  CreatedKey k = db.key();
  int64_t t = 1'800'000'000'000;
  auto first = idem(k, "k", "{}", "req_1");
  BOOST_REQUIRE((db.store->beginIdempotent(first, t).value().state ==
                 IdempotencyState::kStarted));
  // Another request id neither completes nor deletes the row it does not own.
  auto intruder = idem(k, "k", "{}", "req_x");
  BOOST_REQUIRE(db.store->completeIdempotent(intruder, 200, "stolen").isOk());
  BOOST_REQUIRE(db.store->abandonIdempotent(intruder).isOk());
  BOOST_TEST((db.store->beginIdempotent(intruder, t + 1).value().state ==
              IdempotencyState::kInProgress));
  // The owner gives up (a 503): the next arrival runs afresh.
  BOOST_REQUIRE(db.store->abandonIdempotent(first).isOk());
  auto retry = idem(k, "k", "{}", "req_2");
  BOOST_TEST((db.store->beginIdempotent(retry, t + 2).value().state ==
              IdempotencyState::kStarted));
}

BOOST_AUTO_TEST_CASE(idempotency_records_lapse_after_24h_and_are_purged_in_batches) {
  TempDb db;
  CreatedKey k = db.key();
  const int64_t t = 1'800'000'000'000;
  const int64_t day = Store::kIdempotencyTtlMs;
  BOOST_TEST(day == 86'400'000);
  auto first = idem(k, "k", "{}", "req_1");
  BOOST_REQUIRE(db.store->beginIdempotent(first, t).isOk());
  BOOST_REQUIRE(db.store->completeIdempotent(first, 201, "stored").isOk());
  auto later = idem(k, "k", "{}", "req_2");
  BOOST_TEST((db.store->beginIdempotent(later, t + day - 1).value().state ==
              IdempotencyState::kReplay));
  // Exactly 24 h later the record is gone and the key runs again.
  BOOST_TEST((db.store->beginIdempotent(later, t + day).value().state ==
              IdempotencyState::kStarted));

  // 150 stale rows: each begin purges at most kIdempotencyPurgeBatch of them.
  for (int i = 0; i < 150; ++i) {
    auto r = idem(k, "bulk-" + std::to_string(i), "{}", "req_b" + std::to_string(i));
    BOOST_REQUIRE(db.store->beginIdempotent(r, t).isOk());
  }
  BOOST_TEST(db.scalar("SELECT count(*) FROM idempotency_keys") == "151");
  BOOST_REQUIRE(db.store->beginIdempotent(idem(k, "fresh-1", "{}", "req_f1"), t + day).isOk());
  BOOST_TEST(db.scalar("SELECT count(*) FROM idempotency_keys") ==
             std::to_string(151 - Store::kIdempotencyPurgeBatch + 1));
  BOOST_REQUIRE(db.store->beginIdempotent(idem(k, "fresh-2", "{}", "req_f2"), t + day).isOk());
  BOOST_TEST(db.scalar("SELECT count(*) FROM idempotency_keys") == "3");  // k, fresh-1, fresh-2
}

BOOST_AUTO_TEST_CASE(idempotency_pending_row_of_a_dead_request_is_taken_over_after_the_lease) {
  TempDb db;
  CreatedKey k = db.key();
  const int64_t t = 1'800'000'000'000;
  BOOST_REQUIRE(db.store->beginIdempotent(idem(k, "k", "{}", "req_dead"), t).isOk());
  auto retry = idem(k, "k", "{}", "req_2");
  BOOST_TEST((db.store->beginIdempotent(retry, t + Store::kIdempotencyLeaseMs - 1).value().state ==
              IdempotencyState::kInProgress));
  BOOST_TEST((db.store->beginIdempotent(retry, t + Store::kIdempotencyLeaseMs).value().state ==
              IdempotencyState::kStarted));
  // The dead request, should it ever answer, no longer owns the row.
  BOOST_REQUIRE(db.store->completeIdempotent(idem(k, "k", "{}", "req_dead"), 200, "late").isOk());
  BOOST_REQUIRE(db.store->completeIdempotent(retry, 200, "mine").isOk());
  BOOST_TEST(db.store->beginIdempotent(idem(k, "k", "{}", "req_3"), t + Store::kIdempotencyLeaseMs + 1)
                 .value()
                 .response_body == "mine");
}

BOOST_AUTO_TEST_SUITE_END()
