// The monthly volume (docs/contract.md §11) in the store, on both engines:
// counted by the statement that takes the unit (both of eq-api's ways to
// charge: chargeAndOpen, one statement on PostgreSQL, and chargeQuota),
// refused past the limit with its own outcome, started again when the month
// turns (the charge's time is the clock here), given back by a refund to
// the month it was charged in, lifted by a limit of 0, and counted by
// migration 014 from the usage record for the month in progress. The limit
// under concurrency is in concurrency_test.cc.
#include <boost/test/unit_test.hpp>
#include <string>

#include "api/request_util.h"
#include "common/timefmt.h"
#include "store/migrations.h"
#include "store/store.h"
#include "tests/unit/temp_db.h"

using namespace eq;

namespace {

using test::TempDb;

// The first instants of three months, UTC.
constexpr int64_t kJan2027 = 1'798'761'600'000;
constexpr int64_t kFeb2027 = 1'801'440'000'000;
constexpr int64_t kMar2027 = 1'803'859'200'000;
constexpr int64_t kDay = 86'400'000;

// A key of `units` a mode whose account may use `monthly` units a month,
// its quota valid past the months these cases walk through.
CreatedKey monthlyKey(TempDb& db, int64_t units, int64_t monthly) {
  CreatedKey k = db.newKey(units);
  QuotaChange change;
  change.monthly_limit = monthly;
  BOOST_REQUIRE(db.store->setQuota(k.account_id, change, kMar2027 + 365 * kDay, {}).isOk());
  return k;
}

// One call's charge at `at`, through eq-api's admission (chargeAndOpen)
// or the plain charge.
ChargeOutcome charge(TempDb& db, const CreatedKey& k, const std::string& mode, int64_t at,
                     bool through_admission) {
  static int calls = 0;
  Result<ChargeOutcome> out =
      through_admission
          ? db.store->chargeAndOpen(OpenCharge{"req_m" + std::to_string(++calls), "api_1",
                                               k.account_id, mode, "", at + 30'000, at, "", ""},
                                    k.key_id, "")
          : db.store->chargeQuota(k.account_id, mode, at);
  BOOST_REQUIRE_MESSAGE(out.isOk(), out.status().msg());
  return out.value();
}

AccountQuota quotaOf(TempDb& db, const CreatedKey& k) {
  Result<AccountQuota> q = db.store->quota(k.account_id);
  BOOST_REQUIRE(q.isOk());
  return q.value();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(monthly_volume)

BOOST_AUTO_TEST_CASE(a_month_starts_on_its_first_day_at_midnight_utc) {
  BOOST_TEST(monthStartMs(kFeb2027) == kFeb2027);
  BOOST_TEST(monthStartMs(kFeb2027 - 1) == kJan2027);
  BOOST_TEST(nextMonthStartMs(kJan2027) == kFeb2027);
  BOOST_TEST(nextMonthStartMs(kFeb2027 - 1) == kFeb2027);
  BOOST_TEST(nextMonthStartMs(kFeb2027 + 27 * kDay) == kMar2027);  // 28 February
  // December carries into January of the next year; 29 February 2028.
  BOOST_TEST(nextMonthStartMs(1'827'619'200'000 + 15 * kDay) == 1'830'297'600'000);
  BOOST_TEST(nextMonthStartMs(1'832'976'000'000 + 28 * kDay) == 1'835'481'600'000);
  BOOST_TEST(iso8601Offset(nextMonthStartMs(kJan2027 + 10 * kDay)) == "2027-02-01T00:00:00+00:00");
}

// GET /api/v1/quota's month, worked out again only when the month turns
// (api/request_util.h): right on both sides of a turn, either way.
BOOST_AUTO_TEST_CASE(the_answers_month_follows_the_clock_across_a_turn) {
  using api::util::monthOf;
  BOOST_TEST(monthOf(kFeb2027 - 1).start_ms == kJan2027);
  BOOST_TEST(monthOf(kFeb2027 - 1).next_text == "2027-02-01T00:00:00+00:00");
  BOOST_TEST(monthOf(kFeb2027).start_ms == kFeb2027);
  BOOST_TEST(monthOf(kFeb2027 + 5 * kDay).next_ms == kMar2027);
  BOOST_TEST(monthOf(kFeb2027 + 5 * kDay).next_text == "2027-03-01T00:00:00+00:00");
  BOOST_TEST(monthOf(kFeb2027 - 1).start_ms == kJan2027);  // a clock set back
  AccountQuota q;
  q.month_start_ms = kFeb2027;
  q.month_used = 7;
  BOOST_TEST(q.usedInMonthStarting(kFeb2027) == 7);
  BOOST_TEST(q.usedInMonthStarting(kMar2027) == 0);
  BOOST_TEST(q.usedInMonthOf(kMar2027 + kDay) == 0);
}

EQ_STORE_TEST_CASE(a_month_never_passes_its_limit_and_the_next_starts_again) {
  for (bool admission : {true, false}) {
    BOOST_TEST_CONTEXT((admission ? "chargeAndOpen" : "chargeQuota")) {
      TempDb db;
      CreatedKey k = monthlyKey(db, 100, 3);
      const int64_t late_january = kFeb2027 - 60'000;
      // Over all modes.
      for (const char* mode : {"fast", "standard", "perfect"}) {
        BOOST_TEST((charge(db, k, mode, late_january, admission) == ChargeOutcome::kCharged));
      }
      BOOST_TEST((charge(db, k, "fast", late_january, admission) == ChargeOutcome::kMonthlyLimit));
      AccountQuota q = quotaOf(db, k);
      BOOST_TEST(q.remaining.fast == 99, "the refusal charged nothing");
      BOOST_TEST(q.usedInMonthOf(late_january) == 3);
      BOOST_TEST(q.monthlyReached(late_january));
      // The month turns: its count starts at this charge.
      BOOST_TEST(!q.monthlyReached(kFeb2027));
      BOOST_TEST(q.usedInMonthOf(kFeb2027) == 0);
      BOOST_TEST((charge(db, k, "fast", kFeb2027, admission) == ChargeOutcome::kCharged));
      BOOST_TEST(quotaOf(db, k).usedInMonthOf(kFeb2027) == 1);
      // A charge stamped a moment before the turn by a host whose clock is
      // behind counts in the month the account is in, not the one before.
      BOOST_TEST((charge(db, k, "fast", late_january, admission) == ChargeOutcome::kCharged));
      BOOST_TEST(quotaOf(db, k).usedInMonthOf(kFeb2027) == 2);
      BOOST_TEST(quotaOf(db, k).usedInMonthOf(kMar2027) == 0);
      // The mode's own exhaustion and expiry keep their outcomes.
      QuotaChange none;
      none.fast = 0;
      BOOST_REQUIRE(db.store->setQuota(k.account_id, none, {}, {}).isOk());
      BOOST_TEST((charge(db, k, "fast", kFeb2027, admission) == ChargeOutcome::kExhausted));
      BOOST_TEST((charge(db, k, "standard", kMar2027 + 366 * kDay, admission) ==
                  ChargeOutcome::kExpired));
    }
  }
}

EQ_STORE_TEST_CASE(a_refund_gives_the_unit_back_to_the_month_it_was_charged_in) {
  TempDb db;
  CreatedKey k = monthlyKey(db, 100, 2);
  const int64_t january = kJan2027 + 10 * kDay;
  BOOST_TEST((charge(db, k, "fast", january, true) == ChargeOutcome::kCharged));
  BOOST_TEST((charge(db, k, "fast", january, false) == ChargeOutcome::kCharged));
  BOOST_TEST((charge(db, k, "fast", january, true) == ChargeOutcome::kMonthlyLimit));
  BOOST_REQUIRE(db.store->refundQuota(k.account_id, "fast", january, january + 1'000).isOk());
  BOOST_TEST(quotaOf(db, k).usedInMonthOf(january) == 1);
  BOOST_TEST((charge(db, k, "fast", january, true) == ChargeOutcome::kCharged));
  BOOST_TEST(quotaOf(db, k).remaining.fast == 98);  // three charged, one refunded

  // February: a unit charged in January and refunded now goes back to the
  // mode, and leaves February's count alone.
  BOOST_TEST((charge(db, k, "fast", kFeb2027, false) == ChargeOutcome::kCharged));
  BOOST_REQUIRE(db.store->refundQuota(k.account_id, "fast", january, kFeb2027 + 1'000).isOk());
  AccountQuota q = quotaOf(db, k);
  BOOST_TEST(q.usedInMonthOf(kFeb2027) == 1);
  BOOST_TEST(q.remaining.fast == 98);  // one more charged, one more refunded
  // A failed task refunds its month too (the task's creation is its
  // charge's time).
  const OpenCharge async{"req_task", "api_1", k.account_id, "perfect", "tsk_m1", kFeb2027 + 30'000,
                         kFeb2027,   "{}",    ""};
  BOOST_REQUIRE((db.store->chargeAndOpen(async, k.key_id, "").value() == ChargeOutcome::kCharged));
  BOOST_TEST(quotaOf(db, k).usedInMonthOf(kFeb2027) == 2);
  BOOST_TEST(db.store->markTaskFailed("tsk_m1", 500, "failed", kFeb2027 + 5'000).value());
  BOOST_TEST(quotaOf(db, k).usedInMonthOf(kFeb2027) == 1);
  BOOST_TEST(quotaOf(db, k).remaining.perfect == 100);
}

EQ_STORE_TEST_CASE(a_limit_of_zero_is_no_limit_and_a_new_account_has_the_default) {
  TempDb db;
  CreatedKey fresh = db.newKey(5);
  BOOST_TEST(quotaOf(db, fresh).monthly_limit == 100'000);
  CreatedKey k = monthlyKey(db, 100, 1);
  const int64_t january = kJan2027 + kDay;
  BOOST_TEST((charge(db, k, "fast", january, true) == ChargeOutcome::kCharged));
  BOOST_TEST((charge(db, k, "fast", january, true) == ChargeOutcome::kMonthlyLimit));
  QuotaChange lift;
  lift.monthly_limit = 0;
  BOOST_REQUIRE(db.store->setQuota(k.account_id, lift, {}, {}).isOk());
  for (int i = 0; i < 5; ++i) {
    BOOST_TEST((charge(db, k, "standard", january, i % 2 == 0) == ChargeOutcome::kCharged));
  }
  AccountQuota q = quotaOf(db, k);
  BOOST_TEST(!q.monthlyReached(january));
  BOOST_TEST(q.usedInMonthOf(january) == 6, "still counted without a limit");
  // Lowering the limit under what the month used refuses the next call.
  QuotaChange lower;
  lower.monthly_limit = 4;
  BOOST_REQUIRE(db.store->setQuota(k.account_id, lower, {}, {}).isOk());
  BOOST_TEST((charge(db, k, "perfect", january, false) == ChargeOutcome::kMonthlyLimit));
}

// Migration 014 on a database that was in use: the month in progress counts
// what its hourly usage record says was charged in it (calls less refunds),
// and nothing of earlier months.
EQ_STORE_TEST_CASE(migration_14_counts_the_month_in_progress_from_the_usage_record) {
  TempDb db;
  CreatedKey k = db.newKey(100);
  const int64_t now = nowMs();
  const int64_t this_month = monthStartMs(now);
  // As version 13 left it: the columns not there, 014 not applied.
  BOOST_REQUIRE(db.script("ALTER TABLE accounts DROP COLUMN monthly_limit; "
                          "ALTER TABLE accounts DROP COLUMN month_start; "
                          "ALTER TABLE accounts DROP COLUMN month_used; "
                          "DELETE FROM schema_migrations WHERE version LIKE "
                          "'%014_monthly_volume.sql'")
                    .isOk());
  BOOST_REQUIRE(db.script("INSERT INTO usage_hourly (account_id, mode, hour, calls, refunded) "
                          "VALUES ('" +
                          k.account_id + "', 'fast', " + std::to_string(this_month) +
                          ", 5, 1), ('" + k.account_id + "', 'perfect', " +
                          std::to_string(this_month + 3'600'000) + ", 2, 0), ('" + k.account_id +
                          "', 'fast', " + std::to_string(this_month - 3'600'000) + ", 40, 0)")
                    .isOk());
  std::unique_ptr<store::Db> raw = db.raw();
  BOOST_REQUIRE(store::migrate(*raw).isOk());
  std::unique_ptr<Store> after = db.openAnother();
  AccountQuota q = after->quota(k.account_id).value();
  BOOST_TEST(q.monthly_limit == 100'000);
  BOOST_TEST(q.month_start_ms == this_month);
  BOOST_TEST(q.usedInMonthOf(now) == 6);
}

BOOST_AUTO_TEST_SUITE_END()
