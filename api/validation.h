// Validation of request bodies against docs/contract.md §3, and of the headers the
// developer center relies on (§9). Pure functions of the request's text: no
// I/O, no state, so the unit tests exercise them directly.
// Every rejection is a 400 Status whose message names the field and says
// what is allowed.
#pragma once

#include <strings.h>
#include <sys/socket.h>

#include <string>
#include <string_view>

#include "common/defaults.h"
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

// Whether a developer-center POST comes from a page of its own origin. Its
// Origin header names the page's origin (browsers send it on every POST made
// by fetch(), same-origin included). With EQ_PORTAL_URL set (portal_origin
// and portal_host, see Config), Origin must be that origin and the request
// must be addressed to that host: a page of another name that resolves here
// (DNS rebinding) has an Origin and a Host of its own name. Without it,
// Origin must name the Host the request was sent to. When the configured
// host is a loopback spelling (127.0.0.1, localhost or [::1]), the other two
// are accepted too, with the same scheme and port, and Origin naming the Host
// exactly: a local portal opened as localhost is the same page. A missing
// header is a refusal. Hosts compare without regard to ASCII case.
bool portalOriginAllowed(const std::string* origin, const std::string* host,
                         std::string_view portal_origin, std::string_view portal_host);

// The Idempotency-Key header's value: 1 to 255 printable ASCII characters
// (docs/contract.md §3). The bound lives here rather than in common/defaults.h,
// which is not this module's to change; it is not tunable anyway.
constexpr std::size_t kMaxIdempotencyKeyChars = 255;
Status checkIdempotencyKey(std::string_view key);

// Helpers exposed for tests.
std::string trimUnicodeSpace(std::string_view s);
std::size_t codePoints(std::string_view utf8);  // input must be valid UTF-8

// checkWebhookUrl lives in common/netaddr.h: eqctl applies the same rule.
using net::checkWebhookUrl;

}  // namespace eq::api
