// The client address behind reverse proxies (api/client_address.h, issue
// 25): whose X-Forwarded-For / Forwarded is believed, and how far.
#include "api/client_address.h"

#include <arpa/inet.h>

#include <boost/test/unit_test.hpp>

using namespace eq;
using eq::api::addressText;
using eq::api::clientAddress;
using eq::api::forwardedHops;

namespace {

std::string raw(const char* text) {
  unsigned char b[16];
  if (inet_pton(AF_INET, text, b) == 1) return std::string(reinterpret_cast<char*>(b), 4);
  BOOST_REQUIRE(inet_pton(AF_INET6, text, b) == 1);
  return std::string(reinterpret_cast<char*>(b), 16);
}

http::HttpRequest request(const char* peer,
                          std::vector<std::pair<std::string, std::string>> headers) {
  http::HttpRequest r;
  r.client = raw(peer);
  r.headers = std::move(headers);
  return r;
}

net::CidrSet cidrs(const std::string& list) { return net::CidrSet::parse(list).value(); }

std::string client(const char* peer, std::vector<std::pair<std::string, std::string>> headers,
                   const std::string& trusted) {
  return addressText(clientAddress(request(peer, std::move(headers)), cidrs(trusted)));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(client_address)

BOOST_AUTO_TEST_CASE(without_trusted_proxies_the_peer_is_the_client) {
  BOOST_TEST(client("10.0.0.2", {{"x-forwarded-for", "198.51.100.7"}}, "") == "10.0.0.2");
  BOOST_TEST(client("10.0.0.2", {{"forwarded", "for=198.51.100.7"}}, "") == "10.0.0.2");
  // A peer that is not one of them: its headers are the client's own words.
  BOOST_TEST(client("203.0.113.9", {{"x-forwarded-for", "198.51.100.7"}}, "10.0.0.0/8") ==
             "203.0.113.9");
}

BOOST_AUTO_TEST_CASE(the_right_most_untrusted_hop_is_the_client) {
  const std::string t = "10.0.0.0/8,fd00::/8";
  BOOST_TEST(client("10.0.0.2", {{"x-forwarded-for", "198.51.100.7"}}, t) == "198.51.100.7");
  // What the client wrote itself is left of its own address: never believed.
  BOOST_TEST(client("10.0.0.2", {{"x-forwarded-for", "1.2.3.4, 198.51.100.7"}}, t) ==
             "198.51.100.7");
  // A chain of trusted proxies is walked through.
  BOOST_TEST(client("10.0.0.2", {{"x-forwarded-for", "1.2.3.4, 198.51.100.7, 10.1.1.1, fd00::5"}},
                    t) == "198.51.100.7");
  // Several header lines are one list, in order.
  BOOST_TEST(client("10.0.0.2",
                    {{"x-forwarded-for", "1.2.3.4"}, {"x-forwarded-for", "198.51.100.8,10.0.0.9"}},
                    t) == "198.51.100.8");
  // Ports and brackets as some balancers write them; IPv4-mapped as IPv4.
  BOOST_TEST(client("10.0.0.2", {{"x-forwarded-for", "198.51.100.7:5555"}}, t) == "198.51.100.7");
  BOOST_TEST(client("10.0.0.2", {{"x-forwarded-for", "[2001:db8::7]:5555"}}, t) == "2001:db8::7");
  BOOST_TEST(client("10.0.0.2", {{"x-forwarded-for", "2001:db8::7"}}, t) == "2001:db8::7");
  BOOST_TEST(client("10.0.0.2", {{"x-forwarded-for", "::ffff:198.51.100.7"}}, t) ==
             "198.51.100.7");
  // An IPv6 proxy, an IPv4-mapped peer is its IPv4 address already (the
  // HTTP server's key), so 10.0.0.0/8 names it.
  BOOST_TEST(client("fd00::1", {{"x-forwarded-for", "198.51.100.7"}}, t) == "198.51.100.7");
}

BOOST_AUTO_TEST_CASE(forwarded_is_read_when_there_is_no_x_forwarded_for) {
  const std::string t = "10.0.0.0/8";
  BOOST_TEST(client("10.0.0.2",
                    {{"forwarded", "for=1.2.3.4;proto=https, For=\"198.51.100.7:80\";by=10.0.0.2"}},
                    t) == "198.51.100.7");
  BOOST_TEST(client("10.0.0.2", {{"forwarded", "for=\"[2001:db8::1]:4711\""}}, t) ==
             "2001:db8::1");
  // A client's unclosed quote does not swallow what the proxy appends.
  BOOST_TEST(client("10.0.0.2", {{"forwarded", "for=\"1.2.3.4, for=198.51.100.7"}}, t) ==
             "198.51.100.7");
  BOOST_TEST(client("10.0.0.2", {{"x-forwarded-for", "\"1.2.3.4, 198.51.100.7"}}, t) ==
             "198.51.100.7");
  // X-Forwarded-For wins when both are there (nginx, Caddy and the cloud
  // balancers write it, and pass a client's Forwarded on untouched).
  BOOST_TEST(client("10.0.0.2", {{"forwarded", "for=1.2.3.4"}, {"x-forwarded-for", "198.51.100.7"}},
                    t) == "198.51.100.7");
}

BOOST_AUTO_TEST_CASE(a_hop_that_is_not_an_address_stops_at_the_last_known_one) {
  const std::string t = "10.0.0.0/8";
  // "unknown" and obfuscated identifiers (RFC 7239), garbage: the limit
  // falls on the proxy that wrote them, never on a made-up address.
  BOOST_TEST(client("10.0.0.2", {{"forwarded", "for=unknown"}}, t) == "10.0.0.2");
  BOOST_TEST(client("10.0.0.2", {{"forwarded", "for=_hidden, for=10.0.0.3"}}, t) == "10.0.0.3");
  BOOST_TEST(client("10.0.0.2", {{"x-forwarded-for", "198.51.100.7, evil, 10.0.0.4"}}, t) ==
             "10.0.0.4");
  BOOST_TEST(client("10.0.0.2", {{"x-forwarded-for", "1.2.3"}}, t) == "10.0.0.2");  // no inet_aton
  BOOST_TEST(client("10.0.0.2", {{"x-forwarded-for", "[::1"}}, t) == "10.0.0.2");
  // Every hop trusted: the farthest is the client.
  BOOST_TEST(client("10.0.0.2", {{"x-forwarded-for", "10.3.3.3, 10.0.0.4"}}, t) == "10.3.3.3");
  // No header: the proxy itself.
  BOOST_TEST(client("10.0.0.2", {}, t) == "10.0.0.2");
  BOOST_TEST(client("10.0.0.2", {{"x-forwarded-for", " , "}}, t) == "10.0.0.2");
  BOOST_TEST(forwardedHops(request("10.0.0.2", {{"x-forwarded-for", "a, 1.2.3.4"}})).size() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
