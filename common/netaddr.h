// Network address classification for the webhook SSRF guard (docs/contract.md §6):
// which addresses are non-public, and operator-allowed CIDR ranges. eq-api
// uses it to refuse a literal non-public webhook_url at submission; the
// dispatcher checks the address libcurl actually connects to. Immutable
// values, safe to share between threads.
#pragma once

#include <sys/socket.h>

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace eq::net {

// A set of IPv4/IPv6 ranges, parsed from "10.0.0.0/8,::1/128".
class CidrSet {
 public:
  static Result<CidrSet> parse(const std::string& list);
  bool contains(const struct sockaddr* addr) const;
  // An address as raw bytes (4 for IPv4, 16 for IPv6, as
  // http::HttpRequest::client holds it); false for any other length.
  bool containsRaw(std::string_view raw) const;
  bool empty() const { return ranges_.empty(); }

 private:
  struct Range {
    int family;
    unsigned char bytes[16];
    int prefix;
  };
  std::vector<Range> ranges_;
};

// True for loopback, private, link-local, CGNAT, multicast, unspecified and
// other non-public ranges (IPv4, IPv6 and IPv4-mapped IPv6).
bool isNonPublicAddress(const struct sockaddr* addr);

// A webhook_url as docs/contract.md §3 and §6 accept it: absolute http(s), a host
// and no user info, at most 2048 chars, and no literal non-public address
// unless `allowed` has it (a host name is judged later, by the dispatcher, on
// the address actually connected to). eq-api checks webhook_url with it and
// eqctl the default webhook URL; a 400 Status names the field.
Status checkWebhookUrl(std::string_view url, const CidrSet& allowed);

// Parses a literal IPv4 address or IPv6 address (with or without brackets);
// false when host is a name rather than a literal.
bool parseLiteral(std::string_view host, struct sockaddr_storage* out);

}  // namespace eq::net
