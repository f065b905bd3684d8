#include "common/msg_auth.h"

#include "common/crypto.h"

namespace eq::msg {
namespace {

const char* kindName(SignedKind kind) {
  switch (kind) {
    case SignedKind::kJob: return "job";
    case SignedKind::kSyncResult: return "sync-result";
    case SignedKind::kTaskEvent: return "task-event";
  }
  return "unknown";
}

// What the HMAC covers: a version tag, the kind, the context with its length
// (so that no choice of context and body can reproduce another pair's
// bytes), then the body as it travels.
std::string signedBytes(SignedKind kind, std::string_view context, std::string_view body) {
  std::string data = "eq-msg-v1\n";
  data += kindName(kind);
  data += '\n';
  data += std::to_string(context.size());
  data += ':';
  data.append(context);
  data += '\n';
  data.append(body);
  return data;
}

}  // namespace

std::string signMessage(std::string_view key, SignedKind kind, std::string_view context,
                        std::string_view body) {
  return crypto::hex(crypto::hmacSha256(key, signedBytes(kind, context, body)));
}

Verdict verifyMessage(std::string_view key, SignedKind kind, std::string_view context,
                      std::string_view body, std::string_view signature) {
  if (signature.empty()) return Verdict::kUnsigned;
  // An empty key would make every signature forgeable; config refuses to
  // start without one, so reaching here with none is a programming error
  // that must not turn into acceptance.
  if (key.empty()) return Verdict::kBadSignature;
  std::string expected = signMessage(key, kind, context, body);
  return crypto::constantTimeEqual(expected, signature) ? Verdict::kValid : Verdict::kBadSignature;
}

const char* verdictName(Verdict v) {
  switch (v) {
    case Verdict::kValid: return "valid";
    case Verdict::kUnsigned: return "unsigned";
    case Verdict::kBadSignature: return "bad_signature";
  }
  return "unknown";
}

}  // namespace eq::msg
