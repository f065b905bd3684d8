// JobRepublisher (dispatcher/settler.h) on its own, against the test's
// broker and database: the jobs of a dead eq-api's queued tasks, whether
// the broker took them unknown, are published again and their charges
// settled. The pipeline suite runs it end to end with a SIGKILLed eq-api;
// here each of its paths is driven on purpose:
//   - a broker it cannot reach: no job is claimed (another dispatcher that
//     can publish takes them at once), nothing is settled;
//   - a broker that takes the jobs: each published once, signed as eq-api
//     signs it, its charge settled "republished";
//   - a broker that refuses a job (a queue at its length limit that rejects
//     publishes): the claim is handed back after each refusal, and after
//     JobRepublisher::kMaxRefusals sweeps the task is failed and refunded.
// The stack runs eq-api only: no worker takes the jobs published, and no
// dispatcher's own republisher competes with the one under test.
#include <boost/test/unit_test.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/amqp.h"
#include "common/messages.h"
#include "common/msg_auth.h"
#include "common/timefmt.h"
#include "dispatcher/settler.h"
#include "store/store.h"
#include "tests/integration/stack.h"

using eq::it::Key;
using eq::it::queryInt;
using eq::it::queryTexts;
using eq::it::Stack;
using eq::it::StackOptions;

namespace {

// Opens a charge and its queued task for `mode`, as an eq-api that is gone
// (no api_instances row) would have left it; returns the job it kept.
std::string orphanedAsyncCall(eq::Store& store, const std::string& account_id,
                              const std::string& key_id, const std::string& mode, int n) {
  eq::msg::Job job;
  job.kind = "reply";
  job.request_id = "req_republish" + std::to_string(n);
  job.task_id = "tsk_republish" + std::to_string(n);
  job.mode = mode;
  job.message = "明天的面试好紧张";
  eq::OpenCharge c;
  c.request_id = job.request_id;
  c.instance_id = "api_gone";
  c.account_id = account_id;
  c.mode = mode;
  c.task_id = job.task_id;
  c.created_at_ms = eq::nowMs();
  c.deadline_at_ms = c.created_at_ms + 60'000;
  c.job = eq::msg::encodeJob(job);
  eq::Result<eq::ChargeOutcome> charged = store.chargeAndOpen(c, key_id, "");
  BOOST_REQUIRE_MESSAGE(charged.isOk(), charged.status().msg());
  BOOST_REQUIRE(charged.value() == eq::ChargeOutcome::kCharged);
  return c.job;
}

// Every message waiting in `queue`, taken off it (acked).
std::vector<eq::amqp::Delivery> drain(const std::string& url, const std::string& queue) {
  auto conn = eq::amqp::Connection::open(url, "republisher test", 10);
  BOOST_REQUIRE_MESSAGE(conn.isOk(), conn.status().msg());
  BOOST_REQUIRE(conn.value()->consume(queue).isOk());
  std::vector<eq::amqp::Delivery> out;
  for (;;) {
    eq::Result<eq::amqp::Event> ev = conn.value()->next(1000);
    BOOST_REQUIRE_MESSAGE(ev.isOk(), ev.status().msg());
    auto* d = std::get_if<eq::amqp::Delivery>(&ev.value());
    if (d == nullptr) break;  // a second without a message: the queue is empty
    BOOST_REQUIRE(conn.value()->ack(d->tag).isOk());
    out.push_back(std::move(*d));
  }
  return out;
}

int64_t count(const Stack& stack, const std::string& where) {
  return queryInt(stack, "SELECT count(*) FROM " + where);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(job_republisher)

BOOST_AUTO_TEST_CASE(claims_only_what_it_can_publish_and_gives_up_on_a_refused_job) {
  StackOptions o;
  o.worker_modes = {};
  o.dispatcher = false;
  Stack stack(o);
  Key key = eq::it::createKey(stack, "republisher");
  const std::string account =
      queryTexts(stack, "SELECT account_id FROM api_keys WHERE id = '" + key.id + "'").at(0);
  auto opened = eq::Store::openUrl(stack.dbUrl());
  BOOST_REQUIRE_MESSAGE(opened.isOk(), opened.status().msg());
  eq::Store& store = *opened.value();
  const int64_t standard_before = store.quota(account).value().remaining.standard;

  std::map<std::string, std::string> jobs;  // by request id
  for (int n = 0; n < 2; ++n) {
    jobs["req_republish" + std::to_string(n)] =
        orphanedAsyncCall(store, account, key.id, "fast", n);
  }
  orphanedAsyncCall(store, account, key.id, "standard", 2);
  BOOST_TEST(store.quota(account).value().remaining.standard == standard_before - 1);

  eq::dispatch::SettlerOptions opts;
  opts.interval_ms = 1;  // every step() sweeps

  // A broker nobody answers at: nothing claimed, nothing settled.
  {
    eq::dispatch::JobRepublisher unreachable(store, "amqp://eq:eq@127.0.0.1:1/",
                                             stack.internalKey(), opts);
    BOOST_TEST(unreachable.step(eq::nowMs()) == 0);
    BOOST_TEST(count(stack, "open_charges") == 3);
    BOOST_TEST(count(stack, "open_charges WHERE republish_until IS NOT NULL") == 0,
               "no claim is taken by a sweep that cannot publish");
  }

  // eq.jobs.standard takes nothing more: the broker refuses its publishes.
  eq::it::HttpResult policy = stack.management(
      "/policies/{vhost}/refuse-standard", "PUT",
      R"({"pattern": "^eq\\.jobs\\.standard$", "apply-to": "queues", "priority": 100,)"
      R"( "definition": {"max-length": 0, "overflow": "reject-publish"}})");
  BOOST_REQUIRE_MESSAGE(policy.status == 201 || policy.status == 204,
                        "policy: " << policy.status << " " << policy.body);
  bool applied = false;
  for (int i = 0; i < 100 && !applied; ++i) {
    eq::it::HttpResult q = stack.management("/queues/{vhost}/eq.jobs.standard");
    applied = q.body.find("reject-publish") != std::string::npos;
    if (!applied) eq::it::sleepMs(100);
  }
  BOOST_REQUIRE_MESSAGE(applied, "the policy reaches eq.jobs.standard");
  // A quorum queue refuses publishes once it is over its limit, not at it:
  // one message (taken or refused, either will do) puts it there.
  {
    auto filler = eq::amqp::Connection::open(stack.roleUrl("eq-api"), "republisher test", 10);
    BOOST_REQUIRE_MESSAGE(filler.isOk(), filler.status().msg());
    BOOST_REQUIRE(filler.value()->enableConfirms().isOk());
    (void)filler.value()->publishConfirmed(eq::msg::queueForMode("standard"), "{}", {}, 3000);
  }

  eq::dispatch::JobRepublisher republisher(store, stack.roleUrl("eq-dispatcher"),
                                           stack.internalKey(), opts);
  BOOST_TEST(republisher.step(eq::nowMs()) == 2, "the two fast jobs are published and settled");
  BOOST_TEST(count(stack, "settlements WHERE action = 'republished'") == 2);
  BOOST_TEST(count(stack, "open_charges") == 1);
  BOOST_TEST(count(stack, "open_charges WHERE republish_until IS NOT NULL") == 0,
             "the refused job's claim is handed back for the next sweep");
  std::vector<eq::amqp::Delivery> published =
      drain(stack.roleUrl("eq-worker"), eq::msg::queueForMode("fast"));
  BOOST_REQUIRE(published.size() == 2u);
  for (const eq::amqp::Delivery& d : published) {
    eq::Result<eq::msg::Job> job = eq::msg::decodeJob(d.body);
    BOOST_REQUIRE(job.isOk());
    BOOST_TEST(d.body == jobs[job.value().request_id], "the job as eq-api kept it");
    BOOST_TEST(std::string(eq::msg::verdictName(eq::msg::verifyMessage(
                   stack.internalKey(), eq::msg::SignedKind::kJob, "", d.body, d.signature))) ==
               "valid");
  }

  // The refused job: taken again at each sweep, given up on at the last.
  int settled = 0;
  for (int sweep = 2; sweep <= eq::dispatch::JobRepublisher::kMaxRefusals; ++sweep) {
    eq::it::sleepMs(2);
    settled += republisher.step(eq::nowMs());
    if (sweep < eq::dispatch::JobRepublisher::kMaxRefusals) {
      BOOST_TEST(settled == 0,
                 "refusal " << sweep << " of " << eq::dispatch::JobRepublisher::kMaxRefusals);
    }
  }
  BOOST_TEST(settled == 1);
  BOOST_TEST(count(stack, "open_charges") == 0);
  BOOST_TEST(count(stack, "settlements WHERE action = 'task_failed'") == 1);
  BOOST_TEST(queryTexts(stack, "SELECT status FROM tasks WHERE id = 'tsk_republish2'").at(0) ==
             "failed");
  BOOST_TEST(store.quota(account).value().remaining.standard == standard_before,
             "the refused task's unit is refunded");
  BOOST_TEST(republisher.settledTotal() == 3);
}

BOOST_AUTO_TEST_SUITE_END()
