// The parts of common/amqp.h that need no broker: the list form of
// EQ_AMQP_URL and what a connection attempt to a dead address says.
#include "common/amqp.h"

#include <boost/test/unit_test.hpp>

using eq::amqp::Connection;

BOOST_AUTO_TEST_SUITE(amqp_urls)

BOOST_AUTO_TEST_CASE(a_comma_separated_url_lists_the_nodes_of_a_cluster) {
  using V = std::vector<std::string>;
  BOOST_TEST(Connection::splitUrls("amqp://eq:eq@rabbitmq:5672/") ==
             V{"amqp://eq:eq@rabbitmq:5672/"});
  BOOST_TEST(Connection::splitUrls(" amqp://a:5672/ , amqp://b:5672/,amqp://c:5672/ ") ==
             (V{"amqp://a:5672/", "amqp://b:5672/", "amqp://c:5672/"}));
  BOOST_TEST(Connection::splitUrls("amqp://a/,,\t,amqp://b/") == (V{"amqp://a/", "amqp://b/"}));
  BOOST_TEST(Connection::splitUrls("").empty());
  BOOST_TEST(Connection::splitUrls(" , ").empty());
}

BOOST_AUTO_TEST_CASE(no_reachable_node_is_a_503_naming_every_address) {
  // Port 1 on loopback refuses at once; both addresses are tried.
  auto c = Connection::open("amqp://eq:eq@127.0.0.1:1/,amqp://eq:eq@127.0.0.1:2/", "test", 5);
  BOOST_REQUIRE(!c.isOk());
  BOOST_TEST(c.status().code() == 503);
  BOOST_TEST(c.status().msg().find("127.0.0.1:1") != std::string::npos);
  BOOST_TEST(c.status().msg().find("127.0.0.1:2") != std::string::npos);
  // A malformed address is a configuration error, not an outage.
  BOOST_TEST(Connection::open("http://nope/,amqp://eq:eq@127.0.0.1:1/", "test", 5).status().code() ==
             500);
  BOOST_TEST(Connection::open("", "test", 5).status().code() == 500);
}

// The caller's hint of which address to try first (one per connection it
// keeps, not a process-wide global): after a round where none answered, the
// next round starts one further along, so a broker that hangs instead of
// refusing is not the first one waited on every time.
BOOST_AUTO_TEST_CASE(a_failed_round_moves_the_first_address_along) {
  const std::string urls =
      "amqp://eq:eq@127.0.0.1:1/,amqp://eq:eq@127.0.0.1:2/,amqp://eq:eq@127.0.0.1:3/";
  std::size_t first = 0;
  BOOST_TEST(!Connection::open(urls, "test", 5, &first).isOk());
  BOOST_TEST(first == 1u);
  BOOST_TEST(!Connection::open(urls, "test", 5, &first).isOk());
  BOOST_TEST(first == 2u);
  BOOST_TEST(!Connection::open(urls, "test", 5, &first).isOk());
  BOOST_TEST(first == 0u);
  std::size_t other = 7;  // taken modulo the number of addresses
  BOOST_TEST(!Connection::open(urls, "test", 5, &other).isOk());
  BOOST_TEST(other == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
