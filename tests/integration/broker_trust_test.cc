// Issue 27, item 3: whoever reaches the broker with a publishing user (here
// the administrator's, as the attacker of the finding had) cannot make
// eq-dispatcher record a task outcome and send its webhook, nor make eq-api
// answer a caller, with a message our processes did not sign
// (common/msg_auth.h, docs/architecture.md "Message authentication").
//
// One stack: a standard worker only, so that a fast task stays queued and a
// fast sync job waits in eq.sync.fast for the attacker to take. Each case
// ends with the same forgery signed with the stack's EQ_INTERNAL_KEY, which
// is accepted: that shows the forged message was one the processes would
// have acted on, so the refusal, not a malformed body, is what stopped it.
#include <rapidjson/document.h>

#include <boost/test/unit_test.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <variant>

#include "common/amqp.h"
#include "common/messages.h"
#include "common/msg_auth.h"
#include "common/timefmt.h"
#include "tests/integration/stack.h"

using eq::it::HttpResult;
using eq::it::Key;
using eq::it::Stack;
using eq::it::StackOptions;
using eq::it::WebhookReceiver;

namespace {

// A key of the right length that is not the stack's.
const std::string kWrongKey = "an-attacker-guess-at-the-internal-key-0000000000000000";

struct TrustWorld {
  static TrustWorld* instance;
  std::unique_ptr<Stack> stack;
  Key key;
  int dispatcher_metrics_port = 0;
  TrustWorld() {
    StackOptions o;
    o.worker_modes = {"standard"};
    // Short sync deadlines: a refused result leaves its caller to time out.
    o.env["EQ_SYNC_DEADLINE_MS"] = "3000";
    stack = std::make_unique<Stack>(o);
    int rc = -1;
    std::string out = stack->eqctl(
        {"key", "create", "--name", "trust", "--rate", "100000", "--json"}, &rc);
    BOOST_REQUIRE_MESSAGE(rc == 0, "eqctl key create failed: " << out);
    rapidjson::Document d;
    d.Parse(out.c_str());
    BOOST_REQUIRE(d.IsObject());
    key = Key{d["key_id"].GetString(), d["api_key"].GetString()};
    std::string line =
        stack->process("dispatcher")->waitForLog("\"msg\":\"metrics listening\"", 10000);
    size_t at = line.find("\"port\":");
    BOOST_REQUIRE_MESSAGE(at != std::string::npos, "the dispatcher logged no metrics port");
    dispatcher_metrics_port = std::stoi(line.substr(at + 7));
    instance = this;
  }
  ~TrustWorld() {
    BOOST_CHECK_MESSAGE(stack->stopAll(), "every process exits with status 0 on SIGTERM");
    instance = nullptr;
  }
};
TrustWorld* TrustWorld::instance = nullptr;
BOOST_TEST_GLOBAL_FIXTURE(TrustWorld);

Stack& stack() { return *TrustWorld::instance->stack; }
const Key& key() { return TrustWorld::instance->key; }

// The value of one exposed sample ("name{labels}"), or -1 when absent.
double sample(const std::string& metrics_url, const std::string& series) {
  HttpResult m = eq::it::httpRequest("GET", metrics_url);
  if (m.status != 200) return -1;
  size_t at = m.body.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(m.body.substr(at + series.size() + 2));
}

// Waits up to timeout_ms for a sample to reach `want`.
bool sampleReaches(const std::string& metrics_url, const std::string& series, double want,
                   int timeout_ms) {
  int64_t until = eq::it::nowMs() + timeout_ms;
  while (eq::it::nowMs() < until) {
    if (sample(metrics_url, series) >= want) return true;
    eq::it::sleepMs(50);
  }
  return false;
}

std::string dispatcherMetrics() {
  return "http://127.0.0.1:" + std::to_string(TrustWorld::instance->dispatcher_metrics_port) +
         "/metrics";
}

std::unique_ptr<eq::amqp::Connection> attacker() {
  auto opened = eq::amqp::Connection::open(stack().amqpUrl(), "eq-test-attacker", 30);
  BOOST_REQUIRE_MESSAGE(opened.isOk(), (opened.isOk() ? "" : opened.status().msg()));
  return std::move(opened).value();
}

std::string taskStatus(const std::string& task_id) {
  HttpResult r = eq::it::get(stack(), "/api/v1/task/" + task_id, &key());
  BOOST_REQUIRE_MESSAGE(r.status == 200, "GET task: " << r.status << " " << r.body);
  rapidjson::Document d;
  d.Parse(r.body.c_str());
  return d["data"]["status"].GetString();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(broker_trust)

BOOST_AUTO_TEST_CASE(a_forged_task_event_changes_no_task_and_sends_no_webhook) {
  WebhookReceiver hook;
  std::string hook_url = "http://127.0.0.1:" + std::to_string(hook.port()) + "/hook";
  // A real task of the customer's, queued: no fast worker runs here.
  HttpResult accepted = eq::it::post(
      stack(), "/api/v1/reply/async",
      R"({"mode":"fast","message":"今天被老板骂了","webhook_url":")" + hook_url + R"("})", key());
  BOOST_REQUIRE_MESSAGE(accepted.status == 200, accepted.body);
  rapidjson::Document a;
  a.Parse(accepted.body.c_str());
  std::string task_id = a["data"]["task_id"].GetString();
  BOOST_REQUIRE(taskStatus(task_id) == "queued");

  eq::msg::TaskEvent forged;
  forged.event = "task.succeeded";
  forged.task_id = task_id;
  forged.request_id = "req_forged";
  forged.mode = "fast";
  forged.at_ms = eq::nowMs();
  forged.result_json =
      R"({"request_id":"req_forged","mode":"fast","replies":[{"text":"Pay the fine at )"
      R"(https://evil.example","score":0.99,"style":"forged"}],"tokens_used":1})";
  std::string body = eq::msg::encodeTaskEvent(forged);

  std::unique_ptr<eq::amqp::Connection> conn = attacker();
  BOOST_REQUIRE(conn->enableConfirms().isOk());
  eq::amqp::PublishOptions opts;
  opts.persistent = true;
  // Unsigned, as the finding's event was, then signed with a wrong key.
  BOOST_REQUIRE(conn->publishConfirmed(eq::msg::kQueueTaskEvents, body, opts, 5000).isOk());
  opts.signature = eq::msg::signMessage(kWrongKey, eq::msg::SignedKind::kTaskEvent, "", body);
  BOOST_REQUIRE(conn->publishConfirmed(eq::msg::kQueueTaskEvents, body, opts, 5000).isOk());

  BOOST_TEST(sampleReaches(dispatcherMetrics(),
                           "eq_dispatcher_messages_refused_total{reason=\"unsigned\"}", 1, 10000),
             "the dispatcher counts the unsigned event as refused");
  BOOST_TEST(sampleReaches(dispatcherMetrics(),
                           "eq_dispatcher_messages_refused_total{reason=\"bad_signature\"}", 1,
                           10000),
             "the dispatcher counts the wrongly signed event as refused");
  // The refused events pass through eq.dead once more (dead-lettered);
  // neither pass may touch the task.
  eq::it::sleepMs(1500);
  BOOST_TEST(taskStatus(task_id) == "queued");
  BOOST_TEST(!hook.waitFor(1, 500), "no webhook for a forged event");
  BOOST_TEST(stack().process("dispatcher")->waitForLog("message refused", 1000).find(task_id) !=
             std::string::npos);

  // The control: the same event, signed with the processes' key, is applied
  // and delivered, so the body itself was one the dispatcher acts on.
  opts.signature =
      eq::msg::signMessage(stack().internalKey(), eq::msg::SignedKind::kTaskEvent, "", body);
  BOOST_REQUIRE(conn->publishConfirmed(eq::msg::kQueueTaskEvents, body, opts, 5000).isOk());
  BOOST_REQUIRE_MESSAGE(hook.waitFor(1, 10000), "the signed event's webhook arrives");
  BOOST_TEST(taskStatus(task_id) == "succeeded");
  BOOST_TEST(hook.received().size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_forged_sync_result_does_not_answer_the_caller) {
  std::unique_ptr<eq::amqp::Connection> conn = attacker();
  // The attacker as a competing consumer of the fast sync jobs (the job
  // queues' read permission is what least privilege takes away; the
  // administrator has it).
  BOOST_REQUIRE(conn->consume(eq::msg::kQueueSyncFast).isOk());

  auto takeJob = [&]() {
    std::optional<eq::amqp::Delivery> job;
    for (int i = 0; i < 100 && !job; ++i) {
      eq::Result<eq::amqp::Event> ev = conn->next(100);
      BOOST_REQUIRE(ev.isOk());
      if (auto* d = std::get_if<eq::amqp::Delivery>(&ev.value())) job = *d;
    }
    BOOST_REQUIRE_MESSAGE(job.has_value(), "the sync job never reached the attacker");
    BOOST_REQUIRE(conn->ack(job->tag).isOk());
    return *job;
  };
  const std::string data =
      R"({"request_id":"req_forged","mode":"fast","replies":[{"text":"forged reply",)"
      R"("score":0.99,"style":"forged"}],"tokens_used":1})";
  std::string result = eq::msg::encodeSyncResult({true, data, 0, "", 1});

  HttpResult answer;
  std::thread caller([&] {
    answer = eq::it::post(stack(), "/api/v1/reply",
                          R"({"mode":"fast","message":"你怎么又迟到了","reply_count":1})", key());
  });
  eq::amqp::Delivery job = takeJob();
  BOOST_TEST(!job.reply_to.empty());
  eq::amqp::PublishOptions opts;
  opts.correlation_id = job.correlation_id;
  BOOST_TEST(conn->publish(job.reply_to, result, opts).isOk());
  opts.signature = eq::msg::signMessage(kWrongKey, eq::msg::SignedKind::kSyncResult,
                                        job.correlation_id, result);
  BOOST_TEST(conn->publish(job.reply_to, result, opts).isOk());
  caller.join();
  BOOST_TEST(answer.status == 504, "the caller times out: " << answer.status << " " << answer.body);
  BOOST_TEST(answer.body.find("forged reply") == std::string::npos);
  std::string api_metrics = stack().url("/metrics");
  BOOST_TEST(sample(api_metrics, "eq_api_messages_refused_total{reason=\"unsigned\"}") == 1);
  BOOST_TEST(sample(api_metrics, "eq_api_messages_refused_total{reason=\"bad_signature\"}") == 1);

  // The control: signed with the processes' key, the same result answers.
  std::thread second([&] {
    answer = eq::it::post(stack(), "/api/v1/reply",
                          R"({"mode":"fast","message":"你怎么又迟到了","reply_count":1})", key());
  });
  job = takeJob();
  opts.correlation_id = job.correlation_id;
  opts.signature = eq::msg::signMessage(stack().internalKey(), eq::msg::SignedKind::kSyncResult,
                                        job.correlation_id, result);
  BOOST_TEST(conn->publish(job.reply_to, result, opts).isOk());
  second.join();
  BOOST_TEST(answer.status == 200, answer.status << " " << answer.body);
  BOOST_TEST(answer.body.find("forged reply") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
