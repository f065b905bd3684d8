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
  auto ok = db.store->authenticate(k.api_key, "production");
  BOOST_REQUIRE(ok.isOk());
  BOOST_REQUIRE(ok.value().has_value());
  BOOST_TEST(ok.value()->account_id == k.account_id);
  std::string wrong = k.api_key;
  wrong.back() = wrong.back() == 'A' ? 'B' : 'A';
  BOOST_TEST(!db.store->authenticate(wrong, "production").value().has_value());
  BOOST_TEST(!db.store->authenticate(k.api_key, "staging").value().has_value());
  BOOST_TEST(db.store->revokeKey(k.key_id).isOk());
  BOOST_TEST(!db.store->authenticate(k.api_key, "production").value().has_value());
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
  AuthContext who = db.store->authenticate(k.api_key, "production").value().value();
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
  BOOST_TEST(db.scalar("SELECT count(*) FROM schema_migrations") == "1");
}

BOOST_AUTO_TEST_SUITE_END()
