// Webhook delivery on the real binaries (docs/contract.md §6): retries on a
// compressed schedule, 410, redirects, dead receivers beside healthy ones,
// Retry-After, eqctl delivery list/show/replay, and a dispatcher killed
// between two attempts. Every webhook that arrives is checked with two
// independent verifiers from npm (tests/webhook-verify).
//
// One stack for the suite, with the schedule compressed to four 0.3 s steps
// (5 attempts) and a 2 s attempt timeout, so a run takes seconds, not hours.
#include <rapidjson/document.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <ctime>
#include <map>
#include <memory>
#include <set>

#include "tests/integration/stack.h"

using eq::it::HookReply;
using eq::it::HookRequest;
using eq::it::HookServer;
using eq::it::HttpResult;
using eq::it::ReceivedWebhook;
using eq::it::Stack;
using eq::it::StackOptions;

namespace {

constexpr int kAttempts = 5;          // EQ_WEBHOOK_RETRY_SCHEDULE below: 4 steps
constexpr int64_t kStepMs = 300;      // each step, +-10% jitter
constexpr int64_t kTimeoutMs = 2000;  // EQ_WEBHOOK_TIMEOUT_MS

int64_t steadyMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

struct HookWorld {
  static HookWorld* instance;
  std::unique_ptr<Stack> stack;
  std::string api_key, secret;
  HookWorld() {
    StackOptions o;
    o.worker_modes = {"fast"};
    o.env["EQ_WEBHOOK_RETRY_SCHEDULE"] = "0.3,0.3,0.3,0.3";
    o.env["EQ_WEBHOOK_TIMEOUT_MS"] = std::to_string(kTimeoutMs);
    stack = std::make_unique<Stack>(o);
    // A high rate limit: the tests poll GET /api/v1/task often.
    int rc = -1;
    std::string out = stack->eqctl(
        {"key", "create", "--name", "hooks", "--rate", "100000", "--quota-fast", "1000", "--json"},
        &rc);
    BOOST_REQUIRE_MESSAGE(rc == 0, "eqctl key create failed: " << out);
    rapidjson::Document d;
    d.Parse(out.c_str());
    BOOST_REQUIRE(d.IsObject());
    api_key = d["api_key"].GetString();
    secret = d["webhook_secret"].GetString();
    instance = this;
  }
  ~HookWorld() {
    BOOST_CHECK_MESSAGE(stack->stopAll(), "every process exits with status 0 on SIGTERM");
    instance = nullptr;
  }
};
HookWorld* HookWorld::instance = nullptr;

Stack& stack() { return *HookWorld::instance->stack; }
const std::string& secret() { return HookWorld::instance->secret; }

rapidjson::Document parseJson(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str());
  return d;
}

// Submits an async fast reply with this webhook URL; returns the task id.
std::string submit(const std::string& webhook_url) {
  HttpResult r = eq::it::httpRequest(
      "POST", stack().url("/api/v1/reply/async"),
      {"Authorization: Bearer " + HookWorld::instance->api_key, "Content-Type: application/json"},
      R"({"mode":"fast","message":"今天被老板骂了，好难过","reply_count":1,"webhook_url":")" +
          webhook_url + "\"}");
  BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
  rapidjson::Document d = parseJson(r.body);
  return d["data"]["task_id"].GetString();
}

// GET /api/v1/task/{id}'s data.
rapidjson::Document task(const std::string& task_id) {
  HttpResult r = eq::it::httpRequest("GET", stack().url("/api/v1/task/" + task_id),
                                     {"Authorization: Bearer " + HookWorld::instance->api_key});
  BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
  rapidjson::Document d = parseJson(r.body);
  BOOST_REQUIRE(d.IsObject() && d["data"].IsObject());
  rapidjson::Document data;
  data.CopyFrom(d["data"], data.GetAllocator());
  return data;
}

// Polls the task until its webhook has `status`; returns the task.
rapidjson::Document waitWebhook(const std::string& task_id, const std::string& status,
                                int timeout_ms) {
  int64_t until = steadyMs() + timeout_ms;
  std::string last;
  while (true) {
    rapidjson::Document t = task(task_id);
    BOOST_REQUIRE(t["webhook"].IsObject());
    last = t["webhook"]["status"].GetString();
    if (last == status) return t;
    BOOST_REQUIRE_MESSAGE(steadyMs() < until,
                          "webhook of " << task_id << " is " << last << ", never " << status);
    usleep(50'000);
  }
}

// eqctl ARGS --json, which must succeed.
rapidjson::Document eqctlJson(std::vector<std::string> args) {
  args.push_back("--json");
  int rc = -1;
  std::string out = stack().eqctl(args, &rc);
  BOOST_REQUIRE_MESSAGE(rc == 0, "eqctl failed: " << out);
  rapidjson::Document d = parseJson(out);
  BOOST_REQUIRE_MESSAGE(!d.HasParseError(), "not JSON: " << out);
  return d;
}

std::string deliveryIdOf(const std::string& task_id) {
  rapidjson::Document list = eqctlJson({"delivery", "list", "--task", task_id});
  BOOST_REQUIRE(list.IsArray() && list.Size() == 1u);
  return list[0]["delivery_id"].GetString();
}

// Every request verified by both npm verifiers, signed for this attempt.
void expectVerified(const std::vector<HookRequest>& got) {
  for (size_t i = 0; i < got.size(); ++i) {
    const ReceivedWebhook& w = got[i].webhook;
    std::string verdict;
    BOOST_TEST(eq::it::verifyWithNpm(secret(), w, &verdict),
               "request " << i + 1 << ": " << verdict);
    rapidjson::Document body = parseJson(w.body);
    BOOST_REQUIRE(body.IsObject());
    BOOST_TEST(std::to_string(body["timestamp"].GetInt64()) == w.headers.at("webhook-timestamp"));
  }
}

HookReply reply(int status, std::vector<std::string> headers = {}, bool hang = false) {
  HookReply r;
  r.status = status;
  r.headers = std::move(headers);
  r.hang = hang;
  return r;
}

HookServer::ReplyFn always(int status) {
  return [status](const ReceivedWebhook&, size_t) { return reply(status); };
}

std::string httpDate(time_t t) {
  char buf[64];
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(webhooks, *boost::unit_test::fixture<HookWorld>())

BOOST_AUTO_TEST_CASE(failing_receiver_gets_retries_with_one_delivery_id_until_it_succeeds) {
  HookServer hook([](const ReceivedWebhook&, size_t n) { return reply(n <= 3 ? 500 : 200); });
  std::string task_id = submit(hook.url());
  BOOST_REQUIRE_MESSAGE(hook.waitFor(4, 20000), "4 attempts never arrived");
  rapidjson::Document t = waitWebhook(task_id, "delivered", 5000);
  BOOST_TEST(t["webhook"]["attempts"].GetInt() == 4);
  BOOST_TEST(t["webhook"]["last_status"].GetInt() == 200);
  BOOST_TEST(t["webhook"]["last_attempt_at"].IsString());
  usleep(1'000'000);  // delivered: nothing more comes
  std::vector<HookRequest> got = hook.received();
  BOOST_REQUIRE(got.size() == 4u);

  std::string id = got[0].webhook.headers.at("x-service-delivery");
  BOOST_TEST(id.rfind("dlv_", 0) == 0u);
  for (const HookRequest& r : got) {
    BOOST_TEST(r.webhook.headers.at("x-service-delivery") == id);
    BOOST_TEST(r.webhook.headers.at("webhook-id") == id);
    BOOST_TEST(parseJson(r.webhook.body)["task_id"].GetString() == task_id);
  }
  for (size_t i = 1; i < got.size(); ++i) {
    int64_t gap = got[i].at_ms - got[i - 1].at_ms;
    BOOST_TEST_MESSAGE("gap before attempt " << i + 1 << ": " << gap << " ms");
    BOOST_TEST(gap >= kStepMs * 9 / 10 - 20, "attempt " << i + 1 << " came after " << gap << " ms");
  }
  expectVerified(got);
  BOOST_TEST_MESSAGE("4 attempts over " << hook.connections() << " connection(s)");
  BOOST_TEST(hook.connections() < 4, "connections are reused between attempts");

  // Every attempt is logged: eqctl delivery show has the four.
  rapidjson::Document d = eqctlJson({"delivery", "show", id});
  BOOST_TEST(std::string(d["status"].GetString()) == "delivered");
  BOOST_REQUIRE(d["attempt_log"].Size() == 4u);
  for (int i = 0; i < 4; ++i) {
    const auto& a = d["attempt_log"][i];
    BOOST_TEST(a["attempt"].GetInt() == i + 1);
    BOOST_TEST(a["http_status"].GetInt() == (i < 3 ? 500 : 200));
    BOOST_TEST(a["latency_ms"].GetInt64() >= 0);
    BOOST_TEST(a["at"].IsString());
    if (i < 3) BOOST_TEST(std::string(a["error"].GetString()) == "receiver answered HTTP 500");
  }
  // ... and the dispatcher's log has one JSON line per attempt.
  std::string line = stack().process("dispatcher")->waitForLog("\"outcome\":\"delivered\"", 1000);
  BOOST_TEST(line.find(id) != std::string::npos);
  stack().process("dispatcher")->waitForLog("retention purge done", 1000);
}

BOOST_AUTO_TEST_CASE(gone_410_fails_the_delivery_at_once) {
  HookServer hook(always(410));
  std::string task_id = submit(hook.url());
  rapidjson::Document t = waitWebhook(task_id, "failed", 15000);
  BOOST_TEST(t["webhook"]["attempts"].GetInt() == 1);
  BOOST_TEST(t["webhook"]["last_status"].GetInt() == 410);
  usleep(static_cast<useconds_t>(kStepMs * 3 * 1000));
  BOOST_TEST(hook.received().size() == 1u);
  expectVerified(hook.received());
}

BOOST_AUTO_TEST_CASE(redirects_are_not_followed_and_count_as_failures) {
  HookServer target(always(200));
  HookServer hook([&target](const ReceivedWebhook&, size_t) {
    return reply(302, {"Location: " + target.url("/elsewhere")});
  });
  std::string task_id = submit(hook.url());
  rapidjson::Document t = waitWebhook(task_id, "failed", 20000);
  BOOST_TEST(t["webhook"]["attempts"].GetInt() == kAttempts);
  BOOST_TEST(t["webhook"]["last_status"].GetInt() == 302);
  BOOST_TEST(hook.received().size() == static_cast<size_t>(kAttempts));
  BOOST_TEST(target.received().empty(), "the redirect was followed");
  expectVerified(hook.received());
}

BOOST_AUTO_TEST_CASE(a_dead_receiver_times_out_without_delaying_healthy_ones) {
  HookServer dead([](const ReceivedWebhook&, size_t) { return reply(200, {}, true); });
  HookServer healthy(always(204));
  std::vector<std::string> dead_tasks;
  for (int i = 0; i < 3; ++i) dead_tasks.push_back(submit(dead.url()));
  // Three first attempts now hang in the dispatcher, for up to 2 s each.
  BOOST_REQUIRE_MESSAGE(dead.waitFor(3, 10000), "the dead receiver was never reached");

  std::map<std::string, int64_t> submitted;
  for (int i = 0; i < 5; ++i) {
    int64_t at = steadyMs();
    submitted[submit(healthy.url())] = at;
  }
  BOOST_REQUIRE_MESSAGE(healthy.waitFor(5, 10000), "healthy deliveries never arrived");
  int64_t worst = 0;
  for (const HookRequest& r : healthy.received()) {
    std::string id = parseJson(r.webhook.body)["task_id"].GetString();
    BOOST_REQUIRE(submitted.count(id) == 1u);
    worst = std::max(worst, r.at_ms - submitted[id]);
  }
  BOOST_TEST_MESSAGE("healthy deliveries: submit to arrival at most " << worst << " ms");
  // A sender blocked by the dead receiver would add its 2 s timeout (or
  // several) to these.
  BOOST_TEST(worst < kTimeoutMs * 3 / 4, "a healthy delivery took " << worst << " ms");
  expectVerified(healthy.received());
  for (const auto& [id, at] : submitted) {
    BOOST_TEST(task(id)["webhook"]["status"].GetString() == std::string("delivered"));
  }

  // Each dead attempt times out; after the last one the delivery is failed.
  for (const std::string& id : dead_tasks) {
    rapidjson::Document t = waitWebhook(id, "failed", 40000);
    BOOST_TEST(t["webhook"]["attempts"].GetInt() == kAttempts);
    BOOST_TEST(t["webhook"]["last_status"].IsNull());
    rapidjson::Document d = eqctlJson({"delivery", "show", deliveryIdOf(id)});
    BOOST_REQUIRE(d["attempt_log"].Size() == static_cast<unsigned>(kAttempts));
    for (const auto& a : d["attempt_log"].GetArray()) {
      BOOST_TEST(a["http_status"].IsNull());
      BOOST_TEST(std::string(a["error"].GetString()).find("timed out") != std::string::npos);
      BOOST_TEST(a["latency_ms"].GetInt64() >= kTimeoutMs - 100);
      BOOST_TEST(a["latency_ms"].GetInt64() < kTimeoutMs + 1000);
    }
  }
  BOOST_TEST(dead.received().size() == static_cast<size_t>(3 * kAttempts));
  expectVerified(dead.received());
}

// One account's receiver that never answers holds at most the account's
// share of the dispatcher's slots (EQ_WEBHOOK_MAX_IN_FLIGHT_PER_ACCOUNT). With
// 4 slots, a share of 2 and six deliveries to a hanging receiver due first,
// another account's webhooks are all delivered while the hanging ones are
// still held. Without the share the first four hanging attempts take every
// slot for the attempt timeout (two minutes here) and the other account's
// webhooks wait behind them. Asserted by counts and by what is still
// pending, not by how long anything took: the wait below is only a bound on
// a broken run, well inside the attempt timeout.
BOOST_AUTO_TEST_CASE(an_account_whose_receiver_hangs_holds_only_its_share_of_the_slots) {
  StackOptions o;
  o.worker_modes = {"fast"};
  o.env["EQ_WEBHOOK_MAX_IN_FLIGHT"] = "4";
  o.env["EQ_WEBHOOK_MAX_IN_FLIGHT_PER_ACCOUNT"] = "2";
  o.env["EQ_WEBHOOK_TIMEOUT_MS"] = "120000";
  Stack stack(o);
  eq::it::Key hanging_key = eq::it::createKey(stack, "hangs", {"--rate", "100000"});
  eq::it::Key healthy_key = eq::it::createKey(stack, "answers", {"--rate", "100000"});
  HookServer dead([](const ReceivedWebhook&, size_t) { return reply(200, {}, true); });
  HookServer healthy(always(200));
  auto submitAs = [&stack](const eq::it::Key& key, const std::string& url) {
    HttpResult r = eq::it::post(stack, "/api/v1/reply/async",
                                R"({"mode":"fast","message":"在吗","webhook_url":")" + url + "\"}",
                                key);
    BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
    return std::string(eq::it::parse(r)["data"]["task_id"].GetString());
  };
  auto webhookOf = [&stack](const eq::it::Key& key, const std::string& task_id) {
    rapidjson::Document t = eq::it::parse(eq::it::get(stack, "/api/v1/task/" + task_id, &key));
    BOOST_REQUIRE(t["data"]["webhook"].IsObject());
    return std::pair{std::string(t["data"]["webhook"]["status"].GetString()),
                     t["data"]["webhook"]["attempts"].GetInt()};
  };

  // Six deliveries of the hanging account, all created (due) before any of
  // the other account's: they are first in the due order.
  std::vector<std::string> hanging_tasks;
  for (int i = 0; i < 6; ++i) hanging_tasks.push_back(submitAs(hanging_key, dead.url()));
  for (const std::string& id : hanging_tasks) {
    int64_t until = eq::it::nowMs() + 30000;
    while (webhookOf(hanging_key, id).first != "pending") {
      BOOST_REQUIRE_MESSAGE(eq::it::nowMs() < until, "no delivery for " << id);
      eq::it::sleepMs(50);
    }
  }
  BOOST_REQUIRE_MESSAGE(dead.waitFor(2, 30000), "the hanging receiver was never reached");

  std::vector<std::string> healthy_tasks;
  for (int i = 0; i < 5; ++i) healthy_tasks.push_back(submitAs(healthy_key, healthy.url()));
  BOOST_REQUIRE_MESSAGE(healthy.waitFor(5, 60000),
                        "the answering account's webhooks waited behind the hanging ones: "
                            << healthy.received().size() << " of 5 arrived, the hanging receiver "
                            << "holds " << dead.received().size() << " attempts");
  for (const std::string& id : healthy_tasks) {
    int64_t until = eq::it::nowMs() + 10000;
    while (webhookOf(healthy_key, id).first != "delivered") {
      BOOST_REQUIRE_MESSAGE(eq::it::nowMs() < until, "webhook of " << id << " never delivered");
      eq::it::sleepMs(50);
    }
  }
  // Meanwhile the hanging account got exactly its share: two attempts
  // reached its receiver and are still held (no attempt of any of its six
  // deliveries has finished), the other four wait, pending with none.
  BOOST_TEST(dead.received().size() == 2u);
  for (const std::string& id : hanging_tasks) {
    auto [status, attempts] = webhookOf(hanging_key, id);
    BOOST_TEST(status == "pending", id);
    BOOST_TEST(attempts == 0, id);
  }
  std::string line = stack.process("dispatcher")->waitForLog(
      "webhook deliveries of an account wait for its share of slots", 5000);
  BOOST_TEST(line.find("\"max_in_flight_per_account\":2") != std::string::npos, line);
  BOOST_TEST(stack.stopAll());
}

BOOST_AUTO_TEST_CASE(retry_after_on_429_and_503_is_honoured) {
  // 429 with delay-seconds, then 503 with an HTTP date, then success: both
  // waits are the receiver's, far longer than the 0.3 s schedule step.
  HookServer hook([](const ReceivedWebhook&, size_t n) {
    if (n == 1) return reply(429, {"Retry-After: 1"});
    if (n == 2) return reply(503, {"Retry-After: " + httpDate(std::time(nullptr) + 2)});
    return reply(200);
  });
  std::string task_id = submit(hook.url());
  BOOST_REQUIRE(hook.waitFor(3, 15000));
  rapidjson::Document t = waitWebhook(task_id, "delivered", 5000);
  BOOST_TEST(t["webhook"]["attempts"].GetInt() == 3);
  std::vector<HookRequest> got = hook.received();
  int64_t after_429 = got[1].at_ms - got[0].at_ms;
  int64_t after_503 = got[2].at_ms - got[1].at_ms;
  BOOST_TEST_MESSAGE("after 429 (Retry-After: 1): " << after_429
                                                    << " ms; after 503 "
                                                       "(Retry-After: date +2 s): "
                                                    << after_503 << " ms");
  BOOST_TEST(after_429 >= 950);
  BOOST_TEST(after_429 < 3000);
  BOOST_TEST(after_503 >= 900);  // the date has whole seconds: 1 to 2 s from now
  BOOST_TEST(after_503 < 4000);
  expectVerified(got);
}

BOOST_AUTO_TEST_CASE(failed_deliveries_are_listed_and_a_replay_resends_the_same_delivery) {
  HookServer hook(always(410));
  std::string task_id = submit(hook.url());
  waitWebhook(task_id, "failed", 15000);
  std::string id = hook.received().at(0).webhook.headers.at("x-service-delivery");

  rapidjson::Document failed = eqctlJson({"delivery", "list", "--failed"});
  BOOST_REQUIRE(failed.IsArray());
  std::set<std::string> ids;
  for (const auto& d : failed.GetArray()) {
    BOOST_TEST(std::string(d["status"].GetString()) == "failed");
    ids.insert(d["delivery_id"].GetString());
  }
  BOOST_TEST(ids.count(id) == 1u);
  int rc = -1;
  std::string text = stack().eqctl({"delivery", "list", "--failed"}, &rc);
  BOOST_TEST(rc == 0);
  BOOST_TEST(text.find(id) != std::string::npos);
  BOOST_TEST(stack().eqctl({"delivery", "list", "--status", "delivered"}, &rc).find(id) ==
             std::string::npos);

  // The receiver is fixed; the operator replays.
  hook.setReply(always(200));
  text = stack().eqctl({"delivery", "replay", id}, &rc);
  BOOST_REQUIRE_MESSAGE(rc == 0, text);
  BOOST_REQUIRE_MESSAGE(hook.waitFor(2, 5000), "the replay never arrived");
  rapidjson::Document t = waitWebhook(task_id, "delivered", 5000);
  BOOST_TEST(t["webhook"]["attempts"].GetInt() == 2);  // attempts keep counting
  BOOST_TEST(t["webhook"]["last_status"].GetInt() == 200);
  std::vector<HookRequest> got = hook.received();
  BOOST_REQUIRE(got.size() == 2u);
  BOOST_TEST(got[1].webhook.headers.at("x-service-delivery") == id);
  BOOST_TEST(got[1].webhook.headers.at("webhook-id") == id);
  expectVerified(got);
  // Replaying a pending or unknown delivery is refused.
  stack().eqctl({"delivery", "replay", "dlv_unknown"}, &rc);
  BOOST_TEST(rc == 3);  // eqctl's "not found" exit code (tools/eqctl_commands.h)
}

// Last: it replaces the stack's dispatcher.
BOOST_AUTO_TEST_CASE(retry_state_survives_a_killed_dispatcher) {
  // The first answer asks for 3 s; meanwhile the dispatcher is SIGKILLed and
  // a new one started. The pending delivery and its due time are in SQLite,
  // so the new process sends attempt 2 on time, with the same delivery id.
  HookServer hook([](const ReceivedWebhook&, size_t n) {
    return n == 1 ? reply(503, {"Retry-After: 3"}) : reply(200);
  });
  std::string task_id = submit(hook.url());
  BOOST_REQUIRE(hook.waitFor(1, 15000));
  rapidjson::Document t = task(task_id);
  for (int i = 0; i < 40 && t["webhook"]["attempts"].GetInt() < 1; ++i) {
    usleep(50'000);
    t = task(task_id);
  }
  BOOST_TEST(std::string(t["webhook"]["status"].GetString()) == "pending");
  BOOST_TEST(t["webhook"]["attempts"].GetInt() == 1);
  BOOST_TEST(t["webhook"]["last_status"].GetInt() == 503);

  stack().process("dispatcher")->kill9();
  stack().spawn("dispatcher-2", {"eq-dispatcher"});
  stack().process("dispatcher-2")->waitForLog("consuming", 20000);
  BOOST_REQUIRE_MESSAGE(hook.waitFor(2, 10000), "the retry was lost with the dispatcher");
  waitWebhook(task_id, "delivered", 5000);
  std::vector<HookRequest> got = hook.received();
  int64_t gap = got[1].at_ms - got[0].at_ms;
  BOOST_TEST_MESSAGE("attempt 2 came " << gap << " ms after attempt 1 (Retry-After: 3)");
  BOOST_TEST(gap >= 2900);
  BOOST_TEST(got[1].webhook.headers.at("x-service-delivery") ==
             got[0].webhook.headers.at("x-service-delivery"));
  expectVerified(got);
}

BOOST_AUTO_TEST_SUITE_END()

// Issue 13, finding 5: the dispatcher's guard at connect time, end to end.
// eq-api is given EQ_WEBHOOK_ALLOW_CIDRS=127.0.0.1/32 (the test stack's
// default), so a loopback webhook URL passes the submission check: a
// literal 127.0.0.1 because that range is allowed, and the name
// "localhost" because names are judged only when they are resolved. The
// dispatcher is given no allowed range, so its guard at connect time must
// refuse both. Each delivery fails at once after one attempt that names the
// refusal, with no retry scheduled, and the receiver (a real one, listening)
// never sees a connection.
BOOST_AUTO_TEST_CASE(an_address_the_dispatcher_refuses_fails_the_delivery_after_one_attempt) {
  StackOptions o;
  o.worker_modes = {"fast"};
  o.dispatcher = false;
  o.env["EQ_WEBHOOK_RETRY_SCHEDULE"] = "0.3,0.3,0.3,0.3";
  Stack stack(o);
  eq::it::Process* dispatcher =
      stack.spawn("dispatcher", {"eq-dispatcher"}, {{"EQ_WEBHOOK_ALLOW_CIDRS", ""}});
  dispatcher->waitForLog("consuming", 20000);
  eq::it::Key key = eq::it::createKey(stack, "refused-hook", {"--rate", "100000"});
  HookServer hook(always(200));
  std::vector<std::string> task_ids;
  for (const char* host : {"127.0.0.1", "localhost"}) {
    std::string url = std::string("http://") + host + ":" + std::to_string(hook.port()) + "/hook";
    HttpResult r =
        eq::it::post(stack, "/api/v1/reply/async",
                     R"({"mode":"fast","message":"在吗","webhook_url":")" + url + "\"}", key);
    BOOST_REQUIRE_MESSAGE(r.status == 200, "eq-api accepts " << url << ": " << r.body);
    task_ids.push_back(eq::it::parse(r)["data"]["task_id"].GetString());
  }

  for (const std::string& task_id : task_ids) {
    rapidjson::Document t;
    for (int64_t until = eq::it::nowMs() + 15000; eq::it::nowMs() < until; eq::it::sleepMs(50)) {
      t = eq::it::parse(eq::it::get(stack, "/api/v1/task/" + task_id, &key));
      const rapidjson::Value& state = t["data"]["webhook"];
      if (state.IsObject() && std::string(state["status"].GetString()) == "failed") break;
    }
    const rapidjson::Value& data = t["data"];
    BOOST_TEST(std::string(data["status"].GetString()) == "succeeded", "the task itself is fine");
    BOOST_REQUIRE(data["webhook"].IsObject());
    BOOST_REQUIRE_EQUAL(std::string(data["webhook"]["status"].GetString()), "failed");
    BOOST_TEST(data["webhook"]["attempts"].GetInt() == 1);
  }

  // Several steps of the compressed schedule later: still one attempt each,
  // no retry due, and nothing reached the receiver.
  eq::it::sleepMs(1500);
  for (const std::string& task_id : task_ids) {
    int rc = -1;
    std::string out = stack.eqctl({"delivery", "list", "--task", task_id, "--json"}, &rc);
    BOOST_REQUIRE_MESSAGE(rc == 0, out);
    rapidjson::Document list;
    list.Parse(out.c_str());
    BOOST_REQUIRE(list.IsArray() && list.Size() == 1u);
    std::string id = list[0]["delivery_id"].GetString();
    out = stack.eqctl({"delivery", "show", id, "--json"}, &rc);
    BOOST_REQUIRE_MESSAGE(rc == 0, out);
    rapidjson::Document d;
    d.Parse(out.c_str());
    BOOST_REQUIRE(d.IsObject());
    BOOST_TEST(std::string(d["status"].GetString()) == "failed");
    BOOST_TEST(d["attempts"].GetInt() == 1);
    bool none_due = !d.HasMember("next_attempt_at") || d["next_attempt_at"].IsNull();
    BOOST_TEST(none_due, "a retry is scheduled: " << out);
    BOOST_REQUIRE(d["attempt_log"].Size() == 1u);
    BOOST_TEST(std::string(d["attempt_log"][0]["error"].GetString()) ==
               "refused: webhook host resolves to a non-public address");
    // The attempt's log line says so too.
    std::string log = eq::it::readFile(dispatcher->logPath());
    bool logged = false;
    for (size_t at = log.find(id); at != std::string::npos && !logged; at = log.find(id, at + 1)) {
      size_t begin = log.rfind('\n', at) + 1;
      std::string line = log.substr(begin, log.find('\n', at) - begin);
      logged = line.find("\"outcome\":\"failed\"") != std::string::npos &&
               line.find("non-public address") != std::string::npos;
    }
    BOOST_TEST(logged, "no failed attempt logged for " << id);
  }
  BOOST_TEST(hook.received().empty(), "a refused address was reached");
  BOOST_TEST(hook.connections() == 0);
  BOOST_TEST(stack.stopAll());
}
