#include "tools/mcp/protocol_version.h"

namespace eq::mcp {

std::string_view toString(ProtocolVersion v) {
  switch (v) {
    case ProtocolVersion::k20241105:
      return "2024-11-05";
    case ProtocolVersion::k20250326:
      return "2025-03-26";
    case ProtocolVersion::k20250618:
      return "2025-06-18";
  }
  return "2025-06-18";  // unreachable: the switch covers every enumerator
}

std::optional<ProtocolVersion> parseProtocolVersion(std::string_view s) {
  for (ProtocolVersion v :
       {ProtocolVersion::k20241105, ProtocolVersion::k20250326, ProtocolVersion::k20250618}) {
    if (s == toString(v)) return v;
  }
  return std::nullopt;
}

ProtocolVersion negotiate(std::string_view requested) {
  return parseProtocolVersion(requested).value_or(kLatestProtocolVersion);
}

}  // namespace eq::mcp
