#include "tools/mcp/api_client.h"

#include <curl/curl.h>
#include <strings.h>

#include <memory>
#include <string_view>

#include "common/defaults.h"

namespace eq::mcp {
namespace {

struct Transfer {
  ApiResponse* out;
  bool too_large = false;
  const std::function<bool()>* cancelled;
};

size_t onBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = size * n;
  if (t->out->body.size() + len > defaults::kMcpMaxResponseBytes) {
    t->too_large = true;
    return 0;  // makes libcurl fail the transfer with CURLE_WRITE_ERROR
  }
  t->out->body.append(data, len);
  return len;
}

// Keeps the two headers the tools report. libcurl calls this once per
// header line, including those of an interim 100 response.
size_t onHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = size * n;
  std::string_view line(data, len);
  size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string_view name = line.substr(0, colon);
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
      value.remove_prefix(1);
    }
    while (!value.empty() &&
           (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) {
      value.remove_suffix(1);
    }
    auto is = [&](const char* h) {
      return name.size() == std::char_traits<char>::length(h) &&
             strncasecmp(name.data(), h, name.size()) == 0;
    };
    if (is("retry-after")) t->out->retry_after.assign(value);
    if (is("x-request-id")) t->out->request_id.assign(value);
  }
  return len;
}

int onProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  return (*t->cancelled && (*t->cancelled)()) ? 1 : 0;  // non-zero aborts the transfer
}

struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

}  // namespace

CurlTransport::CurlTransport(std::string base_url, std::string api_key, int64_t timeout_ms,
                             std::function<bool()> cancelled)
    : base_url_(std::move(base_url)),
      auth_header_("Authorization: Bearer " + api_key),
      timeout_ms_(timeout_ms),
      cancelled_(std::move(cancelled)),
      curl_(curl_easy_init()) {}

CurlTransport::~CurlTransport() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Result<ApiResponse> CurlTransport::send(const std::string& method, const std::string& path,
                                        const std::string& body,
                                        const std::vector<std::string>& extra_headers) {
  CURL* c = static_cast<CURL*>(curl_);
  if (c == nullptr) return Status(500, "libcurl could not be initialised");
  // Options from the previous call (a POST body, a header list already
  // freed) must not leak into this one.
  curl_easy_reset(c);

  ApiResponse out;
  Transfer t{&out, false, &cancelled_};
  std::string url = base_url_ + path;
  std::unique_ptr<curl_slist, SlistDeleter> headers;
  auto add = [&](const std::string& h) {
    headers.reset(curl_slist_append(headers.release(), h.c_str()));
  };
  add(auth_header_);
  add("Accept: application/json");
  add("User-Agent: eq-mcp/1.0.0");
  // libcurl would otherwise send "Expect: 100-continue" for larger bodies
  // and wait for the interim answer.
  add("Expect:");
  if (method == "POST") add("Content-Type: application/json; charset=utf-8");
  for (const std::string& h : extra_headers) add(h);

  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION,
                   0L);  // the API never redirects; a proxy that does is a misconfiguration
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_ms_));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(defaults::kMcpConnectTimeoutMs));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, onBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, onHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, onProgress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  if (method == "POST") {
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  } else {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  }

  CURLcode rc = curl_easy_perform(c);
  if (rc == CURLE_ABORTED_BY_CALLBACK) {
    return Status(499, "cancelled: eq-mcp is shutting down");
  }
  if (t.too_large) {
    return Status(502, "the answer of " + url + " is larger than " +
                           std::to_string(defaults::kMcpMaxResponseBytes) +
                           " bytes; EQ_API_URL does not seem to point at the EQ Reply API");
  }
  if (rc != CURLE_OK) {
    std::string what = curl_easy_strerror(rc);
    if (rc == CURLE_OPERATION_TIMEDOUT) {
      what += " (no answer within " + std::to_string(timeout_ms_) + " ms; see EQ_MCP_TIMEOUT_MS)";
    }
    return Status(503, "cannot reach the EQ Reply API at " + base_url_ + " (EQ_API_URL): " + what);
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out.status);
  return out;
}

}  // namespace eq::mcp
