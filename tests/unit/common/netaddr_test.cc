#include "common/netaddr.h"

#include <arpa/inet.h>

#include <boost/test/unit_test.hpp>

using namespace eq::net;

namespace {

bool nonPublic(const char* ip) {
  sockaddr_storage ss{};
  if (inet_pton(AF_INET, ip, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr) == 1) {
    ss.ss_family = AF_INET;
  } else {
    BOOST_REQUIRE(inet_pton(AF_INET6, ip, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr) == 1);
    ss.ss_family = AF_INET6;
  }
  return isNonPublicAddress(reinterpret_cast<sockaddr*>(&ss));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(netaddr)

BOOST_AUTO_TEST_CASE(non_public_addresses_are_recognised) {
  for (const char* ip : {"127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254",
                         "100.64.0.1", "0.0.0.0", "224.0.0.1", "::1", "::", "fe80::1", "fd00::1",
                         "::ffff:127.0.0.1", "ff02::1"}) {
    BOOST_TEST(nonPublic(ip), ip);
  }
  for (const char* ip : {"93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8"}) {
    BOOST_TEST(!nonPublic(ip), ip);
  }
}

BOOST_AUTO_TEST_CASE(cidr_allow_list) {
  auto set = CidrSet::parse("127.0.0.1/32, ::1/128");
  BOOST_REQUIRE(set.isOk());
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  BOOST_TEST(set.value().contains(reinterpret_cast<sockaddr*>(&a)));
  inet_pton(AF_INET, "127.0.0.2", &a.sin_addr);
  BOOST_TEST(!set.value().contains(reinterpret_cast<sockaddr*>(&a)));
  BOOST_TEST(!CidrSet::parse("10.0.0.0/33").isOk());
  BOOST_TEST(!CidrSet::parse("nonsense").isOk());
}

BOOST_AUTO_TEST_CASE(literals_parse_with_and_without_brackets) {
  sockaddr_storage ss;
  BOOST_TEST(parseLiteral("10.0.0.1", &ss));
  BOOST_TEST(ss.ss_family == AF_INET);
  BOOST_TEST(parseLiteral("[::1]", &ss));
  BOOST_TEST(ss.ss_family == AF_INET6);
  BOOST_TEST(!parseLiteral("example.com", &ss));
  BOOST_TEST(!parseLiteral("10.0.0.1.example.com", &ss));
}

BOOST_AUTO_TEST_SUITE_END()
