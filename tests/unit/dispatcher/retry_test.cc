// The retry policy of docs/contract.md §6 and its configuration.
#include "dispatcher/retry.h"

#include <boost/test/unit_test.hpp>
#include <ostream>
#include <random>

#include "common/config.h"
#include "common/defaults.h"

namespace eq::dispatch {
// Lets BOOST_TEST print verdicts when a comparison fails.
std::ostream& operator<<(std::ostream& os, DeliveryVerdict v) { return os << verdictName(v); }
}  // namespace eq::dispatch

using namespace eq;
using namespace eq::dispatch;

namespace {

RetryPolicy productPolicy() {
  RetryPolicy p;
  BOOST_REQUIRE(parseRetrySchedule(defaults::kWebhookRetrySchedule, &p.steps_ms).isOk());
  return p;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(retry_policy)

BOOST_AUTO_TEST_CASE(default_schedule_is_the_product_one_with_ten_attempts) {
  RetryPolicy p = productPolicy();
  std::vector<int64_t> expected = {5'000,     30'000,    120'000,    600'000,   1'800'000,
                                   3'600'000, 7'200'000, 14'400'000, 28'800'000};
  BOOST_TEST(p.steps_ms == expected, boost::test_tools::per_element());
  BOOST_TEST(p.maxAttempts() == 10);
}

BOOST_AUTO_TEST_CASE(schedule_parsing_takes_seconds_with_up_to_three_decimals) {
  std::vector<int64_t> steps;
  BOOST_TEST(parseRetrySchedule("1,1,1", &steps).isOk());
  BOOST_TEST(steps == (std::vector<int64_t>{1000, 1000, 1000}), boost::test_tools::per_element());
  BOOST_TEST(parseRetrySchedule(" 0.2, 0.25 ,1.5,0.001", &steps).isOk());
  BOOST_TEST(steps == (std::vector<int64_t>{200, 250, 1500, 1}), boost::test_tools::per_element());
  BOOST_TEST(parseRetrySchedule("604800", &steps).isOk());
  BOOST_TEST(steps.size() == 1u);

  // A failed parse leaves the previous value alone.
  for (const char* bad : {"",
                          ",",
                          "1,",
                          ",1",
                          "1,,1",
                          "0",
                          "0.0",
                          "-1",
                          "+1",
                          "1e3",
                          "1.",
                          ".5",
                          "0.0001",
                          "abc",
                          "1 2",
                          "604801",
                          "99999999999999999999",
                          "inf",
                          "nan",
                          "0x10"}) {
    std::vector<int64_t> keep = {42};
    Status s = parseRetrySchedule(bad, &keep);
    BOOST_TEST(!s.isOk(), "accepted '" << bad << "'");
    BOOST_TEST(keep == std::vector<int64_t>{42}, boost::test_tools::per_element());
    if (!s.isOk()) BOOST_TEST(s.msg().find("EQ_WEBHOOK_RETRY_SCHEDULE") != std::string::npos);
  }
  std::string many;
  for (int i = 0; i < 101; ++i) many += i ? ",1" : "1";
  BOOST_TEST(!parseRetrySchedule(many, &steps).isOk());
}

BOOST_AUTO_TEST_CASE(jitter_stays_within_ten_percent_and_spreads) {
  BOOST_TEST(jittered(10'000, 0.1, 0.0) == 9'000);
  BOOST_TEST(jittered(10'000, 0.1, 0.5) == 10'000);
  BOOST_TEST(jittered(10'000, 0.1, 1.0) == 11'000);
  BOOST_TEST(jittered(10'000, 0.1, -3.0) == 9'000);  // clamped
  BOOST_TEST(jittered(10'000, 0.1, 7.0) == 11'000);

  RetryPolicy p = productPolicy();
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (size_t step = 0; step < p.steps_ms.size(); ++step) {
    int64_t lo = INT64_MAX, hi = 0;
    for (int i = 0; i < 2000; ++i) {
      RetryDecision d = decideRetry(p, static_cast<int>(step) + 1, {500, std::nullopt}, unit(rng));
      BOOST_REQUIRE(d.verdict == DeliveryVerdict::kRetry);
      lo = std::min(lo, d.delay_ms);
      hi = std::max(hi, d.delay_ms);
    }
    double base = static_cast<double>(p.steps_ms[step]);
    BOOST_TEST(lo >= static_cast<int64_t>(base * 0.9), "step " << step << " low " << lo);
    BOOST_TEST(hi <= static_cast<int64_t>(base * 1.1), "step " << step << " high " << hi);
    // Actually jittered: the samples cover most of the +-10% band.
    BOOST_TEST(hi - lo >= static_cast<int64_t>(base * 0.15), "step " << step << " spread");
  }
}

BOOST_AUTO_TEST_CASE(verdicts_follow_the_product_rules) {
  RetryPolicy p;
  p.steps_ms = {1000, 2000, 3000};  // 4 attempts
  auto decide = [&](int attempt, int status, std::optional<int64_t> ra = std::nullopt) {
    return decideRetry(p, attempt, {status, ra}, 0.5);
  };
  BOOST_TEST(decide(1, 200).verdict == DeliveryVerdict::kDelivered);
  BOOST_TEST(decide(4, 204).verdict == DeliveryVerdict::kDelivered);
  BOOST_TEST(decide(1, 410).verdict == DeliveryVerdict::kFailed);  // gone: no retry
  for (int status : {0, 302, 301, 400, 404, 500, 502}) {
    RetryDecision d = decide(2, status);
    BOOST_TEST((d.verdict == DeliveryVerdict::kRetry), "status " << status);
    BOOST_TEST(d.delay_ms == 2000);
  }
  BOOST_TEST(decide(3, 500).delay_ms == 3000);
  BOOST_TEST(decide(4, 500).verdict == DeliveryVerdict::kFailed);  // last of the schedule
  BOOST_TEST(decide(9, 500).verdict == DeliveryVerdict::kFailed);

  // Retry-After replaces the step on 429 and 503 only, capped at 1 h, with
  // no jitter; it never adds attempts.
  BOOST_TEST(decide(1, 429, 7000).delay_ms == 7000);
  BOOST_TEST(decide(1, 503, 0).delay_ms == 0);
  BOOST_TEST(decide(1, 503, 5 * 3'600'000).delay_ms == 3'600'000);
  BOOST_TEST(decide(1, 500, 7000).delay_ms == 1000);
  BOOST_TEST(decide(1, 429).delay_ms == 1000);  // no header: the schedule
  BOOST_TEST(decide(4, 429, 1000).verdict == DeliveryVerdict::kFailed);
}

// Issue 13, finding 5: an address the SSRF guard refused fails at once
// rather than being retried for 16 hours.
BOOST_AUTO_TEST_CASE(refused_address_fails_the_delivery_at_once) {
  RetryPolicy p;
  p.steps_ms = {5000, 30000};
  AttemptOutcome refused;
  refused.address_refused = true;
  RetryDecision d = decideRetry(p, 1, refused, 0.5);
  BOOST_TEST(verdictName(d.verdict) == std::string("failed"));
  BOOST_TEST(d.reason == "non-public address refused");
  AttemptOutcome plain;  // a refused connection of another kind is retried
  BOOST_TEST(verdictName(decideRetry(p, 1, plain, 0.5).verdict) == std::string("retry"));
}

BOOST_AUTO_TEST_CASE(retry_after_takes_seconds_or_an_http_date) {
  // 2015-10-21T07:28:00Z, the RFC's example date.
  const int64_t now = 1445412480000;
  BOOST_TEST(parseRetryAfter("120", now).value() == 120'000);
  BOOST_TEST(parseRetryAfter(" 1 ", now).value() == 1'000);
  BOOST_TEST(parseRetryAfter("0", now).value() == 0);
  BOOST_TEST(parseRetryAfter("Wed, 21 Oct 2015 07:28:30 GMT", now).value() == 30'000);
  BOOST_TEST(parseRetryAfter("Wednesday, 21-Oct-15 07:29:00 GMT", now).value() == 60'000);
  BOOST_TEST(parseRetryAfter("Wed Oct 21 07:28:05 2015", now).value() == 5'000);
  BOOST_TEST(parseRetryAfter("Wed, 21 Oct 2015 07:00:00 GMT", now).value() == 0);  // past
  BOOST_TEST(parseRetryAfter("99999999999999999999999", now).value() > 3'600'000);
  for (const char* bad : {"", " ", "-1", "1.5", "soon", "Wed, 21 Oct 2015 07:28:30",
                          "Wed, 21 Oct 2015 07:28:30 GMT junk", "2015-10-21T07:28:30Z"}) {
    BOOST_TEST(!parseRetryAfter(bad, now).has_value(), "accepted '" << bad << "'");
  }
}

BOOST_AUTO_TEST_SUITE_END()
