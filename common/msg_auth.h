// Message authentication between our own processes: an HMAC-SHA256 over the
// exact body bytes of every job, sync result and task event, keyed with
// EQ_INTERNAL_KEY, carried in the AMQP header `x-eq-signature` (lower-case
// hex). Whoever can publish to the broker (an operator, or anyone holding a
// broker password) cannot make eq-dispatcher record a task or send a webhook,
// nor make eq-api answer a caller, nor make a worker run a job, without the
// key (docs/architecture.md, "Message authentication").
//
// The signature binds the body to its kind, so that a signed task event
// cannot be replayed as a job or a sync result, and for sync results to the
// correlation id, so that a captured result cannot answer another caller.
// Stateless functions, safe from any thread.
#pragma once

#include <string>
#include <string_view>

namespace eq::msg {

// The AMQP header that carries the signature.
constexpr const char* kSignatureHeader = "x-eq-signature";

// EQ_INTERNAL_KEY's minimum length in characters: 32 random bytes in hex
// are 64, and anything much shorter is guessable offline from one message.
constexpr std::size_t kInternalKeyMinChars = 32;

enum class SignedKind { kJob, kSyncResult, kTaskEvent };

// The hex HMAC of a message. `context` is the correlation id for a sync
// result and empty for the other kinds (their bodies name their task).
std::string signMessage(std::string_view key, SignedKind kind, std::string_view context,
                        std::string_view body);

enum class Verdict { kValid, kUnsigned, kBadSignature };

// Checks `signature` (the header's value, empty when the header was
// missing) in constant time.
Verdict verifyMessage(std::string_view key, SignedKind kind, std::string_view context,
                      std::string_view body, std::string_view signature);

// "valid", "unsigned" or "bad_signature": the label of the refusal metrics
// and log lines.
const char* verdictName(Verdict v);

}  // namespace eq::msg
