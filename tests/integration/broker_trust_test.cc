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
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <rapidjson/document.h>

#include <boost/test/unit_test.hpp>
#include <functional>
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

// Logs in as the user of `url`, opens a channel, runs `op` on it and returns
// the broker's verdict: "" when it took the method, else the text it closed
// the channel or connection with (e.g. "ACCESS_REFUSED - access to queue
// ..."). Raw rabbitmq-c, as an attacker holding a role's credentials would
// use any client: eq::amqp::Connection has no basic.get or queue.delete.
std::string verdict(const std::string& url,
                    const std::function<amqp_rpc_reply_t(amqp_connection_state_t)>& op) {
  std::vector<char> buf(url.begin(), url.end());
  buf.push_back('\0');
  amqp_connection_info info;
  BOOST_REQUIRE(amqp_parse_url(buf.data(), &info) == AMQP_STATUS_OK);
  amqp_connection_state_t conn = amqp_new_connection();
  amqp_socket_t* sock = amqp_tcp_socket_new(conn);
  BOOST_REQUIRE(amqp_socket_open(sock, info.host, info.port) == AMQP_STATUS_OK);
  amqp_rpc_reply_t login = amqp_login(conn, info.vhost, 0, AMQP_DEFAULT_FRAME_SIZE, 0,
                                      AMQP_SASL_METHOD_PLAIN, info.user, info.password);
  BOOST_REQUIRE_MESSAGE(login.reply_type == AMQP_RESPONSE_NORMAL, "login as " << info.user);
  amqp_channel_open(conn, 1);
  BOOST_REQUIRE(amqp_get_rpc_reply(conn).reply_type == AMQP_RESPONSE_NORMAL);
  amqp_rpc_reply_t r = op(conn);
  std::string out;
  if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
    auto* m = static_cast<amqp_channel_close_t*>(r.reply.decoded);
    out.assign(static_cast<const char*>(m->reply_text.bytes), m->reply_text.len);
  } else if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
             r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
    auto* m = static_cast<amqp_connection_close_t*>(r.reply.decoded);
    out.assign(static_cast<const char*>(m->reply_text.bytes), m->reply_text.len);
  } else if (r.reply_type != AMQP_RESPONSE_NORMAL) {
    out = "no answer";
  }
  amqp_destroy_connection(conn);
  return out;
}

// no_ack: direct reply-to takes no other consumer.
std::string consumeVerdict(const std::string& url, const std::string& queue, bool no_ack = false) {
  return verdict(url, [&](amqp_connection_state_t c) {
    amqp_basic_consume(c, 1, amqp_cstring_bytes(queue.c_str()), amqp_empty_bytes, 0,
                       no_ack ? 1 : 0, 0, amqp_empty_table);
    return amqp_get_rpc_reply(c);
  });
}

std::string getVerdict(const std::string& url, const std::string& queue) {
  return verdict(url, [&](amqp_connection_state_t c) {
    return amqp_basic_get(c, 1, amqp_cstring_bytes(queue.c_str()), 0);
  });
}

bool refused(const std::string& verdict) {
  return verdict.rfind("ACCESS_REFUSED", 0) == 0;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(broker_trust)

// Issue 27, item 3, the second layer: each process reaches the broker as its
// role's user (deploy/rabbitmq/definitions.sh), so credentials taken from
// one process open no more than that process needs. The user's text is in
// the job queues and the task events; the api's user reads neither.
BOOST_AUTO_TEST_CASE(the_api_user_reads_no_queue) {
  const std::string& api = stack().roleUrl("eq-api");
  for (const char* q : {eq::msg::kQueueFast, eq::msg::kQueueSyncFast, eq::msg::kQueueTaskEvents,
                        eq::msg::kQueueDead}) {
    std::string c = consumeVerdict(api, q);
    BOOST_TEST(refused(c), "eq-api consumes " << q << ": '" << c << "'");
    std::string g = getVerdict(api, q);
    BOOST_TEST(refused(g), "eq-api basic.get on " << q << ": '" << g << "'");
  }
  // What it must do still works: direct reply-to needs no read permission.
  BOOST_TEST(consumeVerdict(api, eq::amqp::Connection::kDirectReplyTo, true) == "");
}

BOOST_AUTO_TEST_CASE(the_worker_user_reads_only_the_job_queues) {
  const std::string& worker = stack().roleUrl("eq-worker");
  for (const char* q : {eq::msg::kQueueTaskEvents, eq::msg::kQueueDead}) {
    std::string c = consumeVerdict(worker, q);
    BOOST_TEST(refused(c), "eq-worker consumes " << q << ": '" << c << "'");
  }
  BOOST_TEST(getVerdict(worker, eq::msg::kQueuePerfect) == "");
}

BOOST_AUTO_TEST_CASE(the_dispatcher_user_reads_only_events_and_dead_letters) {
  const std::string& dispatcher = stack().roleUrl("eq-dispatcher");
  for (const char* q : {eq::msg::kQueueFast, eq::msg::kQueueSyncFast, eq::msg::kQueueAnalyze}) {
    std::string c = consumeVerdict(dispatcher, q);
    BOOST_TEST(refused(c), "eq-dispatcher consumes " << q << ": '" << c << "'");
  }
}

BOOST_AUTO_TEST_CASE(no_role_user_can_delete_declare_or_rebind) {
  for (const char* user : {"eq-api", "eq-worker", "eq-dispatcher"}) {
    const std::string& url = stack().roleUrl(user);
    std::string del = verdict(url, [](amqp_connection_state_t c) {
      amqp_queue_delete(c, 1, amqp_cstring_bytes(eq::msg::kQueueFast), 0, 0);
      return amqp_get_rpc_reply(c);
    });
    BOOST_TEST(refused(del), user << " deletes eq.jobs.fast: '" << del << "'");
    std::string decl = verdict(url, [](amqp_connection_state_t c) {
      amqp_queue_declare(c, 1, amqp_cstring_bytes("eq.jobs.stolen"), 0, 1, 0, 0,
                         amqp_empty_table);
      return amqp_get_rpc_reply(c);
    });
    BOOST_TEST(refused(decl), user << " declares a queue: '" << decl << "'");
    // A copy of the dead letters bound to a queue of one's own.
    std::string bind = verdict(url, [](amqp_connection_state_t c) {
      amqp_queue_bind(c, 1, amqp_cstring_bytes(eq::msg::kQueuePerfect),
                      amqp_cstring_bytes(eq::msg::kExchangeDead), amqp_empty_bytes,
                      amqp_empty_table);
      return amqp_get_rpc_reply(c);
    });
    BOOST_TEST(refused(bind), user << " binds to eq.dlx: '" << bind << "'");
  }
}

// The topology scripts/lib/broker.sh imported into "/" from
// deploy/rabbitmq/definitions.sh is the one common/amqp.cc declares (here,
// into this stack's vhost): the services check it only by name, so a
// difference in arguments would go unnoticed anywhere else.
BOOST_AUTO_TEST_CASE(the_shipped_topology_matches_the_declared_one) {
  for (const char* q : {eq::msg::kQueueDead, eq::msg::kQueueFast, eq::msg::kQueueStandard,
                        eq::msg::kQueuePerfect, eq::msg::kQueueAnalyze, eq::msg::kQueueTaskEvents,
                        eq::msg::kQueueSyncFast, eq::msg::kQueueSyncStandard,
                        eq::msg::kQueueSyncPerfect, eq::msg::kQueueSyncAnalyze}) {
    HttpResult ours = stack().management(std::string("/queues/{vhost}/") + q);
    HttpResult shipped = stack().management(std::string("/queues/%2F/") + q);
    BOOST_REQUIRE_MESSAGE(ours.status == 200 && shipped.status == 200,
                          q << ": " << ours.status << " " << shipped.status);
    rapidjson::Document a, b;
    a.Parse(ours.body.c_str());
    b.Parse(shipped.body.c_str());
    for (const char* field : {"arguments", "durable", "auto_delete", "type"}) {
      BOOST_TEST((a[field] == b[field]), q << ": " << field << " differs");
    }
  }
}

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
