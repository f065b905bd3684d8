// Open registration's limits in the store (issue 25): each scope with its
// own maximum and window, and retention that keeps registration rows for
// their whole day while sign-in failures go after 15 minutes.
#include <boost/test/unit_test.hpp>

#include "store/store.h"
#include "tests/unit/temp_db.h"

using namespace eq;

BOOST_AUTO_TEST_SUITE(registration_limit)

EQ_STORE_TEST_CASE(each_scope_has_its_own_maximum_and_window) {
  test::TempDb db("portal");
  int64_t now = 1'800'000'000'000;
  const int64_t day = Store::kRegisterAddressWindowMs, hour = Store::kRegisterAllWindowMs;
  auto limits = [&](const std::string& addr) {
    return std::vector<Store::AttemptLimit>{{"register:addr:" + addr, 2, day},
                                            {"register:all", 3, hour}};
  };
  BOOST_TEST(db.store->beginLimitedAttempt(limits("a"), now).value().retry_at_ms == 0);
  BOOST_TEST(db.store->beginLimitedAttempt(limits("a"), now + 1000).value().retry_at_ms == 0);
  // The address's day is full: limited until the first of its two leaves
  // the day, and nothing is recorded.
  Store::PasswordAttempt third = db.store->beginLimitedAttempt(limits("a"), now + 2000).value();
  BOOST_TEST(third.retry_at_ms == now + day);
  BOOST_TEST(third.counted.empty());
  // Another address: one more fits the hour, then the hour is full.
  BOOST_TEST(db.store->beginLimitedAttempt(limits("b"), now + 3000).value().retry_at_ms == 0);
  BOOST_TEST(db.store->beginLimitedAttempt(limits("c"), now + 4000).value().retry_at_ms ==
             now + hour);
  // An hour on, the hour has room again; the first address's day does not.
  BOOST_TEST(db.store->beginLimitedAttempt(limits("c"), now + hour + 1).value().retry_at_ms == 0);
  BOOST_TEST(db.store->beginLimitedAttempt(limits("a"), now + hour + 2).value().retry_at_ms ==
             now + day);
}

EQ_STORE_TEST_CASE(retention_keeps_registration_rows_for_their_day) {
  test::TempDb db("portal");
  int64_t now = 1'800'000'000'000;
  std::vector<Store::AttemptLimit> reg = {{"register:addr:a", 1, Store::kRegisterAddressWindowMs}};
  BOOST_REQUIRE(db.store->beginLimitedAttempt(reg, now).isOk());
  BOOST_REQUIRE(db.store->beginPasswordAttempt({"addr:a"}, now).isOk());
  // Two hours later the sign-in failure is purged, the registration stays
  // and still limits the address.
  int64_t later = now + 2 * 3'600'000;
  BOOST_REQUIRE(db.store->purgePortalBefore(later - 7 * 86'400'000LL, later, 100).isOk());
  BOOST_TEST(db.store->signinFailures("addr:a", later, 86'400'000).value() == 0);
  BOOST_TEST(db.store->beginLimitedAttempt(reg, later).value().retry_at_ms ==
             now + Store::kRegisterAddressWindowMs);
  // After its day it goes too.
  int64_t next_day = now + Store::kRegisterAddressWindowMs + 1;
  BOOST_REQUIRE(db.store->purgePortalBefore(next_day - 7 * 86'400'000LL, next_day, 100).isOk());
  BOOST_TEST(db.store->signinFailures("register:addr:a", next_day, 10 * 86'400'000LL).value() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
