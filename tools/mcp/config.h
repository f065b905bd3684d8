// Configuration of eq-mcp, read once from the environment in main() and then
// passed by const reference; never mutated afterwards. Kept apart from
// common/config.h because eq-mcp runs on the user's machine, next to an MCP
// client, and needs none of the service's settings (broker, database).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"

namespace eq::mcp {

struct McpConfig {
  std::string api_url;     // EQ_API_URL without a trailing slash, e.g. http://127.0.0.1:8080
  std::string api_key;     // EQ_API_KEY, sent as "Authorization: Bearer <key>"
  int64_t timeout_ms = 0;  // EQ_MCP_TIMEOUT_MS: one API call, connect included
  std::string log_level;   // EQ_LOG_LEVEL

  // Reads the variables through `getenv` (std::getenv in main, a map in
  // tests). A missing EQ_API_KEY or a malformed value is an error whose
  // message names the variable and says what to do.
  using GetEnv = std::function<const char*(const char*)>;
  static Result<McpConfig> fromEnv(const GetEnv& getenv);
};

}  // namespace eq::mcp
