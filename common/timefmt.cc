#include "common/timefmt.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace eq {
namespace {

std::tm utcParts(int64_t unix_ms) {
  std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return tm;
}

}  // namespace

int64_t nowMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::string iso8601(int64_t unix_ms) {
  std::tm tm = utcParts(unix_ms);
  char buf[96];  // room for any int the compiler can imagine in the fields
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(unix_ms % 1000));
  return buf;
}

std::string iso8601Offset(int64_t unix_ms) {
  std::tm tm = utcParts(unix_ms);
  char buf[96];  // room for any int the compiler can imagine in the fields
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d+00:00", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return buf;
}

namespace {

// The first instant of the month `months_on` months after unix_ms's.
int64_t monthStartAfter(int64_t unix_ms, int months_on) {
  std::tm tm = utcParts(unix_ms);
  tm.tm_mon += months_on;  // timegm carries a 13th month into the next year
  tm.tm_mday = 1;
  tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
  return static_cast<int64_t>(timegm(&tm)) * 1000;
}

}  // namespace

int64_t monthStartMs(int64_t unix_ms) { return monthStartAfter(unix_ms, 0); }
int64_t nextMonthStartMs(int64_t unix_ms) { return monthStartAfter(unix_ms, 1); }

}  // namespace eq
