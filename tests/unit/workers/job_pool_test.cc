// The worker's job pool on its own: jobs run on its threads, finished ones
// are collected with the eventfd signalled, unstarted ones can be taken
// back, and a job that throws fails alone.
#include <poll.h>

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "workers/job_pool.h"

using eq::worker::FinishedJob;
using eq::worker::JobOutcome;
using eq::worker::JobPool;
using eq::worker::JobSlot;

namespace {

JobSlot slot(uint64_t tag, const std::string& request_id) {
  JobSlot s;
  s.generation = 1;
  s.tag = tag;
  s.job.request_id = request_id;
  return s;
}

// Collects finished jobs until `n` arrived, waiting on the pool's eventfd.
std::vector<FinishedJob> collect(JobPool& pool, size_t n) {
  std::vector<FinishedJob> all;
  for (int i = 0; i < 100 && all.size() < n; ++i) {
    pollfd p{pool.wakeFd(), POLLIN, 0};
    ::poll(&p, 1, 100);
    for (FinishedJob& f : pool.takeFinished()) all.push_back(std::move(f));
  }
  return all;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(job_pool)

BOOST_AUTO_TEST_CASE(jobs_run_at_once_up_to_the_thread_count) {
  std::atomic<int> running{0}, peak{0};
  JobPool pool(3, [&](const eq::msg::Job& job) {
    int now = ++running;
    int seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    --running;
    JobOutcome o;
    o.result = {true, "{\"id\":\"" + job.request_id + "\"}", 0, ""};
    o.tokens_used = 7;
    return o;
  });
  for (uint64_t i = 1; i <= 6; ++i) pool.submit(slot(i, "r" + std::to_string(i)));
  BOOST_TEST(pool.outstanding() == 6u);
  std::vector<FinishedJob> done = collect(pool, 6);
  BOOST_REQUIRE_EQUAL(done.size(), 6u);
  BOOST_TEST(peak.load() == 3, "three threads, three at once");
  for (const FinishedJob& f : done) {
    BOOST_TEST(f.result.ok);
    BOOST_TEST(f.tokens_used == 7);
    BOOST_TEST(f.seconds >= 0.09);
    BOOST_TEST(f.result.data_json.find(f.slot.job.request_id) != std::string::npos);
  }
  BOOST_TEST(pool.outstanding() == 0u);
}

BOOST_AUTO_TEST_CASE(unstarted_jobs_can_be_taken_back) {
  std::atomic<bool> release{false};
  JobPool pool(1, [&](const eq::msg::Job&) {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return JobOutcome{{true, "{}", 0, ""}, 0};
  });
  pool.submit(slot(1, "running"));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the thread take it
  pool.submit(slot(2, "queued-a"));
  pool.submit(slot(3, "queued-b"));
  std::vector<JobSlot> back = pool.takeQueued();
  BOOST_REQUIRE_EQUAL(back.size(), 2u);
  BOOST_TEST(back[0].tag == 2u);
  BOOST_TEST(back[1].tag == 3u);
  BOOST_TEST(pool.outstanding() == 1u, "only the running one is left");
  release = true;
  std::vector<FinishedJob> done = collect(pool, 1);
  BOOST_REQUIRE_EQUAL(done.size(), 1u);
  BOOST_TEST(done[0].slot.job.request_id == "running");
}

BOOST_AUTO_TEST_CASE(a_job_that_throws_fails_alone) {
  JobPool pool(2, [](const eq::msg::Job& job) {
    if (job.request_id == "bad") throw std::runtime_error("Resource temporarily unavailable");
    return JobOutcome{{true, "{}", 0, ""}, 0};
  });
  pool.submit(slot(1, "bad"));
  pool.submit(slot(2, "good"));
  std::vector<FinishedJob> done = collect(pool, 2);
  BOOST_REQUIRE_EQUAL(done.size(), 2u);
  for (const FinishedJob& f : done) {
    if (f.slot.job.request_id == "bad") {
      BOOST_TEST(!f.result.ok);
      BOOST_TEST(f.result.code == 500);
      BOOST_TEST(f.result.msg.find("Resource temporarily unavailable") != std::string::npos);
    } else {
      BOOST_TEST(f.result.ok);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
