#include "common/netaddr.h"

#include <arpa/inet.h>

#include <boost/test/unit_test.hpp>

using eq::Status;
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
  for (const char* ip : {"93.184.216.34", "8.8.8.8", "2606:4700::1111"}) {
    BOOST_TEST(!nonPublic(ip), ip);
  }
}

// Issue 13, finding 5: ranges the first blocklist missed. The ranges that
// embed an IPv4 address are refused whole, public embedded address or not.
BOOST_AUTO_TEST_CASE(special_purpose_ranges_are_non_public) {
  for (const char* ip : {"fec0::1", "::a00:1", "::8.8.8.8", "::ffff:8.8.8.8", "::ffff:0:a00:1",
                         "2002:a00:1::1", "2001:db8::1", "3fff::1", "2001::1", "192.0.2.1",
                         "198.51.100.7", "203.0.113.9", "64:ff9b:1::1", "192.88.99.1"}) {
    BOOST_TEST(nonPublic(ip), ip);
  }
}

BOOST_AUTO_TEST_CASE(non_canonical_ipv4_literals_are_judged_as_addresses) {
  auto none = CidrSet::parse("");
  BOOST_REQUIRE(none.isOk());
  // Every spelling the resolver reads as 10.0.0.1, 10.0.0.1 or 0.0.0.0.
  for (const char* url : {"http://167772161/", "http://0x0a000001/", "http://10.1/",
                          "http://0251.0376.0251.0376/", "http://0/", "http://0X7F.1/",
                          "http://127.0.0.1./", "http://017700000001:8080/x"}) {
    Status s = checkWebhookUrl(url, none.value());
    BOOST_TEST(s.code() == 400, url);
    BOOST_TEST(s.msg().find("non-public") != std::string::npos, url << ": " << s.msg());
  }
  sockaddr_storage ss;
  BOOST_REQUIRE(parseLiteral("0x0a000001", &ss));
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, text, sizeof text);
  BOOST_TEST(std::string(text) == "10.0.0.1");
  // Names that merely start with digits stay names.
  BOOST_TEST(checkWebhookUrl("http://1e100.net/hook", none.value()).isOk());
  BOOST_TEST(checkWebhookUrl("http://8.8.8.8/hook", none.value()).isOk());
}

BOOST_AUTO_TEST_CASE(zone_ids_and_encoded_hosts_are_refused) {
  auto none = CidrSet::parse("");
  BOOST_REQUIRE(none.isOk());
  for (const char* url : {"http://[fe80::1%25lo]/", "http://[2606:4700::1111%25eth0]:80/",
                          "http://%31%30.0.0.1/", "http://hooks%2eexample.com/"}) {
    Status s = checkWebhookUrl(url, none.value());
    BOOST_TEST(s.code() == 400, url);
    BOOST_TEST(s.msg().find("'%'") != std::string::npos, url << ": " << s.msg());
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
