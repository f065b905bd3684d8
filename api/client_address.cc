#include "api/client_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <strings.h>

#include <string_view>

namespace eq::api {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// One recorded hop: "203.0.113.7", "203.0.113.7:4711", "2001:db8::1",
// "[2001:db8::1]" or "[2001:db8::1]:4711" (Forwarded's quotes already
// removed). Canonical text only (inet_pton, not inet_aton): proxies write
// addresses as they print them. Raw bytes, IPv4-mapped IPv6 as IPv4, the
// way the HTTP server keys a peer; empty when it is not an address.
std::string parseHop(std::string_view hop) {
  hop = trim(hop);
  std::string host;
  if (!hop.empty() && hop.front() == '[') {
    std::size_t close = hop.find(']');
    if (close == std::string_view::npos) return "";
    std::string_view after = hop.substr(close + 1);
    if (!after.empty() && after.front() != ':') return "";
    host = std::string(hop.substr(1, close - 1));
  } else if (hop.find(':') != std::string_view::npos &&
             hop.find(':') == hop.rfind(':')) {
    host = std::string(hop.substr(0, hop.find(':')));  // IPv4 with a port
  } else {
    host = std::string(hop);
  }
  unsigned char bytes[16];
  if (inet_pton(AF_INET, host.c_str(), bytes) == 1) {
    return std::string(reinterpret_cast<const char*>(bytes), 4);
  }
  if (inet_pton(AF_INET6, host.c_str(), bytes) == 1) {
    auto* in6 = reinterpret_cast<const in6_addr*>(bytes);
    if (IN6_IS_ADDR_V4MAPPED(in6)) return std::string(reinterpret_cast<const char*>(bytes) + 12, 4);
    return std::string(reinterpret_cast<const char*>(bytes), 16);
  }
  return "";
}

// Splits on every `sep`, quotes or not. RFC 7239 lets a quoted value hold a
// comma, but no address does, and honouring quotes would let a client's
// unclosed quote swallow the entry a proxy appends after it on the same
// line; split plainly, what a client writes stays left of what proxies add.
std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

// The for= of one Forwarded element (RFC 7239: pairs separated by ';',
// names case-insensitive, values tokens or quoted strings); empty when the
// element has none.
std::string_view forwardedFor(std::string_view element) {
  for (std::string_view pair : split(element, ';')) {
    pair = trim(pair);
    if (pair.size() < 4 || strncasecmp(pair.data(), "for=", 4) != 0) continue;
    std::string_view value = pair.substr(4);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    return value;
  }
  return {};
}

}  // namespace

std::vector<std::string> forwardedHops(const http::HttpRequest& req) {
  std::vector<std::string> hops;
  bool xff = req.headerCount("x-forwarded-for") > 0;
  for (const auto& [name, value] : req.headers) {
    if (name != (xff ? "x-forwarded-for" : "forwarded")) continue;
    for (std::string_view item : split(value, ',')) {
      if (trim(item).empty()) continue;  // "a, , b": an empty list member (RFC 9110 5.6.1)
      hops.push_back(parseHop(xff ? item : forwardedFor(item)));
    }
  }
  return hops;
}

std::string clientAddress(const http::HttpRequest& req, const net::CidrSet& trusted) {
  if (trusted.empty() || !trusted.containsRaw(req.client)) return req.client;
  // From the nearest hop leftwards: each trusted proxy vouches for the hop
  // left of it, up to the first address that is not a trusted proxy. A hop
  // that is not an address stops the walk at the proxy that wrote it, the
  // last address we can vouch for. If every hop is a trusted proxy, the
  // farthest is the client (a request from inside the proxies' network).
  std::vector<std::string> hops = forwardedHops(req);
  std::string client = req.client;
  for (std::size_t i = hops.size(); i-- > 0;) {
    if (hops[i].empty()) break;
    client = hops[i];
    if (!trusted.containsRaw(client)) break;
  }
  return client;
}

std::string addressText(const std::string& raw) {
  char buf[INET6_ADDRSTRLEN] = "";
  if (raw.size() == 4) inet_ntop(AF_INET, raw.data(), buf, sizeof buf);
  if (raw.size() == 16) inet_ntop(AF_INET6, raw.data(), buf, sizeof buf);
  return buf;
}

}  // namespace eq::api
