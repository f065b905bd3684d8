// A batch's admissions charged at once (Store::chargeAndOpenAll), on both
// engines: per account and mode, in order, the calls are charged while the
// mode has units and the month volume, each charged call with its open
// charge and (async) its task, the rest told why not, as chargeAndOpen
// would tell each; the usage record counts what was charged. Across hosts
// under concurrency: concurrency_test.cc.
#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "common/timefmt.h"
#include "store/store.h"
#include "tests/unit/temp_db.h"

using namespace eq;

namespace {

using test::TempDb;

Store::ChargeCall call(const CreatedKey& k, const std::string& id, const std::string& mode,
                       int64_t at, bool async = false) {
  OpenCharge c{"req_" + id, "api_1", k.account_id, mode, async ? "tsk_" + id : "", at + 30'000,
               at, async ? "{\"job\":\"" + id + "\"}" : "", ""};
  return Store::ChargeCall{c, k.key_id, async ? "https://hook.example/" + id : ""};
}

// Each outcome's name, for comparisons that print.
std::vector<std::string> outcomes(const std::vector<Result<ChargeOutcome>>& results) {
  std::vector<std::string> out;
  for (const Result<ChargeOutcome>& r : results) {
    BOOST_REQUIRE_MESSAGE(r.isOk(), r.status().msg());
    switch (r.value()) {
      case ChargeOutcome::kCharged:
        out.emplace_back("charged");
        break;
      case ChargeOutcome::kExhausted:
        out.emplace_back("exhausted");
        break;
      case ChargeOutcome::kExpired:
        out.emplace_back("expired");
        break;
      case ChargeOutcome::kMonthlyLimit:
        out.emplace_back("monthly");
        break;
    }
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(charge_batch)

EQ_STORE_TEST_CASE(a_batch_charges_each_account_and_mode_in_order_while_units_last) {
  TempDb db("charge_batch");
  const int64_t now = nowMs();
  CreatedKey a = db.newKey(3);  // 3 units a mode
  CreatedKey b = db.newKey(1);
  std::vector<Store::ChargeCall> calls = {
      call(a, "a1", "fast", now),         call(b, "b1", "fast", now),
      call(a, "a2", "fast", now, true),   call(a, "s1", "standard", now),
      call(a, "a3", "fast", now),         call(b, "b2", "fast", now, true),
      call(a, "a4", "fast", now, true),   call(a, "a5", "fast", now)};
  BOOST_REQUIRE(db.store->begin().isOk());
  std::vector<std::string> got = outcomes(db.store->chargeAndOpenAll(calls));
  BOOST_REQUIRE(db.store->commit().isOk());
  const std::vector<std::string> want = {"charged", "charged",   "charged",   "charged",
                                         "charged", "exhausted", "exhausted", "exhausted"};
  BOOST_TEST(got == want, boost::test_tools::per_element());
  BOOST_TEST(db.store->quota(a.account_id).value().remaining.fast == 0);
  BOOST_TEST(db.store->quota(a.account_id).value().remaining.standard == 2);
  BOOST_TEST(db.store->quota(b.account_id).value().remaining.fast == 0);
  // The charged calls' open charges, and a task for the one async call
  // charged, with its webhook and job; none for the calls refused.
  BOOST_TEST(db.scalar("SELECT count(*) FROM open_charges") == "5");
  BOOST_TEST(db.scalar("SELECT count(*) FROM open_charges WHERE request_id IN ('req_a4', "
                       "'req_a5', 'req_b2')") == "0");
  BOOST_TEST(db.scalar("SELECT job FROM open_charges WHERE request_id = 'req_a2'") ==
             "{\"job\":\"a2\"}");
  BOOST_TEST(db.scalar("SELECT count(*) FROM tasks") == "1");
  Result<std::optional<TaskRecord>> t = db.store->task("tsk_a2");
  BOOST_REQUIRE(t.isOk() && t.value().has_value());
  BOOST_TEST(t.value()->account_id == a.account_id);
  BOOST_TEST(t.value()->key_id == a.key_id);
  BOOST_TEST(t.value()->request_id == "req_a2");
  BOOST_TEST(t.value()->webhook_url == "https://hook.example/a2");
  BOOST_TEST(t.value()->mode == "fast");
  // The usage record: what the quota lost.
  BOOST_TEST(db.scalar("SELECT sum(calls) FROM usage_hourly WHERE account_id = '" + a.account_id +
                       "'") == "4");
  BOOST_TEST(db.scalar("SELECT sum(calls) FROM usage_hourly WHERE account_id = '" + b.account_id +
                       "'") == "1");
}

// Each call's own row values, not its group's first: its time, deadline,
// key, job and webhook (the account's default where it gives none); the
// hour's usage row counted on top of the one an earlier charge made; and a
// month the account has not counted yet starts the count again.
EQ_STORE_TEST_CASE(each_charged_call_keeps_its_own_values) {
  TempDb db("charge_batch");
  const int64_t now = nowMs();
  CreatedKey k = db.newKey(10);
  KeyUpdate u;
  u.default_webhook_url = "https://default.example/hook";
  BOOST_REQUIRE(db.store->updateKey(k.key_id, u).isOk());
  BOOST_REQUIRE(db.store->chargeAndOpen(call(k, "x", "fast", now).charge, k.key_id, "").value() ==
                ChargeOutcome::kCharged);
  // The account counted an earlier month: this batch starts this one.
  BOOST_REQUIRE(db.script("UPDATE accounts SET month_start = " +
                          std::to_string(monthStartMs(now) - 86'400'000LL * 40) +
                          ", month_used = 77 WHERE id = '" + k.account_id + "'")
                    .isOk());
  Store::ChargeCall first = call(k, "c1", "fast", now, true);
  Store::ChargeCall second = call(k, "c2", "fast", now + 7, true);
  second.key_id = "key_other";
  second.webhook_url = "";
  second.charge.deadline_at_ms = now + 99'000;
  BOOST_REQUIRE(db.store->begin().isOk());
  std::vector<std::string> got = outcomes(db.store->chargeAndOpenAll({first, second}));
  BOOST_REQUIRE(db.store->commit().isOk());
  BOOST_TEST(got == (std::vector<std::string>{"charged", "charged"}),
             boost::test_tools::per_element());
  BOOST_TEST(db.scalar("SELECT created_at FROM open_charges WHERE request_id = 'req_c2'") ==
             std::to_string(now + 7));
  BOOST_TEST(db.scalar("SELECT deadline_at FROM open_charges WHERE request_id = 'req_c2'") ==
             std::to_string(now + 99'000));
  BOOST_TEST(db.scalar("SELECT job FROM open_charges WHERE request_id = 'req_c2'") ==
             "{\"job\":\"c2\"}");
  Result<std::optional<TaskRecord>> t1 = db.store->task("tsk_c1");
  Result<std::optional<TaskRecord>> t2 = db.store->task("tsk_c2");
  BOOST_REQUIRE(t1.isOk() && t1.value() && t2.isOk() && t2.value());
  BOOST_TEST(t1.value()->key_id == k.key_id);
  BOOST_TEST(t1.value()->webhook_url == "https://hook.example/c1");
  BOOST_TEST(t1.value()->created_at == now);
  BOOST_TEST(t2.value()->key_id == "key_other");
  BOOST_TEST(t2.value()->webhook_url == "https://default.example/hook");
  BOOST_TEST(t2.value()->created_at == now + 7);
  BOOST_TEST(t2.value()->request_id == "req_c2");
  // One usage row for the hour: the earlier charge's and these two.
  const std::string where = " FROM usage_hourly WHERE account_id = '" + k.account_id + "'";
  BOOST_TEST(db.scalar("SELECT count(*)" + where) == "1");
  BOOST_TEST(db.scalar("SELECT calls" + where) == "3");
  AccountQuota q = db.store->quota(k.account_id).value();
  BOOST_TEST(q.month_start_ms == monthStartMs(now));
  BOOST_TEST(q.month_used == 2);
  BOOST_TEST(q.remaining.fast == 7);
}

EQ_STORE_TEST_CASE(a_batch_stops_at_the_months_volume_and_at_expiry) {
  TempDb db("charge_batch");
  const int64_t now = nowMs();
  CreatedKey k = db.newKey(100);
  QuotaChange change;
  change.monthly_limit = 3;
  BOOST_REQUIRE(db.store->setQuota(k.account_id, change, now + 86'400'000, {}).isOk());
  // One unit of the month used already, by the one-call admission.
  BOOST_REQUIRE(db.store->chargeAndOpen(call(k, "x", "standard", now).charge, k.key_id, "").value() ==
                ChargeOutcome::kCharged);
  std::vector<Store::ChargeCall> calls = {call(k, "f1", "fast", now), call(k, "p1", "perfect", now),
                                          call(k, "f2", "fast", now), call(k, "f3", "fast", now)};
  BOOST_REQUIRE(db.store->begin().isOk());
  std::vector<std::string> got = outcomes(db.store->chargeAndOpenAll(calls));
  BOOST_REQUIRE(db.store->commit().isOk());
  // fast goes first (its group is the batch's first) and takes the month's
  // last two units; perfect finds none.
  const std::vector<std::string> want = {"charged", "monthly", "charged", "monthly"};
  BOOST_TEST(got == want, boost::test_tools::per_element());
  AccountQuota q = db.store->quota(k.account_id).value();
  BOOST_TEST(q.month_used == 3);
  BOOST_TEST(q.month_start_ms == monthStartMs(now));
  BOOST_TEST(q.remaining.fast == 98);
  BOOST_TEST(q.remaining.perfect == 100);
  BOOST_TEST(db.scalar("SELECT count(*) FROM open_charges") == "3");

  // Expired: nothing charged, each told so.
  BOOST_REQUIRE(db.store->setQuota(k.account_id, QuotaChange{}, now - 1, {}).isOk());
  BOOST_REQUIRE(db.store->begin().isOk());
  got = outcomes(db.store->chargeAndOpenAll({call(k, "e1", "fast", now), call(k, "e2", "fast", now)}));
  BOOST_REQUIRE(db.store->commit().isOk());
  BOOST_TEST(got == (std::vector<std::string>{"expired", "expired"}),
             boost::test_tools::per_element());
  BOOST_TEST(db.scalar("SELECT count(*) FROM open_charges") == "3");
}

// A call whose open charge cannot be written (its request id taken) fails
// its own group, none of which is charged; another group of the batch is.
EQ_STORE_TEST_CASE(a_group_that_fails_charges_none_of_its_calls_and_only_it) {
  TempDb db("charge_batch");
  const int64_t now = nowMs();
  CreatedKey a = db.newKey(10);
  CreatedKey b = db.newKey(10);
  BOOST_REQUIRE(db.store->chargeAndOpen(call(a, "dup", "fast", now).charge, a.key_id, "").value() ==
                ChargeOutcome::kCharged);
  BOOST_REQUIRE(db.store->begin().isOk());
  std::vector<Result<ChargeOutcome>> got = db.store->chargeAndOpenAll(
      {call(a, "a1", "fast", now), call(a, "dup", "fast", now), call(b, "b1", "fast", now)});
  BOOST_REQUIRE(db.store->commit().isOk());
  BOOST_REQUIRE(got.size() == 3u);
  BOOST_TEST(got[2].isOk());
  BOOST_TEST(db.store->quota(b.account_id).value().remaining.fast == 9);
  // SQLite charges call by call: the first of account a's is kept there.
  if (test::currentEngine() == test::Engine::kPostgres) {
    BOOST_TEST(!got[0].isOk());
    BOOST_TEST(!got[1].isOk());
    BOOST_TEST(db.store->quota(a.account_id).value().remaining.fast == 9);
  } else {
    BOOST_TEST(got[0].isOk());
    BOOST_TEST(!got[1].isOk());
    BOOST_TEST(db.store->quota(a.account_id).value().remaining.fast == 8);
  }
  BOOST_TEST(db.scalar("SELECT count(*) FROM open_charges WHERE account_id = '" + a.account_id +
                       "'") == (test::currentEngine() == test::Engine::kPostgres ? "1" : "2"));
}

BOOST_AUTO_TEST_SUITE_END()
