#include "store/store.h"

#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "common/crypto.h"
#include "common/json.h"
#include "common/timefmt.h"
#include "store/migrations.h"
#include "tests/unit/temp_db.h"

using namespace eq;

namespace {

using test::TempDb;

}  // namespace

BOOST_AUTO_TEST_SUITE(store_tests)

EQ_STORE_TEST_CASE(keys_are_stored_only_as_sha256) {
  TempDb db;
  CreatedKey k = db.newKey();
  BOOST_TEST(k.api_key.rfind("eq_live_", 0) == 0);
  BOOST_TEST(k.api_key.size() == 8u + 43u);
  BOOST_TEST(k.webhook_secret.rfind("whsec_", 0) == 0);
  std::string stored = db.scalar("SELECT key_hash FROM api_keys");
  BOOST_TEST(stored == crypto::sha256(k.api_key));
  // Nothing in the file holds the key itself.
  BOOST_TEST(db.scalar("SELECT count(*) FROM api_keys WHERE key_hash LIKE '%" + k.api_key +
                       "%' OR display_prefix LIKE '%" + k.api_key + "%'") == "0");
  BOOST_TEST(db.scalar("SELECT display_prefix FROM api_keys") == k.api_key.substr(0, 16));
}

EQ_STORE_TEST_CASE(authenticate_checks_hash_env_and_revocation) {
  TempDb db;
  CreatedKey k = db.newKey();
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

EQ_STORE_TEST_CASE(quota_charges_down_to_zero_then_refuses) {
  TempDb db;
  CreatedKey k = db.newKey(2);
  int64_t now = nowMs();
  BOOST_TEST((db.store->chargeQuota(k.account_id, "fast", now).value() == ChargeOutcome::kCharged));
  BOOST_TEST((db.store->chargeQuota(k.account_id, "fast", now).value() == ChargeOutcome::kCharged));
  BOOST_TEST(
      (db.store->chargeQuota(k.account_id, "fast", now).value() == ChargeOutcome::kExhausted));
  BOOST_TEST(db.store->quota(k.account_id).value().remaining.fast == 0);
  BOOST_TEST(db.store->quota(k.account_id).value().remaining.standard == 2);
  BOOST_TEST(db.store->refundQuota(k.account_id, "fast", nowMs(), nowMs()).isOk());
  BOOST_TEST(db.store->quota(k.account_id).value().remaining.fast == 1);
  // Past expire_at nothing is charged, and the caller learns why.
  BOOST_TEST((db.store->chargeQuota(k.account_id, "standard", now + 2 * 86'400'000).value() ==
              ChargeOutcome::kExpired));
}

EQ_STORE_TEST_CASE(quotas_are_read_by_account_and_unknown_accounts_left_out) {
  TempDb db;
  CreatedKey a = db.newKey(2);
  CreatedKey b = db.newKey(5);
  BOOST_TEST(
      (db.store->chargeQuota(b.account_id, "perfect", nowMs()).value() == ChargeOutcome::kCharged));
  Result<std::map<std::string, AccountQuota>> q =
      db.store->quotas({a.account_id, "acc_missing", b.account_id});
  BOOST_REQUIRE(q.isOk());
  BOOST_TEST(q.value().size() == 2u);
  BOOST_TEST(q.value().at(a.account_id).remaining.fast == 2);
  BOOST_TEST(q.value().at(b.account_id).remaining.perfect == 4);
  BOOST_TEST(q.value().at(b.account_id).tier == db.store->quota(b.account_id).value().tier);
  BOOST_TEST(db.store->quotas({}).value().empty());
}

EQ_STORE_TEST_CASE(a_charge_opens_its_charge_and_task_together_or_writes_nothing) {
  TempDb db;
  CreatedKey k = db.newKey(1);
  BOOST_REQUIRE(db.store->setDefaultWebhookUrl(k.account_id, "https://example.com/default").isOk());
  const int64_t now = nowMs();
  auto call = [&](const std::string& request_id, const std::string& task_id,
                  const std::string& mode) {
    return OpenCharge{request_id, "api_1",      k.account_id, mode,
                      task_id,    now + 30'000, now,          task_id.empty() ? "" : "{\"job\":1}",
                      "idem-1"};
  };
  // Async, charged: the open charge, the task (with the account's default
  // webhook) and the hour's usage, all in one step.
  Result<ChargeOutcome> async =
      db.store->chargeAndOpen(call("req_1", "tsk_1", "fast"), k.key_id, "");
  BOOST_REQUIRE(async.isOk());
  BOOST_TEST((async.value() == ChargeOutcome::kCharged));
  BOOST_TEST(db.scalar("SELECT quota_fast FROM accounts") == "0");
  BOOST_TEST(db.scalar("SELECT task_id || ' ' || job || ' ' || idem_key || ' ' || deadline_at FROM "
                       "open_charges WHERE request_id = 'req_1'") ==
             "tsk_1 {\"job\":1} idem-1 " + std::to_string(now + 30'000));
  Result<std::optional<TaskRecord>> t = db.store->task("tsk_1");
  BOOST_REQUIRE(t.isOk());
  BOOST_REQUIRE(t.value().has_value());
  BOOST_TEST(t.value()->status == TaskStatus::kQueued);
  BOOST_TEST(t.value()->key_id == k.key_id);
  BOOST_TEST(t.value()->request_id == "req_1");
  BOOST_TEST(t.value()->mode == "fast");
  BOOST_TEST(t.value()->webhook_url == "https://example.com/default");
  BOOST_TEST(t.value()->created_at == now);
  BOOST_TEST(db.scalar("SELECT calls FROM usage_hourly WHERE mode = 'fast'") == "1");
  BOOST_TEST(db.scalar("SELECT hour FROM usage_hourly WHERE mode = 'fast'") ==
             std::to_string(now - now % 3'600'000));
  BOOST_TEST(db.scalar("SELECT instance_id || ' ' || account_id || ' ' || mode || ' ' || "
                       "created_at FROM open_charges WHERE request_id = 'req_1'") ==
             "api_1 " + k.account_id + " fast " + std::to_string(now));

  // Sync, charged: no task; a webhook of its own wins over the default.
  Result<ChargeOutcome> sync = db.store->chargeAndOpen(call("req_2", "", "standard"), k.key_id, "");
  BOOST_TEST((sync.value() == ChargeOutcome::kCharged));
  BOOST_TEST(db.scalar("SELECT coalesce(task_id, '-') || coalesce(job, '-') FROM open_charges "
                       "WHERE request_id = 'req_2'") == "--");
  Result<ChargeOutcome> own = db.store->chargeAndOpen(call("req_3", "tsk_3", "perfect"), k.key_id,
                                                      "https://example.com/own");
  BOOST_TEST((own.value() == ChargeOutcome::kCharged));
  BOOST_TEST(db.store->task("tsk_3").value()->webhook_url == "https://example.com/own");

  // A part that fails undoes the charge: a second open charge of one
  // request is refused, and the unit it took is back.
  BOOST_REQUIRE(db.store->grantQuota(k.account_id, QuotaUnits{0, 1, 0}, std::nullopt).isOk());
  Result<ChargeOutcome> twice =
      db.store->chargeAndOpen(call("req_2", "", "standard"), k.key_id, "");
  BOOST_TEST(twice.status().code() == 409);
  BOOST_TEST(db.scalar("SELECT quota_standard FROM accounts") == "1");
  BOOST_TEST(db.scalar("SELECT sum(calls) FROM usage_hourly") == "3");

  // Exhausted, then expired: nothing written, and the caller learns why.
  Result<ChargeOutcome> out = db.store->chargeAndOpen(call("req_4", "tsk_4", "fast"), k.key_id, "");
  BOOST_TEST((out.value() == ChargeOutcome::kExhausted));
  BOOST_TEST(db.scalar("SELECT count(*) FROM open_charges") == "3");
  BOOST_TEST(!db.store->task("tsk_4").value().has_value());
  BOOST_TEST(db.scalar("SELECT sum(calls) FROM usage_hourly") == "3");
  BOOST_REQUIRE(db.store->grantQuota(k.account_id, QuotaUnits{1, 0, 0}, now - 1).isOk());
  Result<ChargeOutcome> late =
      db.store->chargeAndOpen(call("req_5", "tsk_5", "fast"), k.key_id, "");
  BOOST_TEST((late.value() == ChargeOutcome::kExpired));
  BOOST_TEST(db.scalar("SELECT count(*) FROM open_charges") == "3");
  BOOST_TEST(db.scalar("SELECT quota_fast FROM accounts") == "1");
}

EQ_STORE_TEST_CASE(rate_counter_allows_the_limit_per_window) {
  TempDb db;
  CreatedKey k = db.newKey();
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

EQ_STORE_TEST_CASE(task_transitions_are_guarded_and_failure_refunds) {
  TempDb db;
  CreatedKey k = db.newKey(5);
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
  BOOST_TEST(!db.store->markTaskFailed("tsk_a", 500, "boom", 4).value());    // once only
  BOOST_TEST(db.store->quota(k.account_id).value().remaining.perfect == 5);
  BOOST_TEST(!db.store->markTaskSucceeded("tsk_a", "{}", 5).value());  // final stays final
  BOOST_TEST(db.store->task("tsk_a").value()->status == TaskStatus::kFailed);
}

EQ_STORE_TEST_CASE(status_check_constraint_rejects_unknown_states) {
  TempDb db;
  CreatedKey k = db.newKey();
  TaskRecord t{"tsk_b", k.account_id, k.key_id, "req_b", "fast", TaskStatus::kQueued, "", "",
               0,       "",           1,        0,       0};
  BOOST_TEST(db.store->createTask(t).isOk());
  auto r = db.raw()->exec(store::Sql{"UPDATE tasks SET status = 'lost'"});
  BOOST_TEST(r.status().code() == 409, r.status().msg());
}

EQ_STORE_TEST_CASE(migrations_apply_once) {
  TempDb db;
  db.store.reset();
  auto again = Store::open(db.url);  // a second process starting on the same database
  BOOST_REQUIRE(again.isOk());
  BOOST_TEST(db.scalar("SELECT count(*) FROM schema_migrations") ==
             std::to_string(store::migrations().size()));
}

EQ_STORE_TEST_CASE(expired_key_is_not_authenticated) {
  TempDb db;
  CreatedKey k = db.newKey();
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

EQ_STORE_TEST_CASE(rotation_keeps_account_quota_and_settings_and_stops_the_old_key) {
  TempDb db;
  CreatedKey old = db.newKey(5);
  KeyUpdate u;
  u.rate_limit_per_min = 7;
  u.default_webhook_url = "https://hooks.example/eq";
  u.expires_at_ms = nowMs() + 86'400'000;
  BOOST_REQUIRE(db.store->updateKey(old.key_id, u).isOk());
  BOOST_TEST(
      (db.store->chargeQuota(old.account_id, "fast", nowMs()).value() == ChargeOutcome::kCharged));

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

// Issue 28: a rotation with an overlap leaves the old key active until then
// (never later than it would have expired), rotated to the new one, and not
// to be rotated again.
EQ_STORE_TEST_CASE(rotation_with_an_overlap_ends_the_old_key_later) {
  TempDb db;
  CreatedKey old = db.newKey(5);
  const int64_t now = nowMs();
  Result<CreatedKey> rotated = db.store->rotateKey(old.key_id, std::nullopt, now, now + 3'600'000);
  BOOST_REQUIRE_MESSAGE(rotated.isOk(), rotated.status().msg());
  KeyDetails before = db.store->keyDetails(old.key_id).value();
  BOOST_TEST(before.key.status == "active");
  BOOST_TEST(before.key.expires_at == now + 3'600'000);
  BOOST_TEST(before.rotated_to == rotated.value().key_id);
  BOOST_TEST(db.store->authenticate(old.api_key, "production", now).value().has_value());
  BOOST_TEST(
      !db.store->authenticate(old.api_key, "production", now + 3'600'000).value().has_value());
  Result<CreatedKey> twice = db.store->rotateKey(old.key_id, std::nullopt, now, now + 60'000);
  BOOST_TEST(twice.status().code() == 409);
  BOOST_TEST(db.store->keyDetails(old.key_id).value().key.expires_at == now + 3'600'000);
  // An expiry sooner than the overlap's end stays.
  CreatedKey soon = db.newKey(5);
  KeyUpdate u;
  u.expires_at_ms = now + 60'000;
  BOOST_REQUIRE(db.store->updateKey(soon.key_id, u).isOk());
  BOOST_REQUIRE(db.store->rotateKey(soon.key_id, std::nullopt, now, now + 3'600'000).isOk());
  BOOST_TEST(db.store->keyDetails(soon.key_id).value().key.expires_at == now + 60'000);
}

EQ_STORE_TEST_CASE(grant_adds_units_and_set_writes_only_named_modes) {
  TempDb db;
  CreatedKey k = db.newKey(3);
  BOOST_TEST(
      (db.store->chargeQuota(k.account_id, "perfect", nowMs()).value() == ChargeOutcome::kCharged));
  BOOST_REQUIRE(db.store->grantQuota(k.account_id, QuotaUnits{10, 0, 1}, std::nullopt).isOk());
  AccountQuota q = db.store->quota(k.account_id).value();
  BOOST_TEST(q.remaining.fast == 13);
  BOOST_TEST(q.remaining.standard == 3);
  BOOST_TEST(q.remaining.perfect == 3);
  BOOST_REQUIRE(db.store->grantQuota(k.account_id, QuotaUnits{}, int64_t{42}).isOk());
  BOOST_TEST(db.store->quota(k.account_id).value().expire_at_ms == 42);
  BOOST_TEST(db.store->grantQuota("acc_missing", QuotaUnits{1, 1, 1}, std::nullopt).code() == 404);

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
                        const std::string& request_id, const std::string& route = "/api/v1/reply") {
  return IdempotencyRequest{k.account_id, key, route, crypto::sha256(body), request_id};
}

}  // namespace

EQ_STORE_TEST_CASE(idempotency_first_use_runs_then_replays_or_conflicts) {
  TempDb db;
  CreatedKey k = db.newKey();
  int64_t t = 1'800'000'000'000;
  auto first = idem(k, "order-1", R"({"mode":"fast","message":"hi"})", "req_1");
  BOOST_TEST((db.store->beginIdempotent(first, t).value().state == IdempotencyState::kStarted));

  // A duplicate while the first is pending must not run (it would charge).
  auto dup = idem(k, "order-1", R"({"mode":"fast","message":"hi"})", "req_2");
  BOOST_TEST(
      (db.store->beginIdempotent(dup, t + 5).value().state == IdempotencyState::kInProgress));

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
  CreatedKey stranger = db.newKey();
  BOOST_TEST(
      (db.store->beginIdempotent(idem(stranger, "order-1", "{}", "req_5"), t + 40).value().state ==
       IdempotencyState::kStarted));
}

EQ_STORE_TEST_CASE(idempotency_abandon_frees_the_key_and_only_the_owner_settles) {
  TempDb db;
  CreatedKey k = db.newKey();
  int64_t t = 1'800'000'000'000;
  auto first = idem(k, "k", "{}", "req_1");
  BOOST_REQUIRE((db.store->beginIdempotent(first, t).value().state == IdempotencyState::kStarted));
  // Another request id neither completes nor deletes the row it does not own.
  auto intruder = idem(k, "k", "{}", "req_x");
  BOOST_REQUIRE(db.store->completeIdempotent(intruder, 200, "stolen").isOk());
  BOOST_REQUIRE(db.store->abandonIdempotent(intruder).isOk());
  BOOST_TEST(
      (db.store->beginIdempotent(intruder, t + 1).value().state == IdempotencyState::kInProgress));
  // The owner gives up (a 503): the next arrival runs afresh.
  BOOST_REQUIRE(db.store->abandonIdempotent(first).isOk());
  auto retry = idem(k, "k", "{}", "req_2");
  BOOST_TEST((db.store->beginIdempotent(retry, t + 2).value().state == IdempotencyState::kStarted));
}

EQ_STORE_TEST_CASE(idempotency_records_lapse_after_24h_and_are_purged_in_batches) {
  TempDb db;
  CreatedKey k = db.newKey();
  const int64_t t = 1'800'000'000'000;
  const int64_t day = Store::kIdempotencyTtlMs;
  BOOST_TEST(day == 86'400'000);
  auto first = idem(k, "k", "{}", "req_1");
  BOOST_REQUIRE(db.store->beginIdempotent(first, t).isOk());
  BOOST_REQUIRE(db.store->completeIdempotent(first, 201, "stored").isOk());
  auto later = idem(k, "k", "{}", "req_2");
  BOOST_TEST(
      (db.store->beginIdempotent(later, t + day - 1).value().state == IdempotencyState::kReplay));
  // Exactly 24 h later the record is gone and the key runs again.
  BOOST_TEST(
      (db.store->beginIdempotent(later, t + day).value().state == IdempotencyState::kStarted));

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

EQ_STORE_TEST_CASE(idempotency_pending_row_of_a_dead_request_is_taken_over_after_the_lease) {
  TempDb db;
  CreatedKey k = db.newKey();
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
  BOOST_TEST(
      db.store->beginIdempotent(idem(k, "k", "{}", "req_3"), t + Store::kIdempotencyLeaseMs + 1)
          .value()
          .response_body == "mine");
}

// ---------------------------------------------------------------- deliveries

namespace {

// A finished task of the key's account, created at created_at.
std::string finishedTask(TempDb& db, const CreatedKey& k, const std::string& id,
                         int64_t created_at) {
  TaskRecord t{id,
               k.account_id,
               k.key_id,
               "req_" + id,
               "fast",
               TaskStatus::kQueued,
               "http://hook.example/x",
               "",
               0,
               "",
               created_at,
               0,
               0};
  BOOST_REQUIRE(db.store->createTask(t).isOk());
  BOOST_REQUIRE(db.store->markTaskSucceeded(id, R"({"replies":[]})", created_at + 1).value());
  return id;
}

DeliveryAttempt attemptAt(int64_t at, int status, const std::string& error = "") {
  return DeliveryAttempt{at, status, 12, error, 0};
}

}  // namespace

EQ_STORE_TEST_CASE(delivery_is_one_per_task_and_claimed_only_when_due) {
  TempDb db;
  CreatedKey k = db.newKey();
  finishedTask(db, k, "tsk_d1", 1000);
  DeliveryRecord d =
      db.store->createDelivery("tsk_d1", "http://hook.example/x", "task.succeeded", 1000).value();
  BOOST_TEST(d.status == DeliveryStatus::kPending);
  BOOST_TEST(d.delivery_id.rfind("dlv_", 0) == 0u);
  BOOST_TEST(d.next_attempt_at == 1000);
  // A redelivered event finds the same delivery, unchanged.
  BOOST_TEST(db.store->createDelivery("tsk_d1", "http://other/", "task.succeeded", 2000)
                 .value()
                 .delivery_id == d.delivery_id);

  BOOST_TEST(db.store->claimDueDeliveries(999, 5000, 10).value().empty());  // not yet due
  auto claimed = db.store->claimDueDeliveries(1000, 5000, 10).value();
  BOOST_REQUIRE(claimed.size() == 1u);
  BOOST_TEST(claimed[0].delivery_id == d.delivery_id);
  BOOST_TEST(claimed[0].attempts == 0);
  BOOST_TEST(claimed[0].url == "http://hook.example/x");
  // Leased: a second scan (or another dispatcher) does not take it ...
  BOOST_TEST(db.store->claimDueDeliveries(4999, 9000, 10).value().empty());
  // ... until the lease ends, as after a crash mid-attempt.
  BOOST_TEST(db.store->claimDueDeliveries(5000, 9000, 10).value().size() == 1u);
  // Released at shutdown: due at once.
  BOOST_REQUIRE(db.store->releaseDelivery(d.delivery_id, 5001).isOk());
  BOOST_TEST(db.store->claimDueDeliveries(5001, 9000, 10).value().size() == 1u);
}

EQ_STORE_TEST_CASE(claims_take_the_oldest_due_first_up_to_the_limit) {
  TempDb db;
  CreatedKey k = db.newKey();
  for (int i = 0; i < 5; ++i) {
    std::string id = "tsk_l" + std::to_string(i);
    finishedTask(db, k, id, 100);
    BOOST_REQUIRE(db.store->createDelivery(id, "http://h/", "task.succeeded", 1000 - i).isOk());
  }
  auto first = db.store->claimDueDeliveries(2000, 9000, 2).value();
  BOOST_REQUIRE(first.size() == 2u);
  std::set<std::string> tasks = {first[0].task_id, first[1].task_id};
  BOOST_TEST((tasks == std::set<std::string>{"tsk_l4", "tsk_l3"}));
  BOOST_TEST(db.store->claimDueDeliveries(2000, 9000, 10).value().size() == 3u);
}

EQ_STORE_TEST_CASE(a_claim_passes_over_the_accounts_it_is_told_to_and_leaves_them_due) {
  TempDb db;
  CreatedKey busy = db.newKey();
  CreatedKey other = db.newKey();
  BOOST_REQUIRE(busy.account_id != other.account_id);
  // The busy account's four deliveries are due first, the other's two after.
  std::map<std::string, std::string> delivery_of;
  for (int i = 0; i < 6; ++i) {
    const CreatedKey& k = i < 4 ? busy : other;
    std::string id = "tsk_s" + std::to_string(i);
    finishedTask(db, k, id, 100);
    delivery_of[id] =
        db.store->createDelivery(id, "http://h/", "task.succeeded", 1000 + i).value().delivery_id;
  }
  // One slot left for the busy account: the walk admits its oldest, passes
  // over its other three and goes on to the other account's.
  int busy_room = 1;
  std::vector<std::string> asked;
  auto admit = [&](const std::string& account_id) {
    asked.push_back(account_id);
    if (account_id != busy.account_id) return true;
    return busy_room-- > 0;
  };
  auto claimed = db.store->claimDueDeliveries(2000, 9000, 3, admit).value();
  BOOST_REQUIRE(claimed.size() == 3u);
  BOOST_TEST(claimed[0].task_id == "tsk_s0");  // oldest due first, in that order
  BOOST_TEST(claimed[1].task_id == "tsk_s4");
  BOOST_TEST(claimed[2].task_id == "tsk_s5");
  BOOST_TEST(claimed[0].account_id == busy.account_id);
  BOOST_TEST(claimed[1].account_id == other.account_id);
  // Asked about tsk_s0 (yes), tsk_s1 (no: the busy account is full, and
  // not asked again for tsk_s2 and tsk_s3), tsk_s4 and tsk_s5: the walk
  // stops at the limit, not before.
  BOOST_TEST(asked.size() == 4u);
  BOOST_TEST(std::count(asked.begin(), asked.end(), busy.account_id) == 2);
  // The three passed over were not claimed: still due at their own time,
  // so the next scan (or another dispatcher) takes them, oldest first.
  for (const char* id : {"tsk_s1", "tsk_s2", "tsk_s3"}) {
    DeliveryRecord d = db.store->delivery(delivery_of[id]).value().value();
    BOOST_TEST(d.status == DeliveryStatus::kPending);
    BOOST_TEST(d.next_attempt_at == 1000 + (id[5] - '0'), id);
  }
  auto next = db.store->claimDueDeliveries(2000, 9000, 10).value();
  BOOST_REQUIRE(next.size() == 3u);
  BOOST_TEST(next[0].task_id == "tsk_s1");
  BOOST_TEST(next[2].task_id == "tsk_s3");
  // Refusing every account claims nothing and changes nothing.
  BOOST_TEST(
      db.store->claimDueDeliveries(20000, 29000, 10, [](const std::string&) { return false; })
          .value()
          .empty());
  BOOST_TEST(db.store->claimDueDeliveries(20000, 29000, 10).value().size() == 6u);
}

EQ_STORE_TEST_CASE(a_claim_walks_on_through_rows_due_at_the_same_moment) {
  // On PostgreSQL the walk reads in pages and goes on after the last row
  // read: a run of rows with one next_attempt_at spans pages, and each row
  // of it is read once, neither skipped nor twice. (SQLite reads in one
  // statement: the same claims.)
  TempDb db;
  CreatedKey busy = db.newKey();
  CreatedKey other = db.newKey();
  std::map<std::string, std::string> account_of;  // delivery id -> account
  for (int i = 0; i < 35; ++i) {
    const CreatedKey& k = i % 7 == 6 ? other : busy;  // 30 busy, 5 other
    std::string id = "tsk_r" + std::to_string(i);
    finishedTask(db, k, id, 100);
    std::string d =
        db.store->createDelivery(id, "http://h/", "task.succeeded", 1000).value().delivery_id;
    account_of[d] = k.account_id;
  }
  std::map<std::string, int> claims;  // delivery id -> times claimed
  int asked = 0;
  auto only_other = [&](const std::string& account_id) {
    ++asked;
    return account_id == other.account_id;
  };
  // Pages of 3, 6, 12 and so on: the other account's rows lie among the
  // busy one's. The first walk finds three of them; the second, wanting
  // three, goes on to the end of the due rows and claims the last 2. The
  // busy account is asked about once a walk: refused, it is passed over
  // without asking (and on PostgreSQL left out of the pages after).
  for (size_t walk : {0u, 1u}) {
    asked = 0;
    std::vector<DeliveryRecord> claimed =
        db.store->claimDueDeliveries(2000, 9000, 3, only_other).value();
    for (const DeliveryRecord& d : claimed) {
      ++claims[d.delivery_id];
      BOOST_TEST(d.account_id == other.account_id);
    }
    BOOST_TEST(claims.size() == (walk == 0 ? 3u : 5u));
    if (walk == 0) BOOST_TEST(asked == 4);  // the busy account once, the other's three
    if (walk == 1) BOOST_TEST(asked == 3);  // the busy account once, the other's last two
  }
  // The busy account's 30, each once, and nothing is left due.
  std::vector<DeliveryRecord> rest = db.store->claimDueDeliveries(2000, 9000, 100).value();
  BOOST_TEST(rest.size() == 30u);
  for (const DeliveryRecord& d : rest) {
    ++claims[d.delivery_id];
    BOOST_TEST(d.account_id == busy.account_id);
  }
  BOOST_TEST(claims.size() == account_of.size());
  for (const auto& [id, n] : claims) BOOST_TEST(n == 1, id << " claimed " << n << " times");
  BOOST_TEST(!db.store->anyDeliveryDue(2000).value());
}

// A sender's loop turn records its attempts together (one statement on
// PostgreSQL): each one as finishAttempt would, errors with quotes, braces
// and backslashes intact, and a delivery no longer pending left alone.
EQ_STORE_TEST_CASE(attempts_recorded_together_each_land_on_their_delivery) {
  TempDb db;
  CreatedKey k = db.newKey();
  std::vector<std::string> ids;
  for (const char* t : {"tsk_m1", "tsk_m2", "tsk_m3"}) {
    finishedTask(db, k, t, 1000);
    ids.push_back(
        db.store->createDelivery(t, "http://h/", "task.succeeded", 1000).value().delivery_id);
  }
  BOOST_REQUIRE(
      db.store->finishAttempt(ids[2], attemptAt(1000, 204), DeliveryStatus::kDelivered, 0).value());
  const std::string odd = R"(refused: "a\b" {x,y} NULL)";
  auto recorded = db.store->finishAttempts(
      {FinishedAttempt{ids[0], attemptAt(2000, 503, odd), DeliveryStatus::kPending, 9000},
       FinishedAttempt{ids[1], attemptAt(2000, 0), DeliveryStatus::kFailed, 0},
       FinishedAttempt{ids[2], attemptAt(2000, 500), DeliveryStatus::kPending, 9000}});
  BOOST_REQUIRE(recorded.isOk());
  BOOST_TEST((recorded.value() == std::vector<bool>{true, true, false}));
  DeliveryRecord d0 = db.store->delivery(ids[0]).value().value();
  BOOST_TEST(d0.status == DeliveryStatus::kPending);
  BOOST_TEST(d0.next_attempt_at == 9000);
  BOOST_TEST(d0.last_status == 503);
  BOOST_TEST(d0.last_error == odd);
  DeliveryRecord d1 = db.store->delivery(ids[1]).value().value();
  BOOST_TEST(d1.status == DeliveryStatus::kFailed);
  BOOST_TEST(d1.last_status == 0);
  BOOST_TEST(d1.last_error == "");
  BOOST_TEST(db.store->delivery(ids[2]).value()->status == DeliveryStatus::kDelivered);
  BOOST_TEST(db.store->deliveryAttempts(ids[2]).value().size() == 1u);
  BOOST_TEST(db.store->finishAttempts({}).value().empty());
}

EQ_STORE_TEST_CASE(attempts_are_logged_and_final_states_stay_final) {
  TempDb db;
  CreatedKey k = db.newKey();
  finishedTask(db, k, "tsk_a1", 1000);
  std::string id =
      db.store->createDelivery("tsk_a1", "http://h/", "task.succeeded", 1000).value().delivery_id;
  BOOST_TEST(db.store
                 ->finishAttempt(id, attemptAt(1000, 500, "receiver answered HTTP 500"),
                                 DeliveryStatus::kPending, 6000)
                 .value());
  DeliveryRecord d = db.store->delivery(id).value().value();
  BOOST_TEST(d.status == DeliveryStatus::kPending);
  BOOST_TEST(d.attempts == 1);
  BOOST_TEST(d.last_status == 500);
  BOOST_TEST(d.last_attempt_at == 1000);
  BOOST_TEST(d.next_attempt_at == 6000);
  BOOST_TEST(d.last_error == "receiver answered HTTP 500");
  BOOST_TEST(db.store->claimDueDeliveries(5999, 20000, 10).value().empty());

  // A timeout has no HTTP status: last_status goes back to none.
  BOOST_TEST(
      db.store->finishAttempt(id, attemptAt(6000, 0, "timed out"), DeliveryStatus::kPending, 7000)
          .value());
  BOOST_TEST(db.store->deliveryForTask("tsk_a1").value()->last_status == 0);

  BOOST_TEST(
      db.store->finishAttempt(id, attemptAt(7000, 204), DeliveryStatus::kDelivered, 0).value());
  d = db.store->delivery(id).value().value();
  BOOST_TEST(d.status == DeliveryStatus::kDelivered);
  BOOST_TEST(d.next_attempt_at == 0);
  BOOST_TEST(d.last_error == "");
  // A late duplicate outcome does not touch a delivery that is no longer pending.
  BOOST_TEST(
      !db.store->finishAttempt(id, attemptAt(8000, 500), DeliveryStatus::kPending, 9000).value());
  BOOST_TEST(db.store->delivery(id).value()->attempts == 3);
  BOOST_TEST(db.store->claimDueDeliveries(100'000, 200'000, 10).value().empty());

  auto log = db.store->deliveryAttempts(id).value();
  BOOST_REQUIRE(log.size() == 3u);
  BOOST_TEST(log[0].number == 1);
  BOOST_TEST(log[0].http_status == 500);
  BOOST_TEST(log[0].latency_ms == 12);
  BOOST_TEST(log[1].http_status == 0);
  BOOST_TEST(log[1].error == "timed out");
  BOOST_TEST(log[2].number == 3);
  BOOST_TEST(log[2].at == 7000);
}

EQ_STORE_TEST_CASE(replay_keeps_the_id_and_count_and_restarts_the_schedule) {
  TempDb db;
  CreatedKey k = db.newKey();
  finishedTask(db, k, "tsk_r1", 1000);
  std::string id =
      db.store->createDelivery("tsk_r1", "http://h/", "task.succeeded", 1000).value().delivery_id;
  BOOST_TEST(db.store->replayDelivery(id, 2000).status().code() == 409);  // still pending
  BOOST_TEST(db.store->replayDelivery("dlv_nope", 2000).status().code() == 404);
  BOOST_REQUIRE(
      db.store->finishAttempt(id, attemptAt(1000, 500), DeliveryStatus::kPending, 1500).value());
  BOOST_REQUIRE(
      db.store->finishAttempt(id, attemptAt(1500, 410), DeliveryStatus::kFailed, 0).value());

  DeliveryRecord r = db.store->replayDelivery(id, 3000).value();
  BOOST_TEST(r.delivery_id == id);
  BOOST_TEST(r.status == DeliveryStatus::kPending);
  BOOST_TEST(r.attempts == 2);
  BOOST_TEST(r.schedule_offset == 2);
  BOOST_TEST(r.next_attempt_at == 3000);
  BOOST_TEST(r.replayed_at == 3000);
  auto claimed = db.store->claimDueDeliveries(3000, 9000, 10).value();
  BOOST_REQUIRE(claimed.size() == 1u);
  BOOST_TEST(claimed[0].schedule_offset == 2);
  BOOST_REQUIRE(
      db.store->finishAttempt(id, attemptAt(3000, 200), DeliveryStatus::kDelivered, 0).value());
  BOOST_TEST(db.store->delivery(id).value()->attempts == 3);
  // A delivered one can be replayed too (a receiver that lost it).
  BOOST_TEST(db.store->replayDelivery(id, 4000).value().schedule_offset == 3);
}

EQ_STORE_TEST_CASE(deliveries_list_filters_by_status_and_task_newest_first) {
  TempDb db;
  CreatedKey k = db.newKey();
  for (int i = 0; i < 4; ++i) {
    std::string id = "tsk_f" + std::to_string(i);
    finishedTask(db, k, id, 100);
    std::string d =
        db.store->createDelivery(id, "http://h/", "task.succeeded", 1000 + i).value().delivery_id;
    if (i % 2 == 1) {
      BOOST_REQUIRE(
          db.store->finishAttempt(d, attemptAt(2000, 410, "gone"), DeliveryStatus::kFailed, 0)
              .value());
    }
  }
  auto all = db.store->listDeliveries(DeliveryFilter{}).value();
  BOOST_REQUIRE(all.size() == 4u);
  BOOST_TEST(all[0].task_id == "tsk_f3");
  BOOST_TEST(all[3].task_id == "tsk_f0");
  auto failed = db.store->listDeliveries(DeliveryFilter{DeliveryStatus::kFailed, "", 100}).value();
  BOOST_REQUIRE(failed.size() == 2u);
  BOOST_TEST(failed[0].task_id == "tsk_f3");
  BOOST_TEST(failed[0].last_error == "gone");
  BOOST_TEST(db.store->listDeliveries(DeliveryFilter{std::nullopt, "tsk_f2", 100}).value().size() ==
             1u);
  BOOST_TEST(db.store->listDeliveries(DeliveryFilter{DeliveryStatus::kFailed, "tsk_f2", 100})
                 .value()
                 .empty());
  BOOST_TEST(db.store->listDeliveries(DeliveryFilter{std::nullopt, "", 3}).value().size() == 3u);
}

// ---------------------------------------------------------------- retention

EQ_STORE_TEST_CASE(retention_purges_old_tasks_with_their_deliveries_in_batches) {
  TempDb db;
  CreatedKey k = db.newKey();
  const int64_t day = 86'400'000;
  const int64_t now = 1'800'000'000'000;
  for (int i = 0; i < 5; ++i) {  // old, each with a finished delivery and an attempt
    std::string id = "tsk_old" + std::to_string(i);
    finishedTask(db, k, id, now - 8 * day + i);
    std::string d = db.store->createDelivery(id, "http://h/", "task.succeeded", now - 8 * day)
                        .value()
                        .delivery_id;
    BOOST_REQUIRE(
        db.store->finishAttempt(d, attemptAt(now - 8 * day, 200), DeliveryStatus::kDelivered, 0)
            .value());
  }
  // Old, but its delivery is still being retried: kept until it finishes.
  finishedTask(db, k, "tsk_oldpending", now - 8 * day);
  std::string pending =
      db.store->createDelivery("tsk_oldpending", "http://h/", "task.succeeded", now - 8 * day)
          .value()
          .delivery_id;
  finishedTask(db, k, "tsk_new", now - 6 * day);  // within 7 days: kept

  const int64_t cutoff = now - 7 * day;
  BOOST_TEST(db.store->purgeTasksBefore(cutoff, 2).value() == 2);  // bounded
  BOOST_TEST(db.scalar("SELECT count(*) FROM tasks") == "5");
  BOOST_TEST(db.store->purgeTasksBefore(cutoff, 2).value() == 2);
  BOOST_TEST(db.store->purgeTasksBefore(cutoff, 2).value() == 1);
  BOOST_TEST(db.store->purgeTasksBefore(cutoff, 2).value() == 0);
  BOOST_TEST(db.column("SELECT id FROM tasks ORDER BY id") == "tsk_new,tsk_oldpending");
  BOOST_TEST(db.scalar("SELECT count(*) FROM deliveries") == "1");
  BOOST_TEST(db.scalar("SELECT count(*) FROM delivery_attempts") == "0");

  BOOST_REQUIRE(
      db.store->finishAttempt(pending, attemptAt(now, 410), DeliveryStatus::kFailed, 0).value());
  BOOST_TEST(db.store->purgeTasksBefore(cutoff, 2).value() == 1);
  BOOST_TEST(db.column("SELECT id FROM tasks") == "tsk_new");
  BOOST_TEST(db.scalar("SELECT count(*) FROM deliveries") == "0");
}

EQ_STORE_TEST_CASE(a_key_last_used_before_its_windows_were_purged_still_says_when) {
  TempDb db;
  CreatedKey used = db.newKey();
  CreatedKey idle = db.newKey();
  const int64_t now = 1'800'000'000'000;
  auto lastUsed = [&](const CreatedKey& k) {
    auto keys = db.store->accountKeys(k.account_id, now);
    BOOST_REQUIRE(keys.isOk());
    BOOST_REQUIRE(keys.value().size() == 1u);
    return keys.value()[0].last_used_at;
  };
  AuthContext auth{used.key_id, used.account_id, used.display_prefix, 60};
  const int64_t newest_old = Store::rateWindowStart(now - 70 * 60'000LL);
  for (int64_t ago : {95, 80, 70}) {  // minutes: all older than the hour retention keeps
    BOOST_REQUIRE(db.store->countRequest(auth, now - ago * 60'000LL).isOk());
  }
  BOOST_TEST(lastUsed(used) == newest_old);

  // The playground's windows (under a "portal:" name) are purged with the
  // rest, kept for no key.
  BOOST_REQUIRE(db.store->countPlaygroundRequest(used.account_id, now - 90 * 60'000LL).isOk());

  // Deleted one window per batch, the newest possibly first: the key keeps
  // the newest of them whatever the order. Its use is no change of the key:
  // the key epoch (which sends every eq-api to look its keys up again) stays.
  const int64_t epoch = db.store->keyEpoch().value();
  int purged = 0;
  for (int batch = 0; batch < 6; ++batch)
    purged += db.store->purgeRateCountersBefore(now - 3'600'000, 1).value();
  BOOST_TEST(purged == 4);
  BOOST_TEST(db.scalar("SELECT count(*) FROM rate_counters") == "0");
  BOOST_TEST(lastUsed(used) == newest_old);
  BOOST_TEST(lastUsed(idle) == 0);  // never used: still never
  BOOST_TEST(db.store->keyEpoch().value() == epoch);

  // An older window purged later (a purge after a late count) does not
  // move what is kept back.
  BOOST_REQUIRE(db.store->countRequest(auth, now - 100 * 60'000LL).isOk());
  BOOST_TEST(db.store->purgeRateCountersBefore(now - 3'600'000, 10).value() == 1);
  BOOST_TEST(lastUsed(used) == newest_old);

  // Used again: the new window is newer than what the key kept.
  BOOST_REQUIRE(db.store->countRequest(auth, now - 60'000).isOk());
  BOOST_TEST(lastUsed(used) == Store::rateWindowStart(now - 60'000));
}

EQ_STORE_TEST_CASE(retention_purges_idempotency_keys_and_rate_windows_by_age) {
  TempDb db;
  CreatedKey k = db.newKey();
  const int64_t now = 1'800'000'000'000;
  AuthContext auth{k.key_id, k.account_id, k.display_prefix, 60};
  for (int m = 0; m < 90; m += 10) {  // windows from 90 to 10 minutes ago
    BOOST_REQUIRE(db.store->countRequest(auth, now - (90 - m) * 60'000LL).isOk());
  }
  BOOST_TEST(db.scalar("SELECT count(*) FROM rate_counters") == "9");
  BOOST_TEST(db.store->purgeRateCountersBefore(now - 3'600'000, 2).value() == 2);
  BOOST_TEST(db.store->purgeRateCountersBefore(now - 3'600'000, 100).value() == 1);
  BOOST_TEST(db.scalar("SELECT count(*) FROM rate_counters") == "6");  // the last hour's

  for (int i = 0; i < 3; ++i) {
    BOOST_REQUIRE(
        db.store
            ->beginIdempotent(idem(k, "old" + std::to_string(i), "{}", "req_o" + std::to_string(i)),
                              now - Store::kIdempotencyTtlMs - 10'000)
            .isOk());
  }
  // Inserted before the old ones lapse, so eq-api's own lazy purge leaves them.
  BOOST_REQUIRE(db.store->beginIdempotent(idem(k, "fresh", "{}", "req_n"), now - 20'000).isOk());
  BOOST_TEST(db.scalar("SELECT count(*) FROM idempotency_keys") == "4");
  BOOST_TEST(db.store->purgeIdempotencyBefore(now - Store::kIdempotencyTtlMs, 100).value() == 3);
  BOOST_TEST(db.scalar("SELECT idem_key FROM idempotency_keys") == "fresh");
}

EQ_STORE_TEST_CASE(transactions_nest_as_savepoints) {
  TempDb db;
  CreatedKey k = db.newKey();
  BOOST_REQUIRE(db.store->begin().isOk());
  BOOST_TEST(
      (db.store->chargeQuota(k.account_id, "fast", nowMs()).value() == ChargeOutcome::kCharged));
  BOOST_REQUIRE(db.store->begin().isOk());  // a savepoint inside
  BOOST_TEST(
      (db.store->chargeQuota(k.account_id, "fast", nowMs()).value() == ChargeOutcome::kCharged));
  BOOST_TEST(db.store->rollback().isOk());  // undoes the inner charge only
  // A method with its own transaction works inside the caller's.
  BOOST_TEST(db.store->revokeKey(k.key_id).isOk());
  BOOST_TEST(db.store->inTransaction());
  BOOST_TEST(db.store->commit().isOk());
  BOOST_TEST(!db.store->inTransaction());
  BOOST_TEST(db.store->quota(k.account_id).value().remaining.fast == 99);
  BOOST_TEST(db.scalar("SELECT status FROM api_keys") == "revoked");
}

EQ_STORE_TEST_CASE(key_epoch_moves_with_key_and_rate_changes_only) {
  TempDb db;
  CreatedKey k = db.newKey();
  int64_t e0 = db.store->keyEpoch().value();
  BOOST_TEST(db.store->chargeQuota(k.account_id, "fast", nowMs()).isOk());
  BOOST_TEST(
      db.store->countRequest(AuthContext{k.key_id, k.account_id, "", 60, 0}, nowMs()).isOk());
  BOOST_TEST(db.store->keyEpoch().value() == e0, "charges and rate counts leave it");
  KeyUpdate u;
  u.rate_limit_per_min = 5;
  BOOST_TEST(db.store->updateKey(k.key_id, u).isOk());
  int64_t e1 = db.store->keyEpoch().value();
  BOOST_TEST(e1 > e0, "a rate-limit change moves it");
  BOOST_TEST(db.store->revokeKey(k.key_id).isOk());
  BOOST_TEST(db.store->keyEpoch().value() > e1, "a revocation moves it");
}

EQ_STORE_TEST_CASE(batched_rate_counts_add_up) {
  TempDb db;
  CreatedKey k = db.newKey();
  int64_t w = Store::rateWindowStart(nowMs());
  BOOST_TEST(db.store->countRequests(k.key_id, w, 3).value() == 3);
  BOOST_TEST(db.store->countRequests(k.key_id, w, 4).value() == 7);
  // Several keys and windows at once: each count in the increments' order.
  CreatedKey other = db.newKey();
  Result<std::vector<int64_t>> many =
      db.store->countRequests({{other.key_id, w, 2}, {k.key_id, w, 1}, {k.key_id, w - 60'000, 5}});
  BOOST_TEST_REQUIRE(many.isOk(), many.status().msg());
  BOOST_TEST(many.value() == (std::vector<int64_t>{2, 8, 5}), boost::test_tools::per_element());
  BOOST_TEST(db.store->countRequests(std::vector<Store::RateIncrement>{}).value().empty());
  RateDecision d = Store::rateDecision(5, 6, w, w);
  BOOST_TEST(!d.allowed);
  BOOST_TEST(d.remaining == 0);
  BOOST_TEST(Store::rateDecision(5, 5, w, w).allowed);
}

// A call as eq-api admits it (api/admission.cc): one fast unit charged, the
// task row of an async call (`c.task_id` set), and the open charge.
void admit(Store& s, const CreatedKey& k, const OpenCharge& c) {
  BOOST_REQUIRE(s.chargeQuota(k.account_id, "fast", c.created_at_ms).value() ==
                ChargeOutcome::kCharged);
  if (!c.task_id.empty()) {
    TaskRecord t;
    t.task_id = c.task_id;
    t.account_id = k.account_id;
    t.key_id = k.key_id;
    t.request_id = c.request_id;
    t.mode = "fast";
    t.created_at = c.created_at_ms;
    BOOST_REQUIRE(s.createTask(t).isOk());
  }
  BOOST_REQUIRE(s.openCharge(c).isOk());
}

// What the settlement cases share: an account with 10 fast units, the
// store, the time the calls were admitted, and two eq-api instances, one
// that stays alive and one that died (its heartbeat is never renewed).
struct OrphanedCalls {
  TempDb db;
  CreatedKey k = db.newKey(10);
  Store& s = *db.store;
  const int64_t t0 = nowMs();

  OrphanedCalls() {
    BOOST_REQUIRE(s.registerInstance("api_live", 1, t0).isOk());
    BOOST_REQUIRE(s.registerInstance("api_dead", 2, t0).isOk());
  }
  int64_t fast() { return s.quota(k.account_id).value().remaining.fast; }
};

// Crash-safe accounting (issue 13): only a dead instance's charges, or a
// charge far past its deadline, are settled by the sweep; each exactly
// once, whoever gets there first (eq-api's own settle or the sweep).
EQ_STORE_FIXTURE_TEST_CASE(orphaned_charges_are_settled_once_and_only_when_orphaned,
                           OrphanedCalls) {
  auto charge = [&](const std::string& req, const std::string& instance, const std::string& task,
                    int64_t deadline) {
    admit(s, k, OpenCharge{req, instance, k.account_id, "fast", task, deadline, t0, "", ""});
  };
  charge("req_live", "api_live", "", t0 + 30'000);
  charge("req_dead_sync", "api_dead", "", t0 + 30'000);
  charge("req_dead_async", "api_dead", "tsk_dead", t0 + 60'000);
  charge("req_gone", "api_never_registered", "", t0 + 30'000);
  charge("req_overdue", "api_live", "", t0 + 1'000);
  BOOST_TEST(fast() == 5);

  // 20 s later the live instance has beaten, the dead one has not.
  const int64_t t1 = t0 + 20'000;
  BOOST_REQUIRE(s.heartbeatInstance("api_live", t1).isOk());
  BOOST_REQUIRE(s.begin().isOk());
  auto settled = s.settleOrphanedCharges(t1, 10'000, 15'000);
  BOOST_REQUIRE(settled.isOk());
  BOOST_REQUIRE(s.commit().isOk());
  std::map<std::string, std::string> by_request;
  for (const Settlement& st : settled.value()) by_request[st.charge.request_id] = st.action;
  BOOST_TEST(by_request.size() == 4u);
  BOOST_TEST(by_request["req_dead_sync"] == "refunded");
  BOOST_TEST(by_request["req_dead_async"] == "task_failed");
  BOOST_TEST(by_request["req_gone"] == "refunded");     // no heartbeat row at all
  BOOST_TEST(by_request["req_overdue"] == "refunded");  // past deadline + grace, though live
  BOOST_TEST(!by_request.contains("req_live"));
  BOOST_TEST(fast() == 9, "four units back, the live call's still charged");
  BOOST_TEST(s.task("tsk_dead").value()->status == TaskStatus::kFailed);

  // The live eq-api settles its own call later: only that one closes it.
  BOOST_TEST(s.closeCharge("req_live").value());
  BOOST_TEST(!s.closeCharge("req_live").value());
  // eq-api's late settle of a call the sweep already refunded finds nothing
  // to close, so it must not refund again.
  BOOST_TEST(!s.closeCharge("req_dead_sync").value());
  // Many at once: only those still open are closed, and said to be.
  BOOST_REQUIRE(s.openCharge(OpenCharge{"req_a", "api_live", k.account_id, "fast", "", t1 + 30'000,
                                        t1, "", ""})
                    .isOk());
  BOOST_REQUIRE(s.openCharge(OpenCharge{"req_b\"{,}", "api_live", k.account_id, "fast", "",
                                        t1 + 30'000, t1, "", ""})
                    .isOk());
  auto many = s.closeCharges({"req_a", "req_dead_sync", "req_b\"{,}", "req_none"});
  BOOST_TEST_REQUIRE(many.isOk(), many.status().msg());
  std::set<std::string> closed(many.value().begin(), many.value().end());
  BOOST_TEST((closed == std::set<std::string>{"req_a", "req_b\"{,}"}));
  BOOST_TEST(s.closeCharges({"req_a"}).value().empty());
  BOOST_TEST(s.closeCharges({}).value().empty());
  // A second sweep has nothing left.
  BOOST_REQUIRE(s.begin().isOk());
  BOOST_TEST(s.settleOrphanedCharges(t1 + 60'000, 10'000, 15'000).value().empty());
  BOOST_REQUIRE(s.commit().isOk());
  BOOST_TEST(fast() == 9);

  // An instance swept for a stalled heartbeat comes back on its next beat.
  BOOST_REQUIRE(s.removeInstance("api_live").isOk());
  BOOST_TEST(s.heartbeatInstance("api_live", t1 + 1).isOk());
  BOOST_REQUIRE(s.openCharge(OpenCharge{"req_again", "api_live", k.account_id, "fast", "",
                                        t1 + 30'000, t1, "", ""})
                    .isOk());
  BOOST_REQUIRE(s.begin().isOk());
  BOOST_TEST(s.settleOrphanedCharges(t1 + 2, 10'000, 15'000).value().empty());
  BOOST_REQUIRE(s.commit().isOk());
}

// Issue 13: an async call whose eq-api died before it closed the charge
// may or may not have its job in the broker. The sweep never fails such a
// task while its job may still run: a task that has left `queued` is kept
// (its job reached the broker; its own outcome settles the unit), and a
// queued one is handed out to be published again, its job as eq-api kept
// it, then closed as republished, once. The unit stays charged once
// whatever the job's copies do.
EQ_STORE_FIXTURE_TEST_CASE(orphaned_async_charges_are_kept_or_published_again_never_failed,
                           OrphanedCalls) {
  auto charge = [&](const std::string& req, const std::string& instance, const std::string& task,
                    const std::string& job) {
    admit(s, k, OpenCharge{req, instance, k.account_id, "fast", task, t0 + 60'000, t0, job, ""});
  };
  charge("req_queued", "api_dead", "tsk_queued", R"({"job":"queued"})");
  charge("req_running", "api_dead", "tsk_running", R"({"job":"running"})");
  charge("req_done", "api_dead", "tsk_done", R"({"job":"done"})");
  charge("req_worker_failed", "api_dead", "tsk_worker_failed", R"({"job":"worker_failed"})");
  charge("req_live", "api_live", "tsk_live", R"({"job":"live"})");
  BOOST_TEST(fast() == 5);
  // What the dispatcher recorded before the sweep: three jobs reached a
  // worker; one of them failed there (which refunded it).
  BOOST_REQUIRE(s.markTaskRunning("tsk_running", t0 + 5).value());
  BOOST_REQUIRE(s.markTaskSucceeded("tsk_done", R"({"replies":[]})", t0 + 5).value());
  BOOST_REQUIRE(s.markTaskFailed("tsk_worker_failed", 500, "engine", t0 + 5).value());
  BOOST_TEST(fast() == 6);

  const int64_t t1 = t0 + 20'000;
  BOOST_REQUIRE(s.heartbeatInstance("api_live", t1).isOk());
  BOOST_REQUIRE(s.begin().isOk());
  auto settled = s.settleOrphanedCharges(t1, 10'000, 15'000);
  BOOST_REQUIRE(settled.isOk());
  BOOST_REQUIRE(s.commit().isOk());
  std::map<std::string, Settlement> by_request;
  for (const Settlement& st : settled.value()) by_request[st.charge.request_id] = st;
  BOOST_TEST(by_request.size() == 3u, "the queued task's charge is left to the republisher");
  for (const char* req : {"req_running", "req_done", "req_worker_failed"}) {
    BOOST_TEST(by_request[req].action == "kept", req);
    BOOST_TEST(!by_request[req].task_changed, req);
    BOOST_TEST(by_request[req].reason.find("reached the broker") != std::string::npos,
               by_request[req].reason);
  }
  BOOST_TEST(by_request["req_running"].reason.find("running") != std::string::npos);
  BOOST_TEST(s.task("tsk_running").value()->status == TaskStatus::kRunning,
             "not failed under its worker");
  BOOST_TEST(fast() == 6, "nothing refunded by the sweep");

  // The queued one: published again with the job eq-api kept, by the
  // dispatcher that claimed it. (The live eq-api keeps beating meanwhile.)
  auto claim = [&](int64_t now) {
    BOOST_REQUIRE(s.heartbeatInstance("api_live", now).isOk());
    auto c = s.claimOrphanedJobs(now, 10'000, 15'000, now + 30'000, 100);
    BOOST_REQUIRE_MESSAGE(c.isOk(), c.status().msg());
    return c.value();
  };
  const std::vector<OpenCharge> jobs = claim(t1);
  BOOST_REQUIRE(jobs.size() == 1u);
  const OpenCharge& j = jobs[0];
  BOOST_TEST(j.request_id == "req_queued");
  BOOST_TEST(j.task_id == "tsk_queued");
  BOOST_TEST(j.mode == "fast");
  BOOST_TEST(j.job == R"({"job":"queued"})");
  // Claimed: another sweep finds nothing while the claim lasts, and the job
  // again once it ended or was handed back. (The read finds it either way.)
  BOOST_TEST(s.anyOrphanedJob(t1 + 1, 10'000, 15'000).value());
  BOOST_TEST(claim(t1 + 29'999).empty());
  BOOST_TEST(claim(t1 + 30'000).size() == 1u, "the claim ended");
  // Handed back by whoever holds it: the first claim's holder no longer does.
  BOOST_REQUIRE(s.releaseOrphanedJobs({"req_queued"}, t1 + 30'000).isOk());
  BOOST_TEST(claim(t1 + 1).empty(), "still the second claim's");
  BOOST_REQUIRE(s.releaseOrphanedJobs({"req_queued"}, t1 + 60'000).isOk());
  BOOST_TEST(claim(t1 + 1).size() == 1u, "handed back");
  BOOST_REQUIRE(s.begin().isOk());
  BOOST_TEST(s.settleRepublished(j, t1).value());
  BOOST_TEST(!s.settleRepublished(j, t1).value(), "closed once");
  BOOST_REQUIRE(s.commit().isOk());
  BOOST_TEST(claim(t1 + 50'000).empty(), "settled: gone, claims or not");
  BOOST_TEST(s.task("tsk_queued").value()->status == TaskStatus::kQueued);
  BOOST_TEST(fast() == 6, "still charged: its job is in the queue again");
  // Both copies of the job report: the task ends once, charged once.
  BOOST_TEST(s.markTaskSucceeded("tsk_queued", R"({"replies":[]})", t1 + 5).value());
  BOOST_TEST(!s.markTaskSucceeded("tsk_queued", R"({"replies":[]})", t1 + 6).value());
  BOOST_TEST(!s.markTaskFailed("tsk_queued", 500, "second copy", t1 + 7).value());
  BOOST_TEST(fast() == 6);

  // A second sweep has nothing left but the live eq-api's call.
  BOOST_REQUIRE(s.begin().isOk());
  BOOST_TEST(s.settleOrphanedCharges(t1 + 1, 10'000, 15'000).value().empty());
  BOOST_REQUIRE(s.commit().isOk());
  BOOST_TEST(s.closeCharge("req_live").value());
  std::map<std::string, int64_t> actions;
  BOOST_REQUIRE(
      db.raw()
          ->exec(store::Sql{"SELECT action, count(*) FROM settlements GROUP BY action "
                            "ORDER BY action"},
                 {},
                 [&](const store::Row& row) { actions[std::string(row.text(0))] = row.int64(1); })
          .isOk());
  BOOST_TEST(actions.size() == 2u);
  BOOST_TEST(actions["kept"] == 3);
  BOOST_TEST(actions["republished"] == 1);
}

// The Idempotency-Key of a call whose eq-api died before answering is
// settled with the charge: a retry with the key gets the task the client was
// charged for (kept, republished), or runs afresh when the call was refunded
// (a sync call, a job the broker kept refusing), instead of 409 "in
// progress" and then, once the record's lease ran out, a second charge.
EQ_STORE_FIXTURE_TEST_CASE(an_orphaned_calls_idempotency_key_is_settled_with_its_charge,
                           OrphanedCalls) {
  auto call = [&](const std::string& req, const std::string& idem, const std::string& task,
                  const std::string& job) {
    IdempotencyRequest r{k.account_id, idem, task.empty() ? "/api/v1/reply" : "/api/v1/reply/async",
                         crypto::sha256(idem), req};
    BOOST_REQUIRE((s.beginIdempotent(r, t0).value().state == IdempotencyState::kStarted));
    admit(s, k,
          OpenCharge{req, "api_dead", k.account_id, "fast", task, t0 + 60'000, t0, job, idem});
    return r;
  };
  const IdempotencyRequest sync = call("req_sync", "key-sync", "", "");
  const IdempotencyRequest running = call("req_running", "key-running", "tsk_running", "{}");
  const IdempotencyRequest queued = call("req_queued", "key-queued", "tsk_queued", "{}");
  const IdempotencyRequest refused = call("req_refused", "key-refused", "tsk_refused", "{}");
  BOOST_REQUIRE(s.markTaskRunning("tsk_running", t0 + 5).value());
  BOOST_TEST(fast() == 6);

  const int64_t t1 = t0 + 20'000;
  BOOST_REQUIRE(s.begin().isOk());
  BOOST_REQUIRE(s.settleOrphanedCharges(t1, 10'000, 15'000).isOk());
  auto jobs = s.claimOrphanedJobs(t1, 10'000, 15'000, t1 + 30'000, 100);
  BOOST_REQUIRE(jobs.isOk());
  BOOST_REQUIRE(jobs.value().size() == 2u);
  for (const OpenCharge& j : jobs.value()) {
    BOOST_TEST(!j.idem_key.empty());
    if (j.task_id == "tsk_queued") {
      BOOST_TEST(s.settleRepublished(j, t1).value());
    } else {
      BOOST_TEST(s.settleUnpublishable(j, t1, "the broker refused its job 5 times").value());
      BOOST_TEST(!s.settleUnpublishable(j, t1, "again").value(), "closed once");
    }
  }
  BOOST_REQUIRE(s.commit().isOk());
  BOOST_TEST(fast() == 8, "the sync call and the refused job refunded, the other two kept");
  BOOST_TEST(s.task("tsk_refused").value()->status == TaskStatus::kFailed);

  // Kept and republished: the retry is the answer eq-api would have sent.
  for (const auto& [r, task] : {std::pair{running, "tsk_running"}, {queued, "tsk_queued"}}) {
    IdempotencyRequest retry = r;
    retry.request_id = "req_retry_" + std::string(task);
    IdempotencyBegin b = s.beginIdempotent(retry, t1 + 10).value();
    BOOST_TEST((b.state == IdempotencyState::kReplay), task);
    BOOST_TEST(b.http_status == 200);
    BOOST_TEST(b.response_body == json::asyncAcceptedBody(task));
  }
  // Refunded: the retry runs afresh at once.
  for (const IdempotencyRequest& r : {sync, refused}) {
    IdempotencyRequest retry = r;
    retry.request_id = "req_retry_" + r.key;
    BOOST_TEST((s.beginIdempotent(retry, t1 + 10).value().state == IdempotencyState::kStarted),
               r.key);
  }
}

BOOST_AUTO_TEST_SUITE_END()
