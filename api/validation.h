// Validation of request bodies against PRODUCT.md §3. Pure functions of the
// body text: no I/O, no state, so the unit tests exercise them directly.
// Every rejection is a 400 Status whose message names the field and says
// what is allowed.
#pragma once

#include <string>
#include <string_view>

#include "common/netaddr.h"
#include "common/status.h"

namespace eq::api {

struct ReplyRequest {
  std::string mode;
  std::string message;  // trimmed
  std::string context;  // trimmed, may be empty
  std::string scene;    // empty when absent
  int reply_count = 1;
  std::string webhook_url;  // async only; empty when absent
};

struct AnalyzeRequest {
  std::string message;
  std::string context;
};

// async: whether webhook_url is an accepted field (POST /api/v1/reply/async);
// webhook_allow: non-public ranges a webhook_url may name anyway
// (EQ_WEBHOOK_ALLOW_CIDRS).
Result<ReplyRequest> parseReplyRequest(std::string_view body, bool async,
                                       const net::CidrSet& webhook_allow);
Result<AnalyzeRequest> parseAnalyzeRequest(std::string_view body);

// Helpers exposed for tests.
std::string trimUnicodeSpace(std::string_view s);
std::size_t codePoints(std::string_view utf8);  // input must be valid UTF-8
Status checkWebhookUrl(std::string_view url, const net::CidrSet& allowed);

}  // namespace eq::api
