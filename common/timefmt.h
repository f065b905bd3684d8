// Wall-clock helpers: milliseconds since the Unix epoch and ISO 8601 UTC text.
// The Clock interface is the test seam for code whose behaviour depends on
// time (quota expiry, deadlines); SystemClock is the only production clock.
#pragma once

#include <cstdint>
#include <string>

namespace eq {

int64_t nowMs();

// 2026-11-22T07:48:00.123Z (milliseconds, always UTC).
std::string iso8601(int64_t unix_ms);

// 2026-11-22T07:48:00+00:00 (seconds, explicit offset), the form of the
// interface's expire_at ("ISO 8601 with UTC offset").
std::string iso8601Offset(int64_t unix_ms);

// The first instant (unix ms) of the calendar month (UTC) that holds
// unix_ms, and of the month after it: the period of the monthly volume
// (docs/contract.md §11).
int64_t monthStartMs(int64_t unix_ms);
int64_t nextMonthStartMs(int64_t unix_ms);

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t nowMs() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t nowMs() const override { return eq::nowMs(); }
};

}  // namespace eq
