// The llm engine on the real binaries and a real RabbitMQ, against a small
// chat-completions server started by the test (the one stand-in allowed: we
// cannot run a model here). The stub speaks the OpenAI protocol and acts on
// a marker in the message: [good] answers well, [malformed-once] and
// [malformed] break the JSON once or always, [500] and [429-once] fail at
// the HTTP level, [stall] never answers, [hold] keeps the answer until
// several calls are in flight at once (or 15 s pass), [slow] answers
// after 1.5 s. Each case ends in a correct result or a clean failed task
// with its unit refunded.
//
// Every async task of the module also carries a webhook URL (TaskHooks):
// the dispatcher then records task events on its consumer thread while its
// sender thread delivers and retries webhooks, which is what the TSan
// stage of scripts/test runs this suite for. The last case of the suite
// checks that each task's webhook arrived, after one failed attempt for
// about half of them.
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/wait.h>

#include <boost/test/unit_test.hpp>
#include <fstream>
#include <iterator>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>

#include "tests/integration/stack.h"

using eq::it::HookReply;
using eq::it::HookServer;
using eq::it::HttpResult;
using eq::it::Key;
using eq::it::ReceivedWebhook;
using eq::it::Stack;

namespace {

constexpr int kTokensPerCall = 30;  // the stub's usage.total_tokens
constexpr int kTimeoutMs = 20000;   // EQ_LLM_TIMEOUT_MS of the stack below
constexpr int kStandardTimeoutMs = 2000;  // its EQ_LLM_TIMEOUT_MS_STANDARD
constexpr int kHoldTarget = 6;      // [hold] calls wanted in flight at once
// One worker at EQ_WORKER_CONCURRENCY=64 must hold at least this many model
// calls at once (issue 10: three quarters of its slots, so a worker that
// refills slots only one broker round trip at a time fails).
constexpr int kWideConcurrency = 64;
constexpr int kWideHoldTarget = 48;

// The end of a process's log, for failure messages.
std::string logTail(const std::string& path, size_t max_bytes = 3000) {
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return all.size() > max_bytes ? all.substr(all.size() - max_bytes) : all;
}

std::string jsonString(const std::string& s) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size()));
  return sb.GetString();
}

// One call the stub saw, decoded.
struct StubCall {
  std::string schema;  // response_format.json_schema.name
  std::string model;
  std::string authorization;
  std::string system, user;  // first system and user message
  std::vector<std::pair<std::string, std::string>> messages;  // role, content
  int items = 0;  // minItems of the answer's array (replies or ranking)
};

// No Boost.Test assertions here: the stub calls it on its own threads.
bool decode(const ReceivedWebhook& w, StubCall* out) {
  StubCall& c = *out;
  rapidjson::Document d;
  d.Parse(w.body.c_str());
  if (!d.IsObject() || !d.HasMember("model") || !d.HasMember("messages") ||
      !d.HasMember("response_format")) {
    return false;
  }
  c.model = d["model"].GetString();
  auto h = w.headers.find("authorization");
  if (h != w.headers.end()) c.authorization = h->second;
  for (const auto& m : d["messages"].GetArray()) {
    c.messages.emplace_back(m["role"].GetString(), m["content"].GetString());
    if (c.system.empty() && c.messages.back().first == "system") c.system = c.messages.back().second;
    if (c.user.empty() && c.messages.back().first == "user") c.user = c.messages.back().second;
  }
  const rapidjson::Value& rf = d["response_format"];
  if (std::string(rf["type"].GetString()) != "json_schema") return false;
  c.schema = rf["json_schema"]["name"].GetString();
  const rapidjson::Value& props = rf["json_schema"]["schema"]["properties"];
  if (props.HasMember("replies")) c.items = props["replies"]["minItems"].GetInt();
  if (props.HasMember("ranking")) c.items = props["ranking"]["minItems"].GetInt();
  return true;
}

// The OpenAI-compatible stand-in. Thread-safe: the HookServer serves each
// connection on a thread of its own.
class LlmStub {
 public:
  LlmStub() : server_([this](const ReceivedWebhook& w, size_t n) { return answer(w, n); }) {}

  std::string baseUrl() const { return server_.url("/v1"); }
  std::vector<StubCall> calls() {
    std::vector<StubCall> out;
    for (const auto& r : server_.received()) {
      StubCall c;
      BOOST_REQUIRE_MESSAGE(decode(r.webhook, &c), "not a chat-completions request: "
                                                       << r.webhook.body);
      out.push_back(std::move(c));
    }
    return out;
  }
  // Calls whose user message contains `marker`.
  std::vector<StubCall> callsFor(const std::string& marker) {
    std::vector<StubCall> out;
    for (StubCall& c : calls()) {
      if (c.user.find(marker) != std::string::npos) out.push_back(std::move(c));
    }
    return out;
  }
  // When each call with `marker` arrived (steady clock, ms), in order.
  std::vector<int64_t> arrivalsFor(const std::string& marker) {
    std::vector<int64_t> out;
    for (const auto& r : server_.received()) {
      StubCall c;
      if (decode(r.webhook, &c) && c.user.find(marker) != std::string::npos) out.push_back(r.at_ms);
    }
    return out;
  }
  int maxInFlight() {
    std::lock_guard<std::mutex> lock(mu_);
    return max_in_flight_;
  }
  // [hold] calls wait for `target` at once from now on; the peak restarts.
  void setHoldTarget(int target) {
    std::lock_guard<std::mutex> lock(mu_);
    hold_target_ = target;
    max_in_flight_ = 0;
    target_reached_ = false;
  }
  HookServer& server() { return server_; }

 private:
  HookReply answer(const ReceivedWebhook& w, size_t n) {
    StubCall c;
    if (!decode(w, &c)) return HookReply{400, {}, false, R"({"error":{"message":"bad request"}})"};
    const std::string& u = c.user;
    auto has = [&](const char* m) { return u.find(m) != std::string::npos; };
    int seen;
    {
      std::lock_guard<std::mutex> lock(mu_);
      seen = ++per_marker_[u];
    }
    if (has("[stall]")) return HookReply{200, {}, true, ""};
    if (has("[500]")) return HookReply{500, {}, false, R"({"error":{"message":"boom"}})"};
    if (has("[429-once]") && seen == 1) {
      return HookReply{429, {"Retry-After: 1"}, false, R"({"error":{"message":"slow down"}})"};
    }
    if (has("[malformed]") || (has("[malformed-once]") && seen == 1)) {
      return ok(R"({"replies": [{"text": "unterminated)", n);
    }
    if (has("[hold]")) hold();
    if (has("[slow]")) eq::it::sleepMs(1500);
    return ok(content(c, n), n);
  }

  // Waits until the hold target's calls are here at once (or 15 s passed:
  // only a worker that cannot hold them all waits that long) and records the
  // most seen together. Once the target was reached, later calls answer at
  // once: those of a batch that arrive after the first ones left (a loaded
  // machine spreads them out) have nothing left to prove.
  void hold() {
    std::unique_lock<std::mutex> lock(mu_);
    ++in_flight_;
    max_in_flight_ = std::max(max_in_flight_, in_flight_);
    if (in_flight_ >= hold_target_) target_reached_ = true;
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::seconds(15), [&] { return target_reached_; });
    lock.unlock();
    eq::it::sleepMs(50);  // let the others see the peak before anyone leaves
    lock.lock();
    --in_flight_;
  }

  static std::string content(const StubCall& c, size_t n) {
    std::string id = std::to_string(n);
    if (c.schema == "analysis") {
      return R"({"emotion":"sadness","intensity":0.7,"underlying_need":"被理解和陪伴",)"
             R"("relationship_stage":"dating","suggested_strategy":"先共情，再问需要什么"})";
    }
    if (c.schema == "judge") {
      // Ranks the candidates in reverse, so a test can tell the judge's
      // order from the candidates' own scores.
      std::string out = R"({"ranking":[)";
      for (int i = c.items; i >= 1; --i) {
        out += std::string(i == c.items ? "" : ",") + R"({"candidate":)" + std::to_string(i) +
               R"(,"score":)" + std::to_string(0.5 + 0.05 * i) + R"(,"reason":"理由)" +
               std::to_string(i) + R"("})";
      }
      return out + R"(],"comparison":"共情比说教更稳妥"})";
    }
    std::string out = R"({"replies":[)";
    for (int i = 0; i < c.items; ++i) {
      out += std::string(i == 0 ? "" : ",") + R"({"text":"回复)" + id + "-" + std::to_string(i) +
             R"(：辛苦了，抱抱你","score":)" + std::to_string(0.6 + 0.05 * i) +
             R"(,"eq_analysis":"先接住情绪"})";
    }
    return out + "]}";
  }

  static HookReply ok(const std::string& content, size_t n) {
    std::string body = R"({"id":"chatcmpl-)" + std::to_string(n) +
                       R"(","object":"chat.completion","created":1,"model":"stub","choices":)"
                       R"([{"index":0,"message":{"role":"assistant","content":)" +
                       jsonString(content) +
                       R"(},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,)"
                       R"("completion_tokens":20,"total_tokens":)" +
                       std::to_string(kTokensPerCall) + "}}";
    return HookReply{200, {}, false, body};
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, int> per_marker_;
  int in_flight_ = 0;
  int max_in_flight_ = 0;
  int hold_target_ = kHoldTarget;
  bool target_reached_ = false;  // since the last setHoldTarget()
  HookServer server_;  // last: its threads call answer(), which uses the members above
};

// The receiver of the module's task webhooks. The first attempt for a task
// whose id ends in an even digit or letter code is answered 500, so the
// dispatcher's sender retries it (EQ_WEBHOOK_RETRY_SCHEDULE below) while its
// consumer thread goes on applying events; every other attempt gets 200.
class TaskHooks {
 public:
  static bool failsFirst(const std::string& task_id) {
    return !task_id.empty() && task_id.back() % 2 == 0;
  }
  std::string url() const { return server_.url("/task-hook"); }
  // Attempts received for the task.
  int attempts(const std::string& task_id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = attempts_.find(task_id);
    return it == attempts_.end() ? 0 : it->second;
  }

 private:
  HookReply answer(const ReceivedWebhook& w) {
    rapidjson::Document d;
    d.Parse(w.body.c_str());
    std::string task_id = d.IsObject() && d.HasMember("task_id") && d["task_id"].IsString()
                              ? d["task_id"].GetString()
                              : "";
    int n;
    {
      std::lock_guard<std::mutex> lock(mu_);
      n = ++attempts_[task_id];
    }
    return HookReply{n == 1 && failsFirst(task_id) ? 500 : 200, {}, false, ""};
  }

  std::mutex mu_;
  std::map<std::string, int> attempts_;
  HookServer server_{[this](const ReceivedWebhook& w, size_t) { return answer(w); }};
};

// One stub and one stack (every mode, llm engine) for the module.
struct World {
  static World* instance;
  LlmStub stub;
  TaskHooks hooks;                       // before the stack: its dispatcher delivers to it
  std::vector<std::string> async_tasks;  // every task submit() created
  std::unique_ptr<Stack> stack;
  Key key;
  World() {
    eq::it::StackOptions opts;
    opts.env = {{"EQ_ENGINE", "llm"},
                {"EQ_LLM_BASE_URL", stub.baseUrl()},
                {"EQ_LLM_MODEL", "stub-model"},
                {"EQ_LLM_MODEL_PERFECT", "stub-perfect-model"},
                {"EQ_LLM_API_KEY", "sk-test"},
                {"EQ_LLM_TIMEOUT_MS", std::to_string(kTimeoutMs)},
                {"EQ_LLM_TIMEOUT_MS_STANDARD", std::to_string(kStandardTimeoutMs)},
                {"EQ_LLM_MAX_RETRIES", "2"},
                {"EQ_WORKER_CONCURRENCY", "8"},
                {"EQ_WEBHOOK_RETRY_SCHEDULE", "0.2,0.2,0.2"}};
    stack = std::make_unique<Stack>(opts);
    key = createKey(*stack, "llm", {"--rate", "100000"});
    instance = this;
  }
  ~World() {
    BOOST_CHECK_MESSAGE(stack->stopAll(), "every process exits with status 0 on SIGTERM");
    instance = nullptr;
  }
};
World* World::instance = nullptr;
BOOST_TEST_GLOBAL_FIXTURE(World);

Stack& stack() { return *World::instance->stack; }
const Key& key() { return World::instance->key; }
LlmStub& stub() { return World::instance->stub; }

std::string replyBody(const std::string& mode, const std::string& message, int count,
                      const std::string& webhook_url = "") {
  std::string body = R"({"mode":")" + mode + R"(","message":)" + jsonString(message) +
                     R"(,"reply_count":)" + std::to_string(count);
  if (!webhook_url.empty()) body += R"(,"webhook_url":)" + jsonString(webhook_url);
  return body + "}";
}

// Polls an async task until it is final; returns the task's data.
rapidjson::Document waitForTask(const std::string& task_id) {
  rapidjson::Document t;
  for (int i = 0; i < 300; ++i) {
    t = eq::it::parse(eq::it::get(stack(), "/api/v1/task/" + task_id, &key()));
    std::string status = t["data"]["status"].GetString();
    if (status == "succeeded" || status == "failed") return t;
    eq::it::sleepMs(100);
  }
  BOOST_FAIL("task " << task_id << " never finished");
  return t;
}

// An async call with the module's webhook URL; returns its task id.
std::string submit(const std::string& mode, const std::string& message) {
  HttpResult r = eq::it::post(stack(), "/api/v1/reply/async",
                              replyBody(mode, message, 1, World::instance->hooks.url()), key());
  BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
  std::string task_id = eq::it::parse(r)["data"]["task_id"].GetString();
  World::instance->async_tasks.push_back(task_id);
  return task_id;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(llm_engine)

BOOST_AUTO_TEST_CASE(fast_is_one_schema_call_with_the_configured_model_and_key) {
  HttpResult r = eq::it::post(stack(), "/api/v1/reply",
                              replyBody("fast", "[good] 今天加班到十点，好累", 3), key());
  BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
  rapidjson::Document d = eq::it::parse(r);
  const rapidjson::Value& replies = d["data"]["replies"];
  BOOST_REQUIRE_EQUAL(replies.Size(), 3u);
  for (rapidjson::SizeType i = 1; i < replies.Size(); ++i) {
    BOOST_TEST(replies[i - 1]["score"].GetDouble() >= replies[i]["score"].GetDouble());
  }
  BOOST_TEST(d["data"]["tokens_used"].GetInt() == kTokensPerCall);

  std::vector<StubCall> calls = stub().callsFor("[good] 今天加班");
  BOOST_REQUIRE_EQUAL(calls.size(), 1u);
  BOOST_TEST(calls[0].schema == "replies");
  BOOST_TEST(calls[0].items == 3);
  BOOST_TEST(calls[0].model == "stub-model");
  BOOST_TEST(calls[0].authorization == "Bearer sk-test");
  BOOST_TEST(calls[0].user.find("今天加班到十点，好累") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(standard_analyzes_then_generates_on_the_analysis) {
  HttpResult r = eq::it::post(stack(), "/api/v1/reply",
                              replyBody("standard", "[good] 你是不是不想理我了", 2), key());
  BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
  rapidjson::Document d = eq::it::parse(r);
  BOOST_TEST(d["data"]["replies"].Size() == 2u);
  BOOST_TEST(d["data"]["tokens_used"].GetInt() == 2 * kTokensPerCall);

  std::vector<StubCall> calls = stub().callsFor("[good] 你是不是不想理我了");
  BOOST_REQUIRE_EQUAL(calls.size(), 2u);
  BOOST_TEST(calls[0].schema == "analysis");
  BOOST_TEST(calls[1].schema == "replies");
  BOOST_TEST(calls[1].user.find("被理解和陪伴") != std::string::npos, "analysis passed on");
  BOOST_TEST(calls[1].system.find("different strategy") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(perfect_generates_per_strategy_then_follows_the_judge) {
  HttpResult r = eq::it::post(stack(), "/api/v1/reply",
                              replyBody("perfect", "[good] 我们分手吧", 2), key());
  BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
  rapidjson::Document d = eq::it::parse(r);
  const rapidjson::Value& replies = d["data"]["replies"];
  BOOST_REQUIRE_EQUAL(replies.Size(), 2u);

  std::vector<StubCall> calls = stub().callsFor("[good] 我们分手吧");
  // analysis + one generation per strategy (reply_count + 1, at least 3) + judge
  BOOST_REQUIRE_EQUAL(calls.size(), 5u);
  BOOST_TEST(d["data"]["tokens_used"].GetInt() == 5 * kTokensPerCall);
  std::set<std::string> strategies;
  for (const StubCall& c : calls) {
    BOOST_TEST(c.model == "stub-perfect-model", "the perfect mode's model override");
    if (c.schema != "replies") continue;
    BOOST_TEST(c.items == 1);
    size_t at = c.system.find("Use this strategy: ");
    BOOST_REQUIRE(at != std::string::npos);
    strategies.insert(c.system.substr(at + 19, c.system.find(' ', at + 19) - at - 19));
  }
  BOOST_TEST(strategies.size() == 3u, "three different strategies");
  const StubCall& judge = calls.back();
  BOOST_REQUIRE(judge.schema == "judge");
  BOOST_TEST(judge.items == 3);
  // The stub's judge ranks candidate 3 first: its text must lead.
  size_t line = judge.user.find("\n3. [");
  BOOST_REQUIRE(line != std::string::npos);
  std::string third = judge.user.substr(line + 1, judge.user.find('\n', line + 1) - line - 1);
  std::string text = replies[0]["text"].GetString();
  BOOST_TEST(third.find(text) != std::string::npos, third << " vs " << text);
  std::string why = replies[0]["eq_analysis"].GetString();
  BOOST_TEST(why.find("理由3") != std::string::npos, why);
  BOOST_TEST(why.find("共情比说教更稳妥") != std::string::npos, why);
  BOOST_TEST(replies[0]["score"].GetDouble() > replies[1]["score"].GetDouble());
}

BOOST_AUTO_TEST_CASE(a_malformed_answer_is_repaired_once) {
  HttpResult r = eq::it::post(stack(), "/api/v1/reply",
                              replyBody("fast", "[malformed-once] 晚安", 1), key());
  BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
  BOOST_TEST(eq::it::parse(r)["data"]["tokens_used"].GetInt() == 2 * kTokensPerCall);
  std::vector<StubCall> calls = stub().callsFor("[malformed-once] 晚安");
  BOOST_REQUIRE_EQUAL(calls.size(), 2u);
  const auto& repair = calls[1].messages;
  BOOST_REQUIRE_EQUAL(repair.size(), 4u);
  BOOST_TEST(repair[2].first == "assistant");
  BOOST_TEST(repair[2].second.find("unterminated") != std::string::npos);
  BOOST_TEST(repair[3].second.find("not valid JSON") != std::string::npos, repair[3].second);
}

BOOST_AUTO_TEST_CASE(an_answer_still_malformed_after_repair_fails_and_refunds) {
  int64_t before = eq::it::quotaOf(stack(), key(), "fast");
  HttpResult r =
      eq::it::post(stack(), "/api/v1/reply", replyBody("fast", "[malformed] 在吗", 1), key());
  BOOST_TEST(r.status == 500, r.body);
  BOOST_TEST(r.body.find("refunded") != std::string::npos, r.body);
  BOOST_TEST(stub().callsFor("[malformed] 在吗").size() == 2u, "one call and one repair");
  BOOST_TEST(eq::it::quotaOf(stack(), key(), "fast") == before);
}

BOOST_AUTO_TEST_CASE(server_errors_are_retried_then_the_task_fails_and_refunds) {
  int64_t before = eq::it::quotaOf(stack(), key(), "fast");
  std::string task = submit("fast", "[500] 周末有空吗");
  rapidjson::Document t = waitForTask(task);
  BOOST_TEST(std::string(t["data"]["status"].GetString()) == "failed");
  BOOST_TEST(stub().callsFor("[500] 周末有空吗").size() == 3u, "one call and two retries");
  // With no Retry-After the engine backs off 0.5 s, then 1 s.
  std::vector<int64_t> at = stub().arrivalsFor("[500] 周末有空吗");
  BOOST_REQUIRE_EQUAL(at.size(), 3u);
  BOOST_TEST(at[1] - at[0] >= 450, "first backoff " << at[1] - at[0] << " ms");
  BOOST_TEST(at[2] - at[1] >= 950, "second backoff " << at[2] - at[1] << " ms");
  BOOST_TEST(eq::it::quotaOf(stack(), key(), "fast") == before);
}

BOOST_AUTO_TEST_CASE(a_429_is_retried_after_retry_after) {
  std::string task = submit("fast", "[429-once] 我升职了！");
  rapidjson::Document t = waitForTask(task);
  BOOST_TEST(std::string(t["data"]["status"].GetString()) == "succeeded");
  BOOST_TEST(t["data"]["result"]["tokens_used"].GetInt() == kTokensPerCall, "429s cost nothing");
  BOOST_TEST(stub().callsFor("[429-once] 我升职了！").size() == 2u);
  std::vector<int64_t> at = stub().arrivalsFor("[429-once] 我升职了！");
  BOOST_REQUIRE_EQUAL(at.size(), 2u);
  BOOST_TEST(at[1] - at[0] >= 950, "Retry-After: 1 honoured, waited " << at[1] - at[0] << " ms");
}

// Standard mode has its own, shorter timeout (EQ_LLM_TIMEOUT_MS_STANDARD).
BOOST_AUTO_TEST_CASE(a_stalled_server_times_out_once_and_the_task_fails_and_refunds) {
  int64_t before = eq::it::quotaOf(stack(), key(), "standard");
  std::string task = submit("standard", "[stall] 你怎么还不回消息");
  rapidjson::Document t = waitForTask(task);
  BOOST_TEST(std::string(t["data"]["status"].GetString()) == "failed");
  BOOST_TEST(stub().callsFor("[stall] 你怎么还不回消息").size() == 1u, "timeouts are not retried");
  BOOST_TEST(eq::it::quotaOf(stack(), key(), "standard") == before);
}

BOOST_AUTO_TEST_CASE(analyze_uses_the_model) {
  HttpResult r = eq::it::post(stack(), "/api/v1/analyze",
                              R"({"message":"[good] 最近总是睡不着"})", key());
  BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
  rapidjson::Document d = eq::it::parse(r);
  BOOST_TEST(std::string(d["data"]["emotion"].GetString()) == "sadness");
  BOOST_TEST(std::string(d["data"]["relationship_stage"].GetString()) == "dating");
  BOOST_TEST(stub().callsFor("[good] 最近总是睡不着").at(0).schema == "analysis");
}

BOOST_AUTO_TEST_CASE(one_worker_holds_many_model_calls_in_flight) {
  // One fast worker with EQ_WORKER_CONCURRENCY=8: six tasks must reach the
  // model server together. A worker running jobs one by one would show 1.
  std::vector<std::string> tasks;
  for (int i = 0; i < kHoldTarget; ++i) tasks.push_back(submit("fast", "[hold] 第" + std::to_string(i) + "条"));
  for (const std::string& task : tasks) {
    BOOST_TEST(std::string(waitForTask(task)["data"]["status"].GetString()) == "succeeded");
  }
  BOOST_TEST(stub().maxInFlight() == kHoldTarget);
}

BOOST_AUTO_TEST_CASE(sigterm_lets_a_running_model_call_finish) {
  std::string task = submit("fast", "[slow] 明天见");
  // Wait until the worker is inside the model call, then stop it.
  for (int i = 0; i < 100 && stub().callsFor("[slow] 明天见").empty(); ++i) eq::it::sleepMs(20);
  BOOST_REQUIRE(!stub().callsFor("[slow] 明天见").empty());
  eq::it::Process* worker = stack().process("worker-fast");
  BOOST_REQUIRE(worker != nullptr);
  BOOST_TEST(worker->terminate(10'000) == 0, "clean exit after finishing the job");
  rapidjson::Document t = waitForTask(task);
  BOOST_TEST(std::string(t["data"]["status"].GetString()) == "succeeded");
  BOOST_TEST(stub().callsFor("[slow] 明天见").size() == 1u, "finished, not redelivered");
  stack().spawn("worker-fast", {"eq-worker", "--mode", "fast", "--analyze"});
}

BOOST_AUTO_TEST_CASE(one_worker_at_concurrency_64_keeps_the_model_busy) {
  // Issue 10: with EQ_WORKER_CONCURRENCY=64 one worker holds (nearly) all
  // 64 calls at the model server at once, because its prefetch (twice the
  // concurrency) has the next jobs in hand before slots free up. The
  // module's fast worker steps aside, so this worker gets every job. The
  // throughput this buys (jobs/s against a 500 ms model) is measured by
  // bench/llm_throughput, not here.
  eq::it::Process* old = stack().process("worker-fast");
  BOOST_REQUIRE(old != nullptr);
  // The case before respawned it into the same log: wait for that second
  // start to be consuming (and so to handle SIGTERM) before stopping it.
  for (int64_t until = eq::it::nowMs() + 20000; eq::it::nowMs() < until; eq::it::sleepMs(50)) {
    std::string log = logTail(old->logPath(), std::string::npos);
    size_t first = log.find("worker consuming");
    if (first != std::string::npos && log.find("worker consuming", first + 1) != std::string::npos) {
      break;
    }
  }
  int rc = old->terminate(10'000);
  BOOST_REQUIRE_MESSAGE(rc == 0, "worker-fast exited " << rc << ": "
                                     << logTail(old->logPath()));
  eq::it::Process* wide =
      stack().spawn("worker-fast-64", {"eq-worker", "--mode", "fast", "--analyze"},
                    {{"EQ_WORKER_CONCURRENCY", std::to_string(kWideConcurrency)}});
  wide->waitForLog("worker consuming", 20000);
  stub().setHoldTarget(kWideHoldTarget);
  std::vector<std::string> tasks;
  for (int i = 0; i < kWideConcurrency; ++i) {
    tasks.push_back(submit("fast", "[hold] 宽" + std::to_string(i) + "条"));
  }
  for (const std::string& task : tasks) {
    BOOST_TEST(std::string(waitForTask(task)["data"]["status"].GetString()) == "succeeded");
  }
  BOOST_TEST(stub().maxInFlight() >= kWideHoldTarget,
             stub().maxInFlight() << " model calls in flight at most");
  stub().setHoldTarget(kHoldTarget);
  BOOST_TEST(wide->terminate(10'000) == 0);
  stack().spawn("worker-fast", {"eq-worker", "--mode", "fast", "--analyze"});
}

// Last of the suite: every async task above (succeeded or failed) had its
// webhook delivered, after exactly one failed attempt where the receiver
// asked for it and at the first attempt otherwise.
BOOST_AUTO_TEST_CASE(every_async_task_got_its_webhook) {
  const std::vector<std::string>& tasks = World::instance->async_tasks;
  BOOST_REQUIRE(tasks.size() > static_cast<size_t>(kWideConcurrency));
  int retried = 0;
  for (const std::string& task : tasks) {
    rapidjson::Document t;
    std::string status;
    for (int i = 0; i < 200 && status != "delivered"; ++i) {
      if (i > 0) eq::it::sleepMs(50);
      t = eq::it::parse(eq::it::get(stack(), "/api/v1/task/" + task, &key()));
      const rapidjson::Value& hook = t["data"]["webhook"];
      BOOST_REQUIRE(hook.IsObject());
      status = hook["status"].GetString();
    }
    BOOST_TEST(status == "delivered", task);
    int expected = TaskHooks::failsFirst(task) ? 2 : 1;
    retried += expected - 1;
    BOOST_TEST(t["data"]["webhook"]["attempts"].GetInt() == expected, task);
    BOOST_TEST(World::instance->hooks.attempts(task) == expected, task);
  }
  BOOST_TEST_MESSAGE(tasks.size() << " task webhooks delivered, " << retried
                                  << " of them after a failed attempt");
  BOOST_TEST(retried > 0);
}

BOOST_AUTO_TEST_SUITE_END()

// The fallback to the built-in analysis, only when configured.
BOOST_AUTO_TEST_CASE(analysis_falls_back_to_builtin_only_when_configured) {
  eq::it::StackOptions opts;
  opts.worker_modes = {"fast"};  // the fast worker also serves analyze
  opts.env = {{"EQ_ENGINE", "llm"},
              {"EQ_LLM_BASE_URL", stub().baseUrl()},
              {"EQ_LLM_MODEL", "stub-model"},
              {"EQ_LLM_FALLBACK", "builtin"}};
  Stack fallback(opts);
  Key k = eq::it::createKey(fallback, "fallback");
  HttpResult r = eq::it::post(fallback, "/api/v1/analyze",
                              R"({"message":"[malformed] 太开心了，我考上研究生了！"})", k);
  BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
  BOOST_TEST(std::string(eq::it::parse(r)["data"]["emotion"].GetString()) == "joy",
             "the built-in analysis");
  // Without the fallback (the module's stack) the same failure is an error.
  HttpResult e = eq::it::post(stack(), "/api/v1/analyze",
                              R"({"message":"[malformed] 太开心了，我考上研究生了！"})", key());
  BOOST_TEST(e.status == 500, e.body);
  BOOST_TEST(fallback.stopAll());
}
