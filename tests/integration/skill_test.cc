// The agent-skill package (integrations/skill/) against a real stack: the
// script an agent runs is exercised command by command, and what it reported
// is checked against the HTTP API (the quota moved by exactly the calls that
// charge, the task exists, the webhook arrived). Errors must come back as the
// script's JSON with the exit status SKILL.md promises.
#include <rapidjson/document.h>

#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "tests/integration/stack.h"

using namespace eq::it;

namespace {

struct Run {
  int rc = -1;
  rapidjson::Document out;  // the one JSON object the script printed
  std::string log;          // stdout and stderr, for messages
};

// scripts/eqreply.py started with the given arguments as the key's owner;
// `url` overrides the stack's address.
struct Started {
  std::unique_ptr<Process> process;
  std::string log_path;
};

Started startEqreply(Stack& stack, const std::string& api_key, const std::vector<std::string>& args,
                     std::string url = "") {
  static int n = 0;
  const char* src = std::getenv("EQ_SOURCE_DIR");
  BOOST_REQUIRE_MESSAGE(src != nullptr, "EQ_SOURCE_DIR is not set");
  std::vector<std::string> argv = {"/usr/bin/env", "python3",
                                   std::string(src) + "/integrations/skill/scripts/eqreply.py"};
  argv.insert(argv.end(), args.begin(), args.end());
  if (url.empty()) url = stack.url("");
  Started s;
  s.log_path = stack.dir() + "/eqreply-" + std::to_string(++n) + ".log";
  s.process = std::make_unique<Process>(
      "eqreply", argv,
      std::map<std::string, std::string>{{"EQ_API_URL", url}, {"EQ_API_KEY", api_key}}, s.log_path);
  return s;
}

// Waits for a started script and reads its answer.
Run finish(Started& s) {
  Run r;
  r.rc = s.process->wait(240'000);
  r.log = readFile(s.log_path);
  // Diagnostics go to stderr prefixed "eqreply: "; the answer is the one
  // line that is a JSON object.
  std::istringstream lines(r.log);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("{")) r.out.Parse(line.c_str());
  }
  BOOST_REQUIRE_MESSAGE(r.out.IsObject(), "no JSON answer from eqreply.py:\n" << r.log);
  return r;
}

Run eqreply(Stack& stack, const std::string& api_key, const std::vector<std::string>& args,
            std::string url = "") {
  Started s = startEqreply(stack, api_key, args, std::move(url));
  return finish(s);
}

int count(const std::string& s, const std::string& part) {
  int n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(skill)

BOOST_AUTO_TEST_CASE(the_script_drives_every_endpoint_and_reports_errors_as_skill_md_says) {
  StackOptions o;
  o.worker_modes = {"fast", "perfect"};  // fast also analyzes
  Stack stack(o);
  Key key = createKey(stack, "skill");

  Run quota = eqreply(stack, key.api_key, {"quota"});
  BOOST_REQUIRE_MESSAGE(quota.rc == 0, quota.log);
  BOOST_TEST(quota.out["ok"].GetBool());
  BOOST_TEST(quota.out["data"]["quota"]["fast"].GetInt64() == 100);

  // A sync reply with three candidates, in the message's language.
  Run reply = eqreply(stack, key.api_key,
                      {"reply", "周末有空吗？想约你看电影", "--scene", "dating", "--context",
                       "刚认识两周", "--count", "3"});
  BOOST_REQUIRE_MESSAGE(reply.rc == 0, reply.log);
  const rapidjson::Value& data = reply.out["data"];
  BOOST_TEST(data["replies"].Size() == 3u);
  BOOST_TEST(std::string(data["mode"].GetString()) == "fast");
  BOOST_TEST(quotaOf(stack, key, "fast") == 99);

  // The same Idempotency-Key and body answer the first response, charged once.
  std::vector<std::string> idem = {"reply", "I got the job!", "--idempotency-key", "skill-1"};
  Run first = eqreply(stack, key.api_key, idem);
  Run again = eqreply(stack, key.api_key, idem);
  BOOST_REQUIRE_MESSAGE(first.rc == 0 && again.rc == 0, first.log << again.log);
  BOOST_TEST(std::string(first.out["data"]["request_id"].GetString()) ==
             again.out["data"]["request_id"].GetString());
  BOOST_TEST(quotaOf(stack, key, "fast") == 98);

  // Analyze is free.
  Run analysis = eqreply(stack, key.api_key, {"analyze", "你是不是根本不在乎我"});
  BOOST_REQUIRE_MESSAGE(analysis.rc == 0, analysis.log);
  BOOST_TEST(analysis.out["data"]["intensity"].GetDouble() >= 0.0);
  BOOST_TEST(analysis.out["data"].HasMember("suggested_strategy"));
  BOOST_TEST(quotaOf(stack, key, "fast") == 98);

  // perfect, async, with a webhook to the test's receiver, polled to the end.
  size_t hooks = stack.receiver.received().size();
  std::string hook = "http://127.0.0.1:" + std::to_string(stack.receiver.port()) + "/hook";
  Run task = eqreply(stack, key.api_key,
                     {"reply", "We should just be friends.", "--mode", "perfect", "--scene",
                      "breakup", "--async", "--webhook-url", hook, "--wait", "--timeout", "120"});
  BOOST_REQUIRE_MESSAGE(task.rc == 0, task.log);
  BOOST_TEST(std::string(task.out["data"]["status"].GetString()) == "succeeded");
  BOOST_TEST(task.out["data"]["result"]["replies"].Size() == 1u);
  std::string task_id = task.out["data"]["task_id"].GetString();
  BOOST_TEST(quotaOf(stack, key, "perfect") == 99);
  BOOST_REQUIRE_MESSAGE(stack.receiver.waitFor(hooks + 1, 30'000), "no webhook arrived");
  BOOST_TEST(stack.receiver.received()[hooks].body.find(task_id) != std::string::npos);

  Run polled = eqreply(stack, key.api_key, {"task", task_id});
  BOOST_REQUIRE_MESSAGE(polled.rc == 0, polled.log);
  BOOST_TEST(std::string(polled.out["data"]["status"].GetString()) == "succeeded");

  // Errors: the API's status, a hint, exit 1, and nothing charged.
  Run bad_key = eqreply(stack, "eq_live_" + std::string(43, 'A'), {"quota"});
  BOOST_TEST(bad_key.rc == 1);
  BOOST_TEST(bad_key.out["status"].GetInt() == 401);
  BOOST_TEST(!bad_key.out["retryable"].GetBool());
  BOOST_TEST(std::string(bad_key.out["request_id"].GetString()).size() > 0u);

  Run too_long = eqreply(stack, key.api_key, {"reply", std::string(2001, 'x')});
  BOOST_TEST(too_long.rc == 1);
  BOOST_TEST(too_long.out["status"].GetInt() == 400);
  BOOST_TEST(std::string(too_long.out["msg"].GetString()).find("message") != std::string::npos);
  BOOST_TEST(quotaOf(stack, key, "fast") == 98);

  Run missing = eqreply(stack, key.api_key, {"task", "tsk_doesnotexist"});
  BOOST_TEST(missing.rc == 1);
  BOOST_TEST(missing.out["status"].GetInt() == 404);

  // A key limited to 2 requests a minute: the third is a 429 with
  // Retry-After, reported (not retried) with --retries 0.
  Key slow = createKey(stack, "skill-slow", {"--rate", "2"});
  // The three calls in one rate window (a UTC minute), or the third would
  // open a new one and pass.
  waitForMinuteRoom(15'000);
  for (int i = 0; i < 2; ++i) BOOST_TEST(eqreply(stack, slow.api_key, {"quota"}).rc == 0);
  Run limited = eqreply(stack, slow.api_key, {"--retries", "0", "quota"});
  BOOST_TEST(limited.rc == 1);
  BOOST_TEST(limited.out["status"].GetInt() == 429);
  BOOST_TEST(limited.out["retryable"].GetBool());
  BOOST_TEST(limited.out["retry_after"].GetInt() > 0);

  // A service that cannot be reached (a port nothing listens on): exit 3.
  int fd = -1;
  std::string closed = "http://127.0.0.1:" + std::to_string(refusingPort(&fd));
  Run down = eqreply(stack, key.api_key, {"--retries", "0", "quota"}, closed);
  ::close(fd);
  BOOST_TEST(down.rc == 3);
  BOOST_TEST(down.out["retryable"].GetBool());
}

// SKILL.md: "429 and 503 are retried after the server's Retry-After".
BOOST_AUTO_TEST_CASE(the_script_retries_a_503_and_a_429_after_retry_after) {
  StackOptions o;
  o.worker_modes = {"fast"};
  o.dispatcher = false;
  Stack stack(o);
  Key key = createKey(stack, "skill-retry");
  int64_t before = quotaOf(stack, key, "fast");

  // A 503 that clears: the test holds the database's write lock, so the
  // first attempt is refused (eq-api writes nothing then); once the script
  // says it will retry, the lock goes and a retry succeeds. The lock is
  // released on the script's word, not after a sleep, and the retries left
  // absorb a slow release. Every attempt carries the same Idempotency-Key,
  // so the unit is charged once.
  {
    DbWriteLock lock(stack);
    Started s = startEqreply(stack, key.api_key, {"reply", "今天加班到十点，好累"});
    s.process->waitForLog("eqreply: retrying POST /api/v1/reply in 1 s (attempt 2)", 30'000);
    lock.release();
    Run r = finish(s);
    BOOST_REQUIRE_MESSAGE(r.rc == 0, r.log);
    BOOST_TEST(r.out["ok"].GetBool());
    BOOST_TEST(r.out["data"]["replies"].Size() == 1u);
  }
  BOOST_TEST(quotaOf(stack, key, "fast") == before - 1, "charged once across the retries");

  // A 429: a key of one request a minute, used up. The script waits
  // Retry-After capped by --max-wait (1 s here, while the window has longer
  // to run), retries --retries times, then reports the 429. The window is
  // used up early in a fresh minute, so that the retries cannot reach the
  // next one.
  Key slow = createKey(stack, "skill-limited", {"--rate", "1"});
  for (int tries = 0;; ++tries) {
    HttpResult first = get(stack, "/api/v1/quota", &slow);
    BOOST_REQUIRE_MESSAGE(first.status == 200 || first.status == 429, first.body);
    int reset = std::stoi(first.headers["x-ratelimit-reset"]);
    if (first.status == 200 && reset >= 20) break;
    BOOST_REQUIRE_MESSAGE(tries < 3, "could not start a fresh rate window");
    sleepMs((reset + 1) * 1000LL);
  }
  Run limited = eqreply(stack, slow.api_key, {"--retries", "2", "--max-wait", "1", "quota"});
  BOOST_TEST(limited.rc == 1, limited.log);
  BOOST_TEST(limited.out["status"].GetInt() == 429);
  BOOST_TEST(limited.out["retry_after"].GetInt() > 1, "the server's Retry-After, uncapped");
  BOOST_TEST(count(limited.log, "eqreply: retrying GET /api/v1/quota in 1 s") == 2, limited.log);
  BOOST_TEST(count(limited.log, "(attempt 3)") == 1, limited.log);

  // 400, 401, 402, 404 and 409 need another request: never retried.
  Run bad = eqreply(stack, key.api_key, {"--max-wait", "1", "reply", std::string(2001, 'x')});
  BOOST_TEST(bad.out["status"].GetInt() == 400);
  BOOST_TEST(count(bad.log, "retrying") == 0, bad.log);
}

BOOST_AUTO_TEST_SUITE_END()
