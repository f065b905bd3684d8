// The retry policy of webhook deliveries (docs/contract.md §6), as pure functions
// of an attempt's outcome: what the delivery becomes and when the next
// attempt is due. No I/O and no state, so tests pin every rule down; the
// sender (dispatcher/sender.h) applies the decision to SQLite.
//
// Rules, in order:
//   - a 2xx is delivered;
//   - a 410 Gone fails the delivery at once (the receiver says it is gone);
//   - so does an address the SSRF guard refused: the host resolved to a
//     non-public address, which waiting will not make reachable;
//   - after the last attempt of the schedule the delivery fails;
//   - a 429 or 503 with a valid Retry-After waits that long, capped at
//     1 h, instead of the schedule's step (no jitter: the receiver asked for
//     that time);
//   - anything else (other statuses, 3xx since redirects are not followed,
//     timeouts, refused connections) waits the schedule's next step, +-10%.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/enums.h"

namespace eq::dispatch {

struct RetryPolicy {
  // Step n (0-based) is the wait after the (n + 1)-th failed attempt of the
  // schedule; steps.size() + 1 attempts in all.
  std::vector<int64_t> steps_ms;
  double jitter = 0.10;  // +-fraction of each step
  int64_t max_retry_after_ms = 3'600'000;

  int maxAttempts() const { return static_cast<int>(steps_ms.size()) + 1; }
};

// What one attempt came back with.
struct AttemptOutcome {
  int http_status = 0;                    // 0: no HTTP answer
  std::optional<int64_t> retry_after_ms;  // a parsed Retry-After header, if any
  bool address_refused = false;           // the SSRF guard refused the connected address
};

enum class DeliveryVerdict { kDelivered, kRetry, kFailed };
const char* verdictName(DeliveryVerdict v);  // "delivered", "retry", "failed"
// The delivery's state after an attempt with this verdict (a retry stays
// pending).
DeliveryStatus statusAfter(DeliveryVerdict v);

struct RetryDecision {
  DeliveryVerdict verdict = DeliveryVerdict::kFailed;
  int64_t delay_ms = 0;  // kRetry: wait before the next attempt
  std::string reason;    // for the log: why it stopped or how the delay was chosen
};

// attempt_in_schedule: 1-based number of the attempt just made, counted from
// the start of the current schedule (a replay starts it over). unit: a
// random number in [0, 1) that picks the jitter (0: -10%, 1: +10%).
RetryDecision decideRetry(const RetryPolicy& policy, int attempt_in_schedule,
                          const AttemptOutcome& outcome, double unit);

// step_ms scaled into [step * (1 - jitter), step * (1 + jitter)] by unit in [0, 1).
int64_t jittered(int64_t step_ms, double jitter, double unit);

// Parses a Retry-After value (RFC 9110 §10.2.3): delay-seconds (digits only)
// or an HTTP-date (IMF-fixdate, and the obsolete RFC 850 and asctime forms).
// Returns the wait in milliseconds from now_ms (0 for a date in the past), or
// nullopt when the value is neither.
std::optional<int64_t> parseRetryAfter(std::string_view value, int64_t now_ms);

}  // namespace eq::dispatch
