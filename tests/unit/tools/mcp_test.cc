// eq-mcp's protocol logic (tools/mcp/): JSON-RPC framing and errors, the
// lifecycle and version negotiation, batches, the tool definitions, and how
// tool calls map onto the HTTP API and back, against a scripted transport.
#include <fcntl.h>
#include <rapidjson/document.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/json.h"
#include "tools/mcp/config.h"
#include "tools/mcp/server.h"
#include "tools/mcp/stdio.h"
#include "tests/unit/hostile_numbers.h"

using namespace eq;
using namespace eq::mcp;

namespace {

struct SentRequest {
  std::string method, path, body;
  std::vector<std::string> headers;
};

// Answers each request with the next scripted answer and records what was
// sent; an empty script answers like a refused connection.
class FakeTransport : public ApiTransport {
 public:
  Result<ApiResponse> send(const std::string& method, const std::string& path,
                           const std::string& body,
                           const std::vector<std::string>& headers) override {
    sent.push_back({method, path, body, headers});
    if (answers.empty()) return Status(503, "cannot reach the EQ Reply API (EQ_API_URL): refused");
    Result<ApiResponse> r = answers.front();
    answers.pop_front();
    return r;
  }
  void answer(long status, std::string body, std::string retry_after = "",
              std::string request_id = "") {
    ApiResponse r;
    r.status = status;
    r.body = std::move(body);
    r.retry_after = std::move(retry_after);
    r.request_id = std::move(request_id);
    answers.push_back(r);
  }
  std::deque<Result<ApiResponse>> answers;
  std::vector<SentRequest> sent;
};

rapidjson::Document parseJson(const std::string& text) {
  rapidjson::Document d;
  BOOST_REQUIRE_MESSAGE(json::parse(text, &d, 64).isOk(), "not JSON: " << text);
  return d;
}

struct Session {
  FakeTransport api;
  McpServer server{api, "http://api.test"};

  rapidjson::Document rpc(const std::string& line) {
    std::string out = server.handleLine(line);
    BOOST_REQUIRE_MESSAGE(!out.empty(), "no response to " << line);
    BOOST_TEST(out.find('\n') == std::string::npos);  // one message per line
    return parseJson(out);
  }
  rapidjson::Document init(const std::string& version = "2025-06-18") {
    rapidjson::Document d = rpc(R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{)"
                                R"("protocolVersion":")" +
                                version +
                                R"(","capabilities":{},"clientInfo":{"name":"t",)"
                                R"("version":"1"}}})");
    BOOST_TEST(
        server.handleLine(R"({"jsonrpc":"2.0","method":"notifications/initialized"})").empty());
    return d;
  }
  rapidjson::Document call(const std::string& tool, const std::string& args_json) {
    return rpc(R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":")" + tool +
               R"(","arguments":)" + args_json + "}}");
  }
};

// RapidJSON's deep equality, outside BOOST_TEST's expression templates
// (which cannot pick between RapidJSON's operator== overloads).
bool sameJson(const rapidjson::Value& a, const rapidjson::Value& b) { return a == b; }

int errorCode(const rapidjson::Document& d) {
  BOOST_REQUIRE_MESSAGE(d.HasMember("error"), "expected an error: " << json::toString(d));
  return d["error"]["code"].GetInt();
}

std::string resultText(const rapidjson::Document& d) {
  BOOST_REQUIRE_MESSAGE(d.HasMember("result"), "expected a result: " << json::toString(d));
  return d["result"]["content"][0]["text"].GetString();
}

const rapidjson::Value* toolNamed(const rapidjson::Document& list, const std::string& name) {
  for (const auto& t : list["result"]["tools"].GetArray()) {
    if (name == t["name"].GetString()) return &t;
  }
  return nullptr;
}

constexpr const char* kReplyData =
    R"({"replies":[{"text":"抱抱你","score":0.91,"eq_analysis":"共情"}],"request_id":"req_1",)"
    R"("mode":"fast","tokens_used":12})";

}  // namespace

BOOST_AUTO_TEST_SUITE(mcp)

BOOST_AUTO_TEST_CASE(negotiates_each_supported_version_and_falls_back_to_the_latest) {
  for (const char* v : {"2024-11-05", "2025-03-26", "2025-06-18"}) {
    Session s;
    rapidjson::Document d = s.init(v);
    BOOST_TEST(d["id"].GetInt() == 0);
    BOOST_TEST(std::string(d["result"]["protocolVersion"].GetString()) == v);
    BOOST_TEST(d["result"]["capabilities"]["tools"].IsObject());
    BOOST_TEST(std::string(d["result"]["serverInfo"]["name"].GetString()) == "eq-mcp");
    BOOST_TEST(s.server.clientReady());
  }
  for (const char* v : {"2025-11-25", "2024-10-07", "1999-01-01"}) {
    Session s;
    BOOST_TEST(std::string(s.init(v)["result"]["protocolVersion"].GetString()) == "2025-06-18");
  }
}

BOOST_AUTO_TEST_CASE(lifecycle_errors) {
  Session s;
  // Only ping works before initialize.
  BOOST_TEST(errorCode(s.rpc(R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})")) ==
             rpc::kNotInitialized);
  BOOST_TEST(s.rpc(R"({"jsonrpc":"2.0","id":2,"method":"ping"})")["result"].IsObject());
  BOOST_TEST(errorCode(s.rpc(R"({"jsonrpc":"2.0","id":3,"method":"initialize","params":{}})")) ==
             rpc::kInvalidParams);
  BOOST_TEST(!s.server.initialized());
  s.init();
  BOOST_TEST(errorCode(s.rpc(R"({"jsonrpc":"2.0","id":4,"method":"initialize","params":{)"
                             R"("protocolVersion":"2025-06-18"}})")) == rpc::kInvalidRequest);
  BOOST_TEST(s.rpc(R"({"jsonrpc":"2.0","id":5,"method":"tools/list"})")["result"].IsObject());
}

BOOST_AUTO_TEST_CASE(json_rpc_errors_echo_the_id_when_there_is_one) {
  Session s;
  s.init();
  rapidjson::Document d = s.rpc("{not json");
  BOOST_TEST(errorCode(d) == rpc::kParseError);
  BOOST_TEST(d["id"].IsNull());
  BOOST_TEST(errorCode(s.rpc("\"\xff\"")) == rpc::kParseError);  // invalid UTF-8
  BOOST_TEST(errorCode(s.rpc("42")) == rpc::kInvalidRequest);
  d = s.rpc(R"({"id":"x","method":"ping"})");  // no jsonrpc member
  BOOST_TEST(errorCode(d) == rpc::kInvalidRequest);
  BOOST_TEST(std::string(d["id"].GetString()) == "x");
  BOOST_TEST(errorCode(s.rpc(R"({"jsonrpc":"2.0","id":null,"method":"ping"})")) ==
             rpc::kInvalidRequest);
  BOOST_TEST(errorCode(s.rpc(R"({"jsonrpc":"2.0","id":true,"method":"ping"})")) ==
             rpc::kInvalidRequest);
  BOOST_TEST(errorCode(s.rpc(R"({"jsonrpc":"2.0","id":1,"method":5})")) == rpc::kInvalidRequest);
  d = s.rpc(R"({"jsonrpc":"2.0","id":"abc","method":"resources/list"})");
  BOOST_TEST(errorCode(d) == rpc::kMethodNotFound);
  BOOST_TEST(std::string(d["id"].GetString()) == "abc");
  BOOST_TEST(errorCode(s.rpc(R"({"jsonrpc":"2.0","id":9,"method":"tools/list","params":[1]})")) ==
             rpc::kInvalidParams);
  BOOST_TEST(errorCode(s.rpc(R"({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{}})")) ==
             rpc::kInvalidParams);
  BOOST_TEST(s.api.sent.empty());
}

BOOST_AUTO_TEST_CASE(notifications_and_client_responses_get_no_answer) {
  Session s;
  s.init();
  for (const char* line : {
           R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}})",
           R"({"jsonrpc":"2.0","method":"notifications/whatever"})",
           R"({"jsonrpc":"2.0","method":"tools/call","params":{"name":"get_quota"}})",
           R"({"method":"notifications/initialized"})",
           R"({"jsonrpc":"2.0","id":3,"result":{}})",
           R"({"jsonrpc":"2.0","id":4,"error":{"code":-1,"message":"no"}})",
       }) {
    BOOST_TEST(s.server.handleLine(line).empty(), line);
  }
  BOOST_TEST(s.api.sent.empty());  // a tools/call notification runs nothing
}

BOOST_AUTO_TEST_CASE(batches_only_in_2025_03_26) {
  const std::string batch =
      R"([{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},)"
      R"({"jsonrpc":"2.0","id":"b","method":"nope"},7])";
  {
    Session s;
    BOOST_TEST(errorCode(s.rpc(batch)) == rpc::kInvalidRequest);  // before initialize
    s.init("2025-03-26");
    rapidjson::Document d = s.rpc(batch);
    BOOST_REQUIRE(d.IsArray());
    BOOST_REQUIRE(d.Size() == 3u);  // the notification has no answer
    BOOST_TEST(d[0]["id"].GetInt() == 1);
    BOOST_TEST(d[0]["result"].IsObject());
    BOOST_TEST(std::string(d[1]["id"].GetString()) == "b");
    BOOST_TEST(d[1]["error"]["code"].GetInt() == rpc::kMethodNotFound);
    BOOST_TEST(d[2]["error"]["code"].GetInt() == rpc::kInvalidRequest);
    BOOST_TEST(s.server.handleLine(R"([{"jsonrpc":"2.0","method":"notifications/x"}])").empty());
    BOOST_TEST(errorCode(s.rpc("[]")) == rpc::kInvalidRequest);
    rapidjson::Document init = s.rpc(
        R"([{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}])");
    BOOST_TEST(init[0]["error"]["code"].GetInt() == rpc::kInvalidRequest);
  }
  for (const char* v : {"2024-11-05", "2025-06-18"}) {
    Session s;
    s.init(v);
    rapidjson::Document d = s.rpc(batch);
    BOOST_TEST(errorCode(d) == rpc::kInvalidRequest);
    BOOST_TEST(std::string(d["error"]["message"].GetString()).find(v) != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(tools_list_has_every_tool_with_schemas_for_the_agreed_version) {
  const std::vector<std::string> names = {"generate_reply", "generate_reply_async", "get_task",
                                          "analyze_message", "get_quota"};
  Session s;
  s.init("2025-06-18");
  rapidjson::Document list = s.rpc(R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})");
  BOOST_REQUIRE(list["result"]["tools"].Size() == names.size());
  for (const std::string& n : names) {
    const rapidjson::Value* t = toolNamed(list, n);
    BOOST_REQUIRE_MESSAGE(t != nullptr, n);
    BOOST_TEST(std::string((*t)["inputSchema"]["type"].GetString()) == "object");
    BOOST_TEST(std::string((*t)["outputSchema"]["type"].GetString()) == "object");
    BOOST_TEST((*t)["outputSchema"]["required"].Size() > 0u);
    BOOST_TEST((*t)["description"].GetStringLength() > 20u);
    BOOST_TEST((*t)["annotations"]["readOnlyHint"].IsBool());
  }
  // The input schemas carry the interface's bounds and enums.
  const rapidjson::Value& reply = (*toolNamed(list, "generate_reply"))["inputSchema"];
  BOOST_TEST(reply["properties"]["reply_count"]["minimum"].GetInt() == 1);
  BOOST_TEST(reply["properties"]["reply_count"]["maximum"].GetInt() == 5);
  BOOST_TEST(reply["properties"]["mode"]["enum"].Size() == 3u);
  BOOST_TEST(reply["properties"]["scene"]["enum"].Size() == 9u);
  BOOST_TEST(reply["properties"]["message"]["maxLength"].GetInt() == 2000);
  BOOST_TEST(reply["required"].Size() == 2u);
  BOOST_TEST(!reply["additionalProperties"].GetBool());
  BOOST_TEST(!reply["properties"].HasMember("webhook_url"));
  const rapidjson::Value& async = (*toolNamed(list, "generate_reply_async"))["inputSchema"];
  BOOST_TEST(async["properties"]["webhook_url"]["maxLength"].GetInt() == 2048);
  BOOST_TEST(
      std::string((*toolNamed(list, "get_task"))["inputSchema"]["required"][0].GetString()) ==
      "task_id");
  BOOST_TEST((*toolNamed(list, "get_quota"))["annotations"]["readOnlyHint"].GetBool());
  BOOST_TEST(!(*toolNamed(list, "generate_reply"))["annotations"]["readOnlyHint"].GetBool());
  // Only the tool that takes a webhook_url reaches beyond the service
  // (issue 27): the service POSTs to whatever address it is given.
  for (const std::string& n : names) {
    BOOST_TEST((*toolNamed(list, n))["annotations"]["openWorldHint"].GetBool() ==
                   (n == "generate_reply_async"),
               n);
  }

  Session old;
  old.init("2024-11-05");
  rapidjson::Document l2 = old.rpc(R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})");
  for (const auto& t : l2["result"]["tools"].GetArray()) {
    BOOST_TEST(t.HasMember("inputSchema"));
    BOOST_TEST(!t.HasMember("outputSchema"));
    BOOST_TEST(!t.HasMember("annotations"));
    BOOST_TEST(!t.HasMember("title"));
  }
  Session mid;
  mid.init("2025-03-26");
  rapidjson::Document l3 = mid.rpc(R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})");
  for (const auto& t : l3["result"]["tools"].GetArray()) {
    BOOST_TEST(t.HasMember("annotations"));
    BOOST_TEST(!t.HasMember("outputSchema"));
  }
}

BOOST_AUTO_TEST_CASE(generate_reply_posts_the_arguments_and_returns_the_data) {
  Session s;
  s.init();
  s.api.answer(200, std::string(R"({"code":0,"data":)") + kReplyData + R"(,"msg":"ok"})");
  rapidjson::Document d =
      s.call("generate_reply",
             R"({"mode":"fast","message":"今天好累","reply_count":1,"idempotency_key":"k-1"})");
  BOOST_REQUIRE(s.api.sent.size() == 1u);
  const SentRequest& req = s.api.sent[0];
  BOOST_TEST(req.method == "POST");
  BOOST_TEST(req.path == "/api/v1/reply");
  rapidjson::Document body = parseJson(req.body);
  BOOST_TEST(std::string(body["message"].GetString()) == "今天好累");
  BOOST_TEST(body["reply_count"].GetInt() == 1);
  BOOST_TEST(!body.HasMember("idempotency_key"));  // a header, not a body field
  BOOST_TEST(req.headers == std::vector<std::string>{"Idempotency-Key: k-1"});

  BOOST_TEST(!d["result"]["isError"].GetBool());
  rapidjson::Document want = parseJson(kReplyData);
  BOOST_TEST(sameJson(d["result"]["structuredContent"], want));
  BOOST_TEST(sameJson(parseJson(resultText(d)), want));  // the text block carries the same JSON
}

BOOST_AUTO_TEST_CASE(each_tool_calls_its_endpoint) {
  Session s;
  s.init();
  auto ok = [&](const std::string& data) {
    s.api.answer(200, R"({"code":0,"data":)" + data + R"(,"msg":"ok"})");
  };
  ok(R"({"task_id":"tsk_01JDX0000000000000000000AB","status":"queued"})");
  BOOST_TEST(!s.call("generate_reply_async",
                     R"({"mode":"perfect","message":"hi","webhook_url":"https://h.example/x"})")
                  ["result"]["isError"]
                      .GetBool());
  ok(R"({"task_id":"tsk_01JDX0000000000000000000AB","status":"running"})");
  s.call("get_task", R"({"task_id":"tsk_01JDX0000000000000000000AB"})");
  ok(R"({"emotion":"sadness","intensity":0.7})");
  s.call("analyze_message", R"({"message":"唉"})");
  ok(R"({"quota":{"fast":1,"standard":2,"perfect":3}})");
  s.rpc(R"({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"get_quota"}})");
  BOOST_REQUIRE(s.api.sent.size() == 4u);
  BOOST_TEST(s.api.sent[0].path == "/api/v1/reply/async");
  BOOST_TEST(parseJson(s.api.sent[0].body)["webhook_url"].IsString());
  BOOST_TEST(s.api.sent[1].method == "GET");
  BOOST_TEST(s.api.sent[1].path == "/api/v1/task/tsk_01JDX0000000000000000000AB");
  BOOST_TEST(s.api.sent[2].path == "/api/v1/analyze");
  BOOST_TEST(s.api.sent[3].method == "GET");
  BOOST_TEST(s.api.sent[3].path == "/api/v1/quota");
  BOOST_TEST(s.api.sent[3].body.empty());
}

BOOST_AUTO_TEST_CASE(api_errors_are_tool_errors_with_the_api_message) {
  Session s;
  s.init();
  s.api.answer(
      400, R"({"code":400,"data":null,"msg":"field 'reply_count' must be an integer from 1 to 5"})",
      "", "req_42");
  rapidjson::Document d =
      s.call("generate_reply", R"({"mode":"fast","message":"x","reply_count":9})");
  BOOST_TEST(d["result"]["isError"].GetBool());
  BOOST_TEST(!d["result"].HasMember("structuredContent"));
  std::string text = resultText(d);
  BOOST_TEST(text.find("400") != std::string::npos);
  BOOST_TEST(text.find("field 'reply_count' must be an integer from 1 to 5") != std::string::npos);
  BOOST_TEST(text.find("req_42") != std::string::npos);

  s.api.answer(401, R"({"code":401,"data":null,"msg":"invalid API key"})");
  text = resultText(s.call("get_quota", "{}"));
  BOOST_TEST(text.find("invalid API key") != std::string::npos);
  BOOST_TEST(text.find("EQ_API_KEY") != std::string::npos);

  s.api.answer(429, R"({"code":429,"data":null,"msg":"rate limit exceeded"})", "17");
  text = resultText(s.call("analyze_message", R"({"message":"x"})"));
  BOOST_TEST(text.find("rate limit exceeded") != std::string::npos);
  BOOST_TEST(text.find("Retry after 17 s") != std::string::npos);

  // Not the API at all (a proxy's HTML page).
  s.api.answer(502, "<html>bad gateway</html>");
  d = s.call("get_quota", "{}");
  BOOST_TEST(d["result"]["isError"].GetBool());
  BOOST_TEST(resultText(d).find("EQ_API_URL") != std::string::npos);

  // Nothing answers.
  d = s.call("get_quota", "{}");
  BOOST_TEST(d["result"]["isError"].GetBool());
  BOOST_TEST(resultText(d).find("cannot reach") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_arguments) {
  Session s;
  s.init();
  BOOST_TEST(errorCode(s.call("no_such_tool", "{}")) == rpc::kInvalidParams);
  BOOST_TEST(errorCode(s.call("get_quota", "[1]")) == rpc::kInvalidParams);
  // Refused before anything is sent.
  BOOST_TEST(s.call("get_task", "{}")["result"]["isError"].GetBool());
  BOOST_TEST(s.call("get_task", R"({"task_id":5})")["result"]["isError"].GetBool());
  BOOST_TEST(s.call("get_task", R"({"task_id":"t","x":1})")["result"]["isError"].GetBool());
  BOOST_TEST(s.call("get_quota", R"({"x":1})")["result"]["isError"].GetBool());
  BOOST_TEST(
      s.call("generate_reply",
             R"({"mode":"fast","message":"x","idempotency_key":"a\r\nX: y"})")["result"]["isError"]
          .GetBool());
  BOOST_TEST(s.api.sent.empty());
  // A task id cannot leave its path segment.
  s.api.answer(404, R"({"code":404,"data":null,"msg":"not found: no task ../quota"})");
  rapidjson::Document d = s.call("get_task", R"({"task_id":"../quota?x=1#y"})");
  BOOST_REQUIRE(s.api.sent.size() == 1u);
  BOOST_TEST(s.api.sent[0].path == "/api/v1/task/..%2Fquota%3Fx%3D1%23y");
  BOOST_TEST(resultText(d).find("not found") != std::string::npos);
  // Unknown body fields go to the API, which names them.
  s.api.answer(400, R"({"code":400,"data":null,"msg":"field 'reply_cnt' is not a known field"})");
  s.call("generate_reply", R"({"mode":"fast","message":"x","reply_cnt":2})");
  BOOST_TEST(parseJson(s.api.sent[1].body)["reply_cnt"].GetInt() == 2);
}

BOOST_AUTO_TEST_CASE(structured_content_only_from_2025_06_18) {
  Session s;
  s.init("2025-03-26");
  s.api.answer(200, std::string(R"({"code":0,"data":)") + kReplyData + R"(,"msg":"ok"})");
  rapidjson::Document d = s.call("generate_reply", R"({"mode":"fast","message":"x"})");
  BOOST_TEST(!d["result"].HasMember("structuredContent"));
  BOOST_TEST(sameJson(parseJson(resultText(d)), parseJson(kReplyData)));
}

BOOST_AUTO_TEST_CASE(config_from_environment) {
  auto from = [](std::map<std::string, std::string> env) {
    return McpConfig::fromEnv([env = std::move(env)](const char* name) -> const char* {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  };
  Result<McpConfig> missing = from({});
  BOOST_REQUIRE(!missing.isOk());
  BOOST_TEST(missing.status().msg().find("EQ_API_KEY") != std::string::npos);
  Result<McpConfig> c = from({{"EQ_API_KEY", "eq_live_abc"}});
  BOOST_REQUIRE(c.isOk());
  BOOST_TEST(c.value().api_url == "http://127.0.0.1:8080");
  BOOST_TEST(c.value().timeout_ms == 200'000);
  c = from({{"EQ_API_KEY", "k"}, {"EQ_API_URL", "https://eq.example/prefix/"}});
  BOOST_REQUIRE(c.isOk());
  BOOST_TEST(c.value().api_url == "https://eq.example/prefix");
  BOOST_TEST(!from({{"EQ_API_KEY", "k"}, {"EQ_API_URL", "ftp://x"}}).isOk());
  BOOST_TEST(!from({{"EQ_API_KEY", "k"}, {"EQ_API_URL", "127.0.0.1:8080"}}).isOk());
  BOOST_TEST(!from({{"EQ_API_KEY", "k\r\nX: y"}}).isOk());
  BOOST_TEST(!from({{"EQ_API_KEY", "k"}, {"EQ_MCP_TIMEOUT_MS", "5s"}}).isOk());
  BOOST_TEST(!from({{"EQ_API_KEY", "k"}, {"EQ_MCP_TIMEOUT_MS", "10"}}).isOk());
  BOOST_TEST(from({{"EQ_API_KEY", "k"}, {"EQ_MCP_TIMEOUT_MS", "5000"}}).value().timeout_ms == 5000);
  BOOST_TEST(!from({{"EQ_API_KEY", "k"}, {"EQ_LOG_LEVEL", "loud"}}).isOk());
}

BOOST_AUTO_TEST_CASE(stdio_frames_one_message_per_line) {
  int in[2], out[2];
  BOOST_REQUIRE(::pipe(in) == 0);
  BOOST_REQUIRE(::pipe(out) == 0);
  const std::string input =
      std::string(R"({"jsonrpc":"2.0","id":1,"method":"ping"})") + "\r\n" +  // CRLF tolerated
      "\n   \n" +                                                            // blank lines skipped
      std::string(200, 'x') + "\n" +                                         // oversized
      R"({"jsonrpc":"2.0","method":"notifications/initialized"})" + "\n" +
      R"({"jsonrpc":"2.0","id":2,"method":"ping"})";  // last line without newline
  BOOST_REQUIRE(::write(in[1], input.data(), input.size()) == static_cast<ssize_t>(input.size()));
  ::close(in[1]);
  FakeTransport api;
  McpServer server(api, "http://api.test");
  BOOST_TEST((runStdio(server, in[0], out[1], -1, 100) == StopReason::kEndOfInput));
  ::close(out[1]);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;)
    got.append(buf, static_cast<size_t>(n));
  ::close(in[0]);
  ::close(out[0]);
  std::vector<std::string> lines;
  for (size_t start = 0, nl; (nl = got.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(got.substr(start, nl - start));
  }
  BOOST_REQUIRE_MESSAGE(lines.size() == 3u, got);
  BOOST_TEST(parseJson(lines[0])["id"].GetInt() == 1);
  BOOST_TEST(errorCode(parseJson(lines[1])) == rpc::kInvalidRequest);
  BOOST_TEST(parseJson(lines[2])["id"].GetInt() == 2);
  BOOST_TEST(got.back() == '\n');
}

BOOST_AUTO_TEST_CASE(stdio_stops_on_the_signal_fd) {
  int in[2], sig[2];
  BOOST_REQUIRE(::pipe(in) == 0);
  BOOST_REQUIRE(::pipe(sig) == 0);
  BOOST_REQUIRE(::write(sig[1], "x", 1) == 1);  // stands in for a signalfd with SIGTERM pending
  FakeTransport api;
  McpServer server(api, "http://api.test");
  int devnull = ::open("/dev/null", O_WRONLY);
  // stdin stays open and silent: only the signal can end the loop.
  BOOST_TEST((runStdio(server, in[0], devnull, sig[0], 1024) == StopReason::kSignal));
  for (int fd : {in[0], in[1], sig[0], sig[1], devnull}) ::close(fd);
}

// eq-mcp reads its stdin with the guarded reader: a hostile number is a
// JSON-RPC parse error naming the member, and the server answers the next line.
BOOST_AUTO_TEST_CASE(hostile_numbers_are_parse_errors_or_read) {
  Session s;
  s.init();
  for (const test::HostileNumber& n : test::hostileNumbers()) {
    BOOST_TEST_CONTEXT(n.text.substr(0, 40)) {
      rapidjson::Document d = s.rpc(R"({"jsonrpc":"2.0","id":)" + n.text + R"(,"method":"ping"})");
      if (!n.parses) {
        BOOST_TEST(errorCode(d) == rpc::kParseError);
        BOOST_TEST(std::string(d["error"]["message"].GetString()).find("field id") !=
                   std::string::npos);
      }
      BOOST_TEST(s.rpc(R"({"jsonrpc":"2.0","id":1,"method":"ping"})").HasMember("result"));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
