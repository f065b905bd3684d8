// The agent-skill package (integrations/skill/) against a real stack: the
// script an agent runs is exercised command by command, and what it reported
// is checked against the HTTP API (the quota moved by exactly the calls that
// charge, the task exists, the webhook arrived). Errors must come back as the
// script's JSON with the exit status SKILL.md promises.
#include <rapidjson/document.h>

#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <sstream>

#include "tests/integration/stack.h"

using namespace eq::it;

namespace {

struct Run {
  int rc = -1;
  rapidjson::Document out;  // the one JSON object the script printed
  std::string log;          // stdout and stderr, for messages
};

// Runs scripts/eqreply.py with the given arguments as the key's owner.
// `url` overrides the stack's address.
Run eqreply(Stack& stack, const std::string& api_key, const std::vector<std::string>& args,
            std::string url = "") {
  static int n = 0;
  const char* src = std::getenv("EQ_SOURCE_DIR");
  BOOST_REQUIRE_MESSAGE(src != nullptr, "EQ_SOURCE_DIR is not set");
  std::vector<std::string> argv = {"/usr/bin/env", "python3",
                                   std::string(src) + "/integrations/skill/scripts/eqreply.py"};
  argv.insert(argv.end(), args.begin(), args.end());
  if (url.empty()) url = stack.url("");
  std::string log_path = stack.dir() + "/eqreply-" + std::to_string(++n) + ".log";
  Process p("eqreply", argv, {{"EQ_API_URL", url}, {"EQ_API_KEY", api_key}}, log_path);
  Run r;
  r.rc = p.wait(240'000);
  r.log = readFile(log_path);
  // Diagnostics go to stderr prefixed "eqreply: "; the answer is the one
  // line that is a JSON object.
  std::istringstream lines(r.log);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("{")) r.out.Parse(line.c_str());
  }
  BOOST_REQUIRE_MESSAGE(r.out.IsObject(), "no JSON answer from eqreply.py:\n" << r.log);
  return r;
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

BOOST_AUTO_TEST_SUITE_END()
