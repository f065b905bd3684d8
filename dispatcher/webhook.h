// Webhook bodies, signatures and request headers.
//
// Signing follows docs/contract.md §6: X-Service-Signature is sha256=<hex
// HMAC-SHA256 of the raw body> keyed with the secret string exactly as
// printed (whsec_ included); webhook-signature is the Standard Webhooks
// v1,<base64 HMAC-SHA256 of "id.timestamp.body"> keyed with the
// base64-decoded part after whsec_.
//
// Pure functions, thread-safe; the HTTP side is dispatcher/sender.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/store.h"

namespace eq::dispatch {

std::string serviceSignature(const std::string& secret, const std::string& body);
// Returns an empty string when the secret is not whsec_<base64>.
std::string standardSignature(const std::string& secret, const std::string& msg_id,
                              int64_t timestamp, const std::string& body);

// The body of docs/contract.md §6 for a task in a final state.
std::string webhookBody(const TaskRecord& task, const std::string& event, int64_t timestamp);
// The developer center's test event: {"event": "test", "delivery_id",
// "created_at", "timestamp"}, signed like every delivery.
std::string testEventBody(const DeliveryRecord& d, int64_t timestamp);

// One attempt's request. The timestamp is taken when the attempt starts, so
// a retry hours later still passes receivers' replay windows (Standard
// Webhooks verifiers refuse timestamps more than 5 minutes off).
struct WebhookRequest {
  std::string url;
  std::string body;  // built with the same timestamp
  std::string secret;
  // During a secret rotation's overlap (docs/contract.md §9): the previous secret,
  // which also signs webhook-signature (a second v1 entry), so receivers
  // still holding it keep verifying. X-Service-Signature uses `secret`.
  std::string previous_secret;
  std::string delivery_id;
  std::string event;
  int64_t timestamp = 0;  // unix seconds
};

// The request's header lines ("Name: value"), signatures included.
std::vector<std::string> webhookHeaders(const WebhookRequest& req);

}  // namespace eq::dispatch
