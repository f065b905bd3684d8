// The worker's confirm/ack bookkeeping on its own, without a broker: a job
// becomes ackable only once the publish carrying its outcome is confirmed
// (single or `multiple` confirms), a nack hands the job back instead, acks
// are merged into one multiple=true frame only over contiguous held tags,
// and nothing unconfirmed is ever acked.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "workers/outcome_ledger.h"

using eq::worker::AckFrame;
using eq::worker::OutcomeLedger;

namespace {

// The delivery tags a list of ack frames acknowledges, given the tags the
// channel held unacked before they were sent (what the broker would do).
std::set<uint64_t> ackedBy(const std::vector<AckFrame>& frames, std::set<uint64_t>& unacked) {
  std::set<uint64_t> acked;
  for (const AckFrame& f : frames) {
    if (f.multiple) {
      for (auto it = unacked.begin(); it != unacked.end() && *it <= f.tag;) {
        acked.insert(*it);
        it = unacked.erase(it);
      }
    } else {
      BOOST_REQUIRE_MESSAGE(unacked.count(f.tag) == 1, "ack of a tag not held: " << f.tag);
      acked.insert(f.tag);
      unacked.erase(f.tag);
    }
  }
  return acked;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(outcome_ledger)

BOOST_AUTO_TEST_CASE(a_job_is_acked_only_after_its_outcome_is_confirmed) {
  OutcomeLedger l;
  l.delivered(1);
  BOOST_TEST(l.takeAcks().empty());
  l.published(1, 1, 100);
  BOOST_TEST(l.takeAcks().empty(), "published but unconfirmed");
  BOOST_TEST(l.oldestUnconfirmedMs() == 100);
  BOOST_TEST(l.confirmed(1, false, true).empty());
  std::vector<AckFrame> acks = l.takeAcks();
  BOOST_REQUIRE_EQUAL(acks.size(), 1u);
  BOOST_TEST(acks[0].tag == 1u);
  BOOST_TEST(l.held() == 0u);
  BOOST_TEST(l.unconfirmed() == 0u);
  BOOST_TEST(l.oldestUnconfirmedMs() == -1);
  BOOST_TEST(l.takeAcks().empty(), "acked once only");
}

BOOST_AUTO_TEST_CASE(a_multiple_confirm_readies_every_job_up_to_it_in_one_ack) {
  OutcomeLedger l;
  for (uint64_t t = 1; t <= 5; ++t) {
    l.delivered(t);
    l.published(t + 10, t, 0);  // publish seqs need not equal delivery tags
  }
  BOOST_TEST(l.confirmed(14, true, true).empty());
  std::vector<AckFrame> acks = l.takeAcks();
  BOOST_REQUIRE_EQUAL(acks.size(), 1u);
  BOOST_TEST(acks[0].tag == 4u);
  BOOST_TEST(acks[0].multiple);
  BOOST_TEST(l.held() == 1u);
  BOOST_TEST(l.unconfirmed() == 1u);
}

BOOST_AUTO_TEST_CASE(a_multiple_ack_never_covers_a_job_still_waiting) {
  // Jobs 1..6; 3 is still running (no publish yet), 5's confirm not in.
  OutcomeLedger l;
  std::set<uint64_t> unacked;
  for (uint64_t t = 1; t <= 6; ++t) {
    l.delivered(t);
    unacked.insert(t);
  }
  uint64_t seq = 1;
  for (uint64_t t : {1, 2, 4, 5, 6}) l.published(seq++, t, 0);  // seq 1..5
  l.confirmed(3, true, true);  // jobs 1, 2, 4
  l.confirmed(5, false, true);  // job 6
  std::set<uint64_t> acked = ackedBy(l.takeAcks(), unacked);
  BOOST_TEST((acked == std::set<uint64_t>{1, 2, 4, 6}));
  BOOST_TEST(unacked.count(3) == 1u);
  BOOST_TEST(unacked.count(5) == 1u);
  // Job 3 finishes; its confirm and 5's come in one multiple confirm.
  l.published(seq++, 3, 0);  // seq 6
  l.confirmed(6, true, true);
  acked = ackedBy(l.takeAcks(), unacked);
  BOOST_TEST((acked == std::set<uint64_t>{3, 5}));
  BOOST_TEST(l.held() == 0u);
}

BOOST_AUTO_TEST_CASE(a_nack_hands_the_jobs_back_and_never_acks_them) {
  OutcomeLedger l;
  for (uint64_t t = 1; t <= 4; ++t) {
    l.delivered(t);
    l.published(t, t, 0);
  }
  std::vector<uint64_t> nacked = l.confirmed(2, true, false);
  BOOST_TEST((nacked == std::vector<uint64_t>{1, 2}));
  BOOST_TEST(l.takeAcks().empty());
  BOOST_TEST(l.held() == 2u, "nacked jobs are released (the worker rejects them)");
  nacked = l.confirmed(4, false, false);
  BOOST_TEST((nacked == std::vector<uint64_t>{4}));
  l.confirmed(3, false, true);
  std::vector<AckFrame> acks = l.takeAcks();
  BOOST_REQUIRE_EQUAL(acks.size(), 1u);
  BOOST_TEST(acks[0].tag == 3u);
  BOOST_TEST(!acks[0].multiple, "a lone tag needs no multiple");
}

BOOST_AUTO_TEST_CASE(publishes_tied_to_no_job_are_confirmed_without_effect) {
  // task.running goes out before the outcome; its confirm readies nothing.
  OutcomeLedger l;
  l.delivered(7);
  l.published(1, 0, 0);  // task.running
  l.published(2, 7, 0);  // task.succeeded
  l.confirmed(1, false, true);
  BOOST_TEST(l.takeAcks().empty());
  BOOST_TEST(l.confirmed(1, false, false).empty(), "a repeated confirm is ignored");
  l.confirmed(2, false, true);
  BOOST_TEST(l.takeAcks().size() == 1u);
}

BOOST_AUTO_TEST_CASE(released_and_directly_ready_jobs) {
  OutcomeLedger l;
  for (uint64_t t = 1; t <= 3; ++t) l.delivered(t);
  l.released(1);     // rejected by the worker (malformed)
  l.ready(2);        // expired sync job: acked without a publish
  l.ready(99);       // never delivered: ignored
  std::set<uint64_t> unacked = {2, 3};
  std::set<uint64_t> acked = ackedBy(l.takeAcks(), unacked);
  BOOST_TEST((acked == std::set<uint64_t>{2}));
  BOOST_TEST(l.held() == 1u);
}

BOOST_AUTO_TEST_CASE(random_orders_never_ack_an_unconfirmed_job) {
  // Many jobs finish in random order, confirms come single or multiple,
  // some nacked; at every step, everything acked had its outcome confirmed,
  // and in the end every confirmed job is acked exactly once.
  std::mt19937 rng(12345);
  for (int round = 0; round < 50; ++round) {
    OutcomeLedger l;
    std::set<uint64_t> unacked;
    constexpr uint64_t kJobs = 64;
    for (uint64_t t = 1; t <= kJobs; ++t) {
      l.delivered(t);
      unacked.insert(t);
    }
    std::vector<uint64_t> finish_order;
    for (uint64_t t = 1; t <= kJobs; ++t) finish_order.push_back(t);
    std::shuffle(finish_order.begin(), finish_order.end(), rng);
    std::map<uint64_t, uint64_t> job_of_seq;
    std::set<uint64_t> confirmed_ok, nacked_all, acked_all;
    uint64_t seq = 0, confirmed_upto = 0;
    for (uint64_t t : finish_order) {
      job_of_seq[++seq] = t;
      l.published(seq, t, 0);
      if (rng() % 3 == 0 && confirmed_upto < seq) {
        // The broker confirms in order: a multiple up to some seq, or one.
        uint64_t upto = confirmed_upto + 1 + rng() % (seq - confirmed_upto);
        bool ack = rng() % 10 != 0;
        bool multiple = upto > confirmed_upto + 1;
        for (uint64_t s = confirmed_upto + 1; s <= upto; ++s) {
          (ack ? confirmed_ok : nacked_all).insert(job_of_seq[s]);
        }
        std::vector<uint64_t> nacked = l.confirmed(upto, multiple, ack);
        for (uint64_t n : nacked) unacked.erase(n);  // the worker rejects them
        confirmed_upto = upto;
      }
      for (uint64_t a : ackedBy(l.takeAcks(), unacked)) {
        BOOST_REQUIRE_MESSAGE(confirmed_ok.count(a) == 1, "job " << a << " acked unconfirmed");
        BOOST_REQUIRE(acked_all.insert(a).second);
      }
    }
    if (confirmed_upto < seq) {
      for (uint64_t s = confirmed_upto + 1; s <= seq; ++s) confirmed_ok.insert(job_of_seq[s]);
      l.confirmed(seq, true, true);
    }
    for (uint64_t a : ackedBy(l.takeAcks(), unacked)) BOOST_REQUIRE(acked_all.insert(a).second);
    BOOST_TEST(acked_all == confirmed_ok);
    BOOST_TEST(unacked.empty());
    BOOST_TEST(l.held() == 0u);
  }
}

BOOST_AUTO_TEST_SUITE_END()
