#include "dispatcher/retry.h"

#include <algorithm>
#include <cmath>
#include <ctime>

namespace eq::dispatch {

const char* verdictName(DeliveryVerdict v) {
  switch (v) {
    case DeliveryVerdict::kDelivered:
      return "delivered";
    case DeliveryVerdict::kRetry:
      return "retry";
    case DeliveryVerdict::kFailed:
      return "failed";
  }
  return "failed";
}

DeliveryStatus statusAfter(DeliveryVerdict v) {
  switch (v) {
    case DeliveryVerdict::kDelivered:
      return DeliveryStatus::kDelivered;
    case DeliveryVerdict::kRetry:
      return DeliveryStatus::kPending;
    case DeliveryVerdict::kFailed:
      return DeliveryStatus::kFailed;
  }
  return DeliveryStatus::kFailed;
}

int64_t jittered(int64_t step_ms, double jitter, double unit) {
  unit = std::clamp(unit, 0.0, 1.0);
  double factor = 1.0 - jitter + 2.0 * jitter * unit;
  return std::max<int64_t>(0, std::llround(static_cast<double>(step_ms) * factor));
}

RetryDecision decideRetry(const RetryPolicy& policy, int attempt_in_schedule,
                          const AttemptOutcome& outcome, double unit) {
  RetryDecision d;
  int status = outcome.http_status;
  if (status >= 200 && status < 300) {
    d.verdict = DeliveryVerdict::kDelivered;
    d.reason = "2xx";
    return d;
  }
  if (outcome.address_refused) {
    d.verdict = DeliveryVerdict::kFailed;
    d.reason = "non-public address refused";
    return d;
  }
  if (status == 410) {
    d.verdict = DeliveryVerdict::kFailed;
    d.reason = "410 Gone stops retries";
    return d;
  }
  if (attempt_in_schedule >= policy.maxAttempts()) {
    d.verdict = DeliveryVerdict::kFailed;
    d.reason = "last attempt of the schedule";
    return d;
  }
  d.verdict = DeliveryVerdict::kRetry;
  if ((status == 429 || status == 503) && outcome.retry_after_ms) {
    d.delay_ms = std::clamp<int64_t>(*outcome.retry_after_ms, 0, policy.max_retry_after_ms);
    d.reason = "Retry-After";
    return d;
  }
  // attempt_in_schedule is at least 1 here in practice; a smaller one (a
  // corrupt counter) takes the first step rather than indexing out of range.
  size_t step = static_cast<size_t>(std::max(attempt_in_schedule, 1) - 1);
  d.delay_ms = jittered(policy.steps_ms[step], policy.jitter, unit);
  d.reason = "schedule";
  return d;
}

std::optional<int64_t> parseRetryAfter(std::string_view value, int64_t now_ms) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    // Saturates: any value past a day is "a long time" and gets capped by
    // the policy anyway.
    int64_t seconds = 0;
    for (char c : value) seconds = std::min<int64_t>(seconds * 10 + (c - '0'), 86'400 * 365);
    return seconds * 1000;
  }
  // HTTP-date. strptime reads day and month names in the C locale, which is
  // the one this process runs in (nothing calls setlocale).
  std::string text(value);
  for (const char* format : {"%a, %d %b %Y %H:%M:%S GMT",  // IMF-fixdate
                             "%A, %d-%b-%y %H:%M:%S GMT",  // RFC 850
                             "%a %b %e %H:%M:%S %Y"}) {    // asctime
    std::tm tm{};
    const char* end = strptime(text.c_str(), format, &tm);
    if (end == nullptr || *end != '\0') continue;
    int64_t at_ms = static_cast<int64_t>(timegm(&tm)) * 1000;
    return std::max<int64_t>(0, at_ms - now_ms);
  }
  return std::nullopt;
}

}  // namespace eq::dispatch
