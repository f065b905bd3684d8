#include "tools/mcp/config.h"

#include <charconv>
#include <string_view>

#include "common/defaults.h"

namespace eq::mcp {

Result<McpConfig> McpConfig::fromEnv(const GetEnv& getenv) {
  auto get = [&](const char* name) -> std::string {
    const char* v = getenv(name);
    return v == nullptr ? std::string() : std::string(v);
  };
  McpConfig c;

  c.api_url = get("EQ_API_URL");
  if (c.api_url.empty()) c.api_url = defaults::kMcpApiUrl;
  // The base may carry a path (a reverse proxy serving the API under a
  // prefix); endpoint paths are appended to it, so one trailing slash would
  // make "//api/v1/..." and is dropped.
  while (!c.api_url.empty() && c.api_url.back() == '/') c.api_url.pop_back();
  std::string_view url = c.api_url;
  bool http = url.starts_with("http://") && url.size() > 7;
  bool https = url.starts_with("https://") && url.size() > 8;
  if (!http && !https) {
    return Status(2, "EQ_API_URL must be an absolute http:// or https:// URL (got '" + c.api_url +
                         "'); the default is " + defaults::kMcpApiUrl);
  }

  c.api_key = get("EQ_API_KEY");
  if (c.api_key.empty()) {
    return Status(2,
                  "EQ_API_KEY is not set: put the API key (eq_live_... or eq_test_..., printed "
                  "once by `eqctl key create`) in the \"env\" of the eq-mcp entry of your MCP "
                  "client's configuration");
  }
  // The key goes into an HTTP header: a newline or other control character
  // would split the header, so such a key cannot be valid and is refused here
  // rather than sent.
  for (unsigned char ch : c.api_key) {
    if (ch < 0x21 || ch == 0x7F) {
      return Status(2,
                    "EQ_API_KEY contains white space or a control character; copy the key "
                    "exactly as eqctl printed it");
    }
  }

  c.timeout_ms = defaults::kMcpRequestTimeoutMs;
  std::string timeout = get("EQ_MCP_TIMEOUT_MS");
  if (!timeout.empty()) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(timeout.data(), timeout.data() + timeout.size(), v);
    if (ec != std::errc() || end != timeout.data() + timeout.size() || v < 1000 || v > 3'600'000) {
      return Status(
          2, "EQ_MCP_TIMEOUT_MS must be an integer from 1000 to 3600000 (got '" + timeout + "')");
    }
    c.timeout_ms = v;
  }

  c.log_level = get("EQ_LOG_LEVEL");
  if (c.log_level.empty()) c.log_level = "info";
  if (c.log_level != "debug" && c.log_level != "info" && c.log_level != "warn" &&
      c.log_level != "error") {
    return Status(2, "EQ_LOG_LEVEL must be debug, info, warn or error (got '" + c.log_level + "')");
  }
  return c;
}

}  // namespace eq::mcp
