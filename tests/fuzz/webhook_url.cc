// Fuzz target: the webhook URL check and the CIDR list parser. An accepted
// URL whose host is a literal address must not name a non-public one.
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "common/netaddr.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  static const eq::net::CidrSet none = eq::net::CidrSet::parse("").value();
  std::string url = "http://" + std::string(text);
  eq::Status s = eq::net::checkWebhookUrl(url, none);
  if (s.isOk()) {
    // The host as the check itself cuts it out.
    std::string_view rest = std::string_view(url).substr(7);
    std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
    std::string_view host = authority;
    if (!host.empty() && host.front() == '[') {
      host = host.substr(0, host.find(']') + 1);
    } else {
      host = host.substr(0, host.find(':'));
    }
    sockaddr_storage addr;
    if (eq::net::parseLiteral(host, &addr)) {
      FUZZ_CHECK(!eq::net::isNonPublicAddress(reinterpret_cast<const sockaddr*>(&addr)));
    }
  } else {
    FUZZ_CHECK(s.code() == 400);
  }
  (void)eq::net::checkWebhookUrl(text, none);
  (void)eq::net::CidrSet::parse(std::string(text));
  return 0;
}
