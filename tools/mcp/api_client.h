// The HTTP seam of eq-mcp: ApiTransport sends one request to the EQ Reply API
// and returns the raw answer; CurlTransport is the real one (libcurl's easy
// interface). Calls are synchronous and made one at a time on the thread that
// reads stdin: the MCP server handles one message at a time, so nothing is
// gained by a multi handle. Tests substitute a fake transport.
//
// Owned by main() (or the test) and outlives the McpServer that uses it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace eq::mcp {

struct ApiResponse {
  long status = 0;
  std::string body;
  std::string retry_after;  // Retry-After header, if any (429, 503)
  std::string request_id;   // X-Request-Id header, if any
};

class ApiTransport {
 public:
  virtual ~ApiTransport() = default;
  // method "GET" or "POST"; path starts with "/api/v1/"; body is sent as
  // JSON when non-empty; extra_headers are whole "Name: value" lines. A
  // failure to get any HTTP answer (refused, timeout, TLS, cancelled) is an
  // error Status whose message says what happened and where.
  virtual Result<ApiResponse> send(const std::string& method, const std::string& path,
                                   const std::string& body,
                                   const std::vector<std::string>& extra_headers) = 0;
};

class CurlTransport : public ApiTransport {
 public:
  // `cancelled` is polled while a request runs (libcurl's progress callback,
  // at least once a second); when it returns true the request is abandoned,
  // so a SIGTERM does not wait for a 3-minute sync call.
  CurlTransport(std::string base_url, std::string api_key, int64_t timeout_ms,
                std::function<bool()> cancelled);
  ~CurlTransport() override;
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  Result<ApiResponse> send(const std::string& method, const std::string& path,
                           const std::string& body,
                           const std::vector<std::string>& extra_headers) override;

 private:
  std::string base_url_;
  std::string auth_header_;
  int64_t timeout_ms_;
  std::function<bool()> cancelled_;
  void* curl_ = nullptr;  // CURL*, reused so keep-alive connections to the API are reused
};

}  // namespace eq::mcp
