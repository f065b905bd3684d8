// The shared reconnect backoff: 100 ms doubling to a 1 s cap, back to the
// bottom after a success. (Its sleep is not tested here: whether a stop
// request cuts it short could only be seen with a clock.)
#include <boost/test/unit_test.hpp>
#include <vector>

#include "common/defaults.h"
#include "common/reconnect.h"

BOOST_AUTO_TEST_SUITE(reconnect_backoff)

BOOST_AUTO_TEST_CASE(doubles_to_the_cap_and_resets) {
  eq::ReconnectBackoff b;
  std::vector<int> seen;
  for (int i = 0; i < 6; ++i) seen.push_back(b.nextDelayMs());
  BOOST_TEST((seen == std::vector<int>{100, 200, 400, 800, 1000, 1000}));
  BOOST_TEST(eq::defaults::kReconnectBackoffMaxMs == 1000);
  b.reset();
  BOOST_TEST(b.nextDelayMs() == 100);
}

BOOST_AUTO_TEST_SUITE_END()
