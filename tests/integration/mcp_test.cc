// eq-mcp end to end: the official MCP TypeScript SDK client (tests/mcp/,
// installed by scripts/test from its lock file) drives the real eq-mcp over
// stdio against a real stack. The node script checks the protocol side and
// every tool; this test gives it a stack and a key, and then checks against
// the HTTP API that what the tools reported really happened (the task
// exists and succeeded, the quota moved by exactly the calls made).
#include <rapidjson/document.h>

#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tests/integration/stack.h"

namespace {

std::string envOrFail(const char* name) {
  const char* v = std::getenv(name);
  BOOST_REQUIRE_MESSAGE(v != nullptr && *v != '\0',
                        name << " is not set: run the integration tests through scripts/test");
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mcp)

BOOST_AUTO_TEST_CASE(sdk_client_drives_every_tool_over_stdio) {
  std::string src = envOrFail("EQ_SOURCE_DIR");
  std::string bin = envOrFail("EQ_BIN_DIR");
  eq::it::StackOptions o;
  o.worker_modes = {"fast", "perfect"};  // fast also analyzes
  eq::it::Stack stack(o);
  eq::it::Key key = eq::it::createKey(stack, "mcp");
  std::string api_url = stack.url("");
  while (!api_url.empty() && api_url.back() == '/') api_url.pop_back();

  std::string log = stack.dir() + "/mcp-client.log";
  int64_t started = eq::it::nowMs();
  eq::it::Process client(
      "mcp-client", {"/usr/bin/env", "node", src + "/tests/mcp/client.mjs"},
      {{"EQ_MCP_BIN", bin + "/eq-mcp"}, {"EQ_API_URL", api_url}, {"EQ_API_KEY", key.api_key}}, log);
  int rc = client.wait(180'000);
  std::string out = eq::it::readFile(log);
  BOOST_TEST_MESSAGE("mcp client finished in " << eq::it::nowMs() - started << " ms");
  BOOST_REQUIRE_MESSAGE(rc == 0, "node tests/mcp/client.mjs exited with " << rc << ":\n" << out);
  // The steps the script passed, for the test log (--log_level=message).
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("mcp-e2e: ")) BOOST_TEST_MESSAGE(line);
  }

  // The summary line the script prints last.
  size_t at = out.rfind("{\"ok\":true");
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, "no summary line in:\n" << out);
  rapidjson::Document summary;
  summary.Parse(out.substr(at, out.find('\n', at) - at).c_str());
  BOOST_REQUIRE(summary.IsObject());

  // The async task the client polled to completion, seen through the API.
  std::string task_id = summary["task_id"].GetString();
  rapidjson::Document task = eq::it::parse(eq::it::get(stack, "/api/v1/task/" + task_id, &key));
  BOOST_TEST(std::string(task["data"]["status"].GetString()) == "succeeded");
  BOOST_TEST(std::string(task["data"]["mode"].GetString()) == "perfect");

  // One fast call and one perfect call were charged; the failed ones and
  // analyze were not. The quota the tools reported is the API's.
  const rapidjson::Value& before = summary["quota_before"];
  BOOST_TEST(eq::it::quotaOf(stack, key, "fast") == before["fast"].GetInt64() - 1);
  BOOST_TEST(eq::it::quotaOf(stack, key, "perfect") == before["perfect"].GetInt64() - 1);
  BOOST_TEST(eq::it::quotaOf(stack, key, "standard") == before["standard"].GetInt64());
  BOOST_TEST(before["fast"].GetInt64() == 100);  // a new key's units (docs/contract.md §4)
}

BOOST_AUTO_TEST_SUITE_END()
