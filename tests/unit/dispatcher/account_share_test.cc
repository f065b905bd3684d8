// The per-account share of the webhook sender's slots
// (dispatcher/account_share.h) and its configuration.
#include "dispatcher/account_share.h"

#include <stdlib.h>

#include <boost/test/unit_test.hpp>

#include "common/config.h"

using namespace eq;
using namespace eq::dispatch;

namespace {

// Config::fromEnv with the two webhook slot variables set (nullptr: unset).
Result<Config> configWith(const char* total, const char* per_account) {
  auto set = [](const char* name, const char* v) {
    if (v != nullptr) setenv(name, v, 1); else unsetenv(name);
  };
  set("EQ_WEBHOOK_MAX_IN_FLIGHT", total);
  set("EQ_WEBHOOK_MAX_IN_FLIGHT_PER_ACCOUNT", per_account);
  Result<Config> c = Config::fromEnv();
  unsetenv("EQ_WEBHOOK_MAX_IN_FLIGHT");
  unsetenv("EQ_WEBHOOK_MAX_IN_FLIGHT_PER_ACCOUNT");
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(account_share)

BOOST_AUTO_TEST_CASE(an_account_has_room_until_its_share_is_in_flight) {
  AccountShare share(2);
  BOOST_TEST(share.hasRoom("acc_a"));
  share.take("acc_a");
  BOOST_TEST(share.hasRoom("acc_a"));
  share.take("acc_a");
  BOOST_TEST(!share.hasRoom("acc_a"));
  BOOST_TEST(share.inFlight("acc_a") == 2);
  // Another account is not held back by the first one's attempts.
  BOOST_TEST(share.hasRoom("acc_b"));
  share.take("acc_b");
  BOOST_TEST(share.accounts() == 2u);
  // An attempt that ends frees a slot of its own account only.
  share.give("acc_a");
  BOOST_TEST(share.hasRoom("acc_a"));
  BOOST_TEST(share.inFlight("acc_b") == 1);
  share.give("acc_a");
  share.give("acc_b");
  BOOST_TEST(share.accounts() == 0u, "accounts with nothing in flight leave no entry");
  BOOST_TEST(share.inFlight("acc_a") == 0);
}

BOOST_AUTO_TEST_CASE(a_copy_counts_a_scans_claims_without_touching_the_original) {
  // The sender's scan counts its claims on a copy: claims that never start
  // must not hold a slot of the account afterwards.
  AccountShare share(1);
  AccountShare picking = share;
  picking.take("acc_a");
  BOOST_TEST(!picking.hasRoom("acc_a"));
  BOOST_TEST(share.hasRoom("acc_a"));
}

BOOST_AUTO_TEST_CASE(the_share_defaults_to_a_quarter_of_the_slots_and_at_least_one) {
  BOOST_TEST(configWith(nullptr, nullptr).value().webhook_max_in_flight_per_account == 16);
  BOOST_TEST(configWith("10", nullptr).value().webhook_max_in_flight_per_account == 2);
  BOOST_TEST(configWith("3", nullptr).value().webhook_max_in_flight_per_account == 1);
  BOOST_TEST(configWith("1", nullptr).value().webhook_max_in_flight_per_account == 1);
  BOOST_TEST(configWith("4", "2").value().webhook_max_in_flight_per_account == 2);
  BOOST_TEST(configWith("4", "4").value().webhook_max_in_flight_per_account == 4);
  BOOST_TEST(configWith(nullptr, "64").value().webhook_max_in_flight_per_account == 64);
}

BOOST_AUTO_TEST_CASE(a_bad_share_stops_the_process_with_a_message_that_names_it) {
  for (auto [total, per_account] : {std::pair{"4", "5"}, std::pair{"64", "0"},
                                    std::pair{"64", "-1"}, std::pair{"64", "2x"},
                                    std::pair<const char*, const char*>{nullptr, "65"}}) {
    Result<Config> c = configWith(total, per_account);
    BOOST_TEST(!c.isOk(), per_account);
    if (!c.isOk()) {
      BOOST_TEST(c.status().msg().find("EQ_WEBHOOK_MAX_IN_FLIGHT_PER_ACCOUNT") !=
                 std::string::npos);
      BOOST_TEST(c.status().msg().find("at most EQ_WEBHOOK_MAX_IN_FLIGHT") != std::string::npos,
                 c.status().msg());
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
