// The webhook sender's slots, each account's share of them and the
// consumer's hand-over (dispatcher/slots.h), and their configuration.
#include "dispatcher/slots.h"

#include <stdlib.h>

#include <boost/test/unit_test.hpp>

#include "common/config.h"

using namespace eq;
using namespace eq::dispatch;

namespace {

// Config::fromEnv with the two webhook slot variables set (nullptr: unset).
Result<Config> configWith(const char* total, const char* per_account) {
  auto set = [](const char* name, const char* v) {
    if (v != nullptr)
      setenv(name, v, 1);
    else
      unsetenv(name);
  };
  set("EQ_WEBHOOK_MAX_IN_FLIGHT", total);
  set("EQ_WEBHOOK_MAX_IN_FLIGHT_PER_ACCOUNT", per_account);
  Result<Config> c = Config::fromEnv();
  unsetenv("EQ_WEBHOOK_MAX_IN_FLIGHT");
  unsetenv("EQ_WEBHOOK_MAX_IN_FLIGHT_PER_ACCOUNT");
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sender_slots)

BOOST_AUTO_TEST_CASE(an_account_has_room_until_its_share_is_taken) {
  SenderSlots slots(8, 2, 15'000);
  BOOST_TEST((slots.take("acc_a") == SenderSlots::Take::kTaken));
  BOOST_TEST((slots.take("acc_a") == SenderSlots::Take::kTaken));
  BOOST_TEST((slots.take("acc_a") == SenderSlots::Take::kAccountFull));
  BOOST_TEST(slots.inFlight("acc_a") == 2);
  // Another account is not held back by the first one's attempts.
  BOOST_TEST((slots.take("acc_b") == SenderSlots::Take::kTaken));
  BOOST_TEST(slots.accounts() == 2u);
  BOOST_TEST(slots.free() == 5);
  // An attempt that ends frees a slot of its own account only.
  slots.give("acc_a");
  BOOST_TEST((slots.take("acc_a") == SenderSlots::Take::kTaken));
  BOOST_TEST(slots.inFlight("acc_b") == 1);
  slots.give("acc_a");
  slots.give("acc_a");
  slots.give("acc_b");
  BOOST_TEST(slots.accounts() == 0u, "accounts with nothing taken leave no entry");
  BOOST_TEST(slots.free() == 8);
}

BOOST_AUTO_TEST_CASE(the_process_runs_out_of_slots_before_an_account_of_its_share) {
  SenderSlots slots(3, 2, 15'000);
  BOOST_TEST((slots.take("acc_a") == SenderSlots::Take::kTaken));
  BOOST_TEST((slots.take("acc_b") == SenderSlots::Take::kTaken));
  BOOST_TEST((slots.take("acc_c") == SenderSlots::Take::kTaken));
  BOOST_TEST((slots.take("acc_d") == SenderSlots::Take::kFull));
  BOOST_TEST(slots.free() == 0);
}

BOOST_AUTO_TEST_CASE(the_consumer_takes_no_slot_while_the_sender_has_a_backlog) {
  SenderSlots slots(4, 4, 15'000);
  // Until the sender's first scan, due deliveries may be waiting.
  BOOST_TEST((slots.takeForHandOver("acc_a") == SenderSlots::Take::kFull));
  slots.setBacklog(false);
  BOOST_TEST((slots.takeForHandOver("acc_a") == SenderSlots::Take::kTaken));
  slots.setBacklog(true);
  BOOST_TEST((slots.takeForHandOver("acc_a") == SenderSlots::Take::kFull));
  BOOST_TEST((slots.take("acc_a") == SenderSlots::Take::kTaken),
             "the sender's own scan still takes");
}

BOOST_AUTO_TEST_CASE(hand_overs_reach_the_sender_in_order_until_the_slots_close) {
  SenderSlots slots(4, 4, 15'000);
  int wakes = 0;
  slots.onHandOver([&] { ++wakes; });
  auto handed = [](const char* id) {
    HandedOver h;
    h.delivery.delivery_id = id;
    h.delivery.account_id = "acc_a";
    return h;
  };
  std::vector<HandedOver> batch;
  batch.push_back(handed("dlv_1"));
  batch.push_back(handed("dlv_2"));
  BOOST_TEST(slots.handOver(batch));
  BOOST_TEST(batch.empty(), "moved to the sender");
  BOOST_TEST(wakes == 1);
  batch.push_back(handed("dlv_3"));
  BOOST_TEST(slots.handOver(batch));
  std::vector<HandedOver> got = slots.takeHandedOver();
  BOOST_REQUIRE(got.size() == 3u);
  BOOST_TEST(got[0].delivery.delivery_id == "dlv_1");
  BOOST_TEST(got[2].delivery.delivery_id == "dlv_3");
  BOOST_TEST(slots.takeHandedOver().empty());

  // Closed (the sender stops): what was handed over and not taken comes
  // back to the sender, its slot given back, and nothing more is taken or
  // handed over.
  BOOST_REQUIRE((slots.take("acc_a") == SenderSlots::Take::kTaken));
  batch.push_back(handed("dlv_4"));
  BOOST_TEST(slots.handOver(batch));
  std::vector<std::string> left = slots.close();
  BOOST_REQUIRE(left.size() == 1u);
  BOOST_TEST(left[0] == "dlv_4");
  BOOST_TEST(slots.inFlight("acc_a") == 0);
  BOOST_TEST((slots.take("acc_a") == SenderSlots::Take::kFull));
  BOOST_TEST(slots.free() == 0);
  batch.push_back(handed("dlv_5"));
  BOOST_TEST(!slots.handOver(batch));
  BOOST_TEST(batch.size() == 1u, "kept by the caller, to hand back to the database");
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
  for (auto [total, per_account] :
       {std::pair{"4", "5"}, std::pair{"64", "0"}, std::pair{"64", "-1"}, std::pair{"64", "2x"},
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
