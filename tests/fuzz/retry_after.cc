// Fuzz target: the dispatcher's reading of a receiver's Retry-After header
// and the retry decision built on it. A wait is never negative, and the
// decision never waits longer than the policy allows.
#include <cstdint>
#include <cstring>
#include <string_view>

#include "dispatcher/retry.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr int64_t kNow = 1'795'000'000'000;  // 2026-11-18, a fixed clock
  std::string_view value(reinterpret_cast<const char*>(data), size);
  std::optional<int64_t> wait = eq::dispatch::parseRetryAfter(value, kNow);
  if (wait) FUZZ_CHECK(*wait >= 0);
  eq::dispatch::RetryPolicy policy;
  policy.steps_ms = {5000, 30000, 120000};
  for (int status : {0, 200, 301, 410, 429, 500, 503}) {
    for (int attempt : {-1, 0, 1, 3, 4, 1000}) {
      eq::dispatch::AttemptOutcome outcome{status, wait, false};
      eq::dispatch::RetryDecision d = eq::dispatch::decideRetry(policy, attempt, outcome, 0.999);
      FUZZ_CHECK(d.delay_ms >= 0);
      FUZZ_CHECK(d.delay_ms <= policy.max_retry_after_ms);
    }
  }
  return 0;
}
