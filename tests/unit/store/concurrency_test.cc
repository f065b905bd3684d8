// Two Stores on one database, as two hosts (or two processes) would hold
// them, each driven by several threads at once: a quota of 100 units is
// charged exactly 100 times, rate counts add up, and one Idempotency-Key
// starts one request. On SQLite the write lock serializes the writers; on
// PostgreSQL the single-statement charge and upsert, and the insert-first
// Idempotency-Key record, are what keep the counts exact.
#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <mutex>
#include <thread>
#include <vector>

#include "common/timefmt.h"
#include "store/store.h"
#include "tests/unit/temp_db.h"

using namespace eq;

namespace {

// Two connections, each shared by kThreadsPerStore threads through its own
// mutex (a Store is one connection, used by one thread at a time).
constexpr int kStores = 2;
constexpr int kThreadsPerStore = 4;

struct TwoHosts : test::TempDb {
  std::unique_ptr<Store> other = openAnother();
  std::mutex mu[kStores];

  // Runs fn(store, thread) on every thread, each thread holding its
  // store's mutex for one call at a time.
  template <typename F>
  void race(int calls_per_thread, F fn) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kStores * kThreadsPerStore; ++t) {
      threads.emplace_back([this, t, calls_per_thread, &fn] {
        const int host = t % kStores;
        Store& s = host == 0 ? *store : *other;
        for (int i = 0; i < calls_per_thread; ++i) {
          std::lock_guard<std::mutex> lock(mu[host]);
          fn(s, t);
        }
      });
    }
    for (auto& th : threads) th.join();
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(store_concurrency)

EQ_STORE_FIXTURE_TEST_CASE(two_hosts_charging_one_key_accept_exactly_its_units, TwoHosts) {
  CreatedKey k = newKey(100);
  std::atomic<int> charged{0}, exhausted{0}, failed{0};
  const int64_t now = nowMs();
  // 8 threads x 30 calls: 240 attempts on 100 units.
  race(30, [&](Store& s, int) {
    Result<ChargeOutcome> c = s.chargeQuota(k.account_id, "fast", now);
    if (!c.isOk()) {
      ++failed;
    } else if (c.value() == ChargeOutcome::kCharged) {
      ++charged;
    } else {
      ++exhausted;
    }
  });
  BOOST_TEST(failed.load() == 0);
  BOOST_TEST(charged.load() == 100);
  BOOST_TEST(exhausted.load() == 140);
  BOOST_TEST(store->quota(k.account_id).value().remaining.fast == 0);
  // The usage record counted each charge once.
  int64_t calls = 0;
  Result<std::vector<UsageRow>> usage = store->usage(k.account_id, now);
  BOOST_TEST_REQUIRE(usage.isOk(), usage.status().msg());
  for (const UsageRow& u : usage.value()) {
    if (u.mode == "fast") calls += u.calls;
  }
  BOOST_TEST(calls == 100);
}

EQ_STORE_FIXTURE_TEST_CASE(two_hosts_counting_one_key_make_one_rate_count, TwoHosts) {
  const int64_t window = Store::rateWindowStart(nowMs());
  std::atomic<int> failed{0};
  std::mutex seen_mu;
  std::vector<int64_t> seen;
  // Batches of 3, as eq-api's database thread counts a batch: every count
  // returned is the end of a distinct range (count - 3, count].
  race(25, [&](Store& s, int) {
    Result<int64_t> c = s.countRequests("key_shared", window, 3);
    if (!c.isOk()) {
      ++failed;
      return;
    }
    std::lock_guard<std::mutex> lock(seen_mu);
    seen.push_back(c.value());
  });
  BOOST_TEST(failed.load() == 0);
  std::sort(seen.begin(), seen.end());
  BOOST_TEST_REQUIRE(seen.size() == 200u);
  for (size_t i = 0; i < seen.size(); ++i) BOOST_TEST(seen[i] == static_cast<int64_t>(3 * (i + 1)));
}

EQ_STORE_FIXTURE_TEST_CASE(one_idempotency_key_on_two_hosts_starts_one_request, TwoHosts) {
  CreatedKey k = newKey();
  std::atomic<int> started{0}, in_progress{0}, other{0};
  const int64_t now = nowMs();
  race(5, [&](Store& s, int thread) {
    static std::atomic<int> n{0};
    IdempotencyRequest req{k.account_id, "same-key", "/api/v1/reply", std::string(32, 'b'),
                           "req_" + std::to_string(thread) + "_" + std::to_string(n++)};
    Result<IdempotencyBegin> b = s.beginIdempotent(req, now);
    if (!b.isOk()) {
      ++other;
    } else if (b.value().state == IdempotencyState::kStarted) {
      ++started;
    } else if (b.value().state == IdempotencyState::kInProgress) {
      ++in_progress;
    } else {
      ++other;
    }
  });
  BOOST_TEST(started.load() == 1);
  BOOST_TEST(in_progress.load() == 39);
  BOOST_TEST(other.load() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
