// The llm engine's pure parts: what it sends (prompts.h) and how it reads
// what a model answers (answers.h). The HTTP side and the pipelines run
// against a stand-in server in tests/integration/llm_test.cc.
#include <rapidjson/document.h>
#include <stdlib.h>

#include <boost/test/unit_test.hpp>
#include <set>

#include "common/config.h"
#include "workers/engine/llm/answers.h"
#include "workers/engine/llm/prompts.h"
#include "tests/unit/hostile_numbers.h"

using namespace eq::engine;
using namespace eq::engine::llm;

BOOST_AUTO_TEST_SUITE(llm_answers)

BOOST_AUTO_TEST_CASE(completion_envelope_gives_content_tokens_and_finish_reason) {
  auto c = parseCompletion(
      R"({"choices":[{"index":0,"message":{"role":"assistant","content":"{\"a\":1}"},)"
      R"("finish_reason":"length"}],"usage":{"prompt_tokens":5,"total_tokens":42}})");
  BOOST_REQUIRE(c.isOk());
  BOOST_TEST(c.value().content == R"({"a":1})");
  BOOST_TEST(c.value().total_tokens == 42);
  BOOST_TEST(c.value().finish_reason == "length");
  // No usage (some servers): zero tokens, not an error.
  BOOST_TEST(parseCompletion(R"({"choices":[{"message":{"content":"x"}}]})").value().total_tokens ==
             0);
  BOOST_TEST(!parseCompletion(R"({"choices":[]})").isOk());
  BOOST_TEST(!parseCompletion(R"({"error":{"message":"x"}})").isOk());
  BOOST_TEST(!parseCompletion("<html>").isOk());
}

BOOST_AUTO_TEST_CASE(replies_are_checked_deduplicated_cut_and_sorted) {
  std::string three = R"({"replies":[
      {"text":"A","score":0.2,"eq_analysis":"a"},
      {"text":" B ","score":0.9,"eq_analysis":"b"},
      {"text":"A","score":0.5,"eq_analysis":"dup"},
      {"text":"C","score":0.5,"eq_analysis":"c"}]})";
  auto r = parseReplies(three, 2);
  BOOST_REQUIRE(r.isOk());
  BOOST_REQUIRE_EQUAL(r.value().size(), 2u);
  BOOST_TEST(r.value()[0].text == "B");  // trimmed, best first
  BOOST_TEST(r.value()[1].text == "C");
  auto too_few = parseReplies(three, 4);  // 3 distinct only
  BOOST_REQUIRE(!too_few.isOk());
  BOOST_TEST(too_few.status().msg() == "expected 4 distinct replies, got 3");

  // Fenced answers (json_object mode) are accepted.
  BOOST_TEST(parseReplies("```json\n{\"replies\":[{\"text\":\"x\",\"score\":1,"
                          "\"eq_analysis\":\"y\"}]}\n```",
                          1)
                 .isOk());
  // Every rule of the schema, with a message a model can act on.
  auto msg = [](std::string_view content) { return parseReplies(content, 1).status().msg(); };
  BOOST_TEST(msg(R"({"replies":[{"text":"x","score":1.5,"eq_analysis":"y"}]})") ==
             R"(replies[0]."score" must be between 0 and 1)");
  BOOST_TEST(msg(R"({"replies":[{"text":"x","score":1}]})") ==
             R"(replies[0]."eq_analysis" is missing)");
  BOOST_TEST(msg(R"({"replies":[{"text":"  ","score":1,"eq_analysis":"y"}]})") ==
             R"(replies[0]."text" must not be empty)");
  BOOST_TEST(msg(R"({"replies":{}})") == R"("replies" must be an array)");
  BOOST_TEST(msg("[1]") == "the answer must be a JSON object");
  BOOST_TEST(msg("").find("empty") != std::string::npos);
  BOOST_TEST(msg(R"({"replies": [)").find("not valid JSON") != std::string::npos);
  BOOST_TEST(parseReplies(R"({"replies":[{"text":"x","score":1,"eq_analysis":"y"}]})", 1)
                 .status()
                 .isOk());
}

BOOST_AUTO_TEST_CASE(analysis_enforces_the_vocabularies) {
  auto a = parseAnalysis(R"({"emotion":"anxiety","intensity":0.4,"underlying_need":"安全感",)"
                         R"("relationship_stage":"dating","suggested_strategy":"安抚","extra":1})");
  BOOST_REQUIRE(a.isOk());
  BOOST_TEST(a.value().emotion == "anxiety");
  BOOST_TEST(a.value().intensity == 0.4);
  auto bad = parseAnalysis(R"({"emotion":"happy","intensity":0.4,"underlying_need":"x",)"
                           R"("relationship_stage":"dating","suggested_strategy":"y"})");
  BOOST_REQUIRE(!bad.isOk());
  BOOST_TEST(bad.status().msg().find("\"emotion\" must be one of joy, affection") == 0u);
  BOOST_TEST(!parseAnalysis(R"({"emotion":"joy","intensity":0.4,"underlying_need":"x",)"
                            R"("relationship_stage":"lovers","suggested_strategy":"y"})")
                  .isOk());
  BOOST_TEST(!parseAnalysis(R"({"emotion":"joy","intensity":"high","underlying_need":"x",)"
                            R"("relationship_stage":"dating","suggested_strategy":"y"})")
                  .isOk());
}

BOOST_AUTO_TEST_CASE(judgement_ranks_every_candidate_once) {
  auto j = parseJudgement(R"({"comparison":"c","ranking":[
      {"candidate":2,"score":0.4,"reason":"r2"},{"candidate":1,"score":0.8,"reason":"r1"}]})",
                          2);
  BOOST_REQUIRE(j.isOk());
  BOOST_TEST(j.value().ranking[0].candidate == 1);  // sorted by the judge's score
  BOOST_TEST(j.value().comparison == "c");
  BOOST_TEST(parseJudgement(R"({"comparison":"c","ranking":[
      {"candidate":1,"score":0.4,"reason":"r"},{"candidate":1,"score":0.8,"reason":"r"}]})",
                            2)
                 .status()
                 .msg() == "candidate 1 is ranked twice");
  BOOST_TEST(!parseJudgement(R"({"comparison":"c","ranking":[
      {"candidate":3,"score":0.4,"reason":"r"},{"candidate":1,"score":0.8,"reason":"r"}]})",
                             2)
                  .isOk());
  BOOST_TEST(!parseJudgement(R"({"comparison":"c","ranking":[
      {"candidate":1,"score":0.4,"reason":"r"}]})",
                             2)
                  .isOk());
}

// An LLM server's answer is untrusted input too: the envelope and the JSON
// the model wrote inside it go through the same guarded reader.
BOOST_AUTO_TEST_CASE(hostile_numbers_in_an_answer_are_refused_or_read) {
  for (const eq::test::HostileNumber& n : eq::test::hostileNumbers()) {
    BOOST_TEST_CONTEXT(n.text.substr(0, 40)) {
      auto c = parseCompletion(R"({"choices":[{"message":{"content":"x"}}],"usage":{"total_tokens":)" +
                               n.text + "}}");
      BOOST_TEST(c.isOk() == n.parses, c.status().msg());
      if (!c.isOk()) BOOST_TEST(c.status().msg().find("usage.total_tokens") != std::string::npos);
      auto r = parseReplies(R"({"replies":[{"text":"x","score":)" + n.text + R"(,"eq_analysis":"y"}]})",
                            1);
      if (!n.parses) BOOST_TEST(r.status().msg().find("replies.score") != std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(llm_prompts)

CallSettings settings(bool json_schema) {
  CallSettings s;
  s.model = "m";
  s.temperature = 0.3;
  s.max_tokens = 500;
  s.json_schema = json_schema;
  return s;
}

BOOST_AUTO_TEST_CASE(request_body_carries_model_messages_and_schema) {
  ReplyInput in;
  in.message = "我们分手吧";
  in.scene = "breakup";
  in.reply_count = 3;
  std::string body = encodeChatCall(repliesCall(settings(true), in, nullptr, "", 3));
  rapidjson::Document d;
  d.Parse(body.c_str());
  BOOST_REQUIRE(d.IsObject());
  BOOST_TEST(std::string(d["model"].GetString()) == "m");
  BOOST_TEST(d["max_tokens"].GetInt() == 500);
  BOOST_TEST(d["stream"].GetBool() == false);
  BOOST_TEST(std::string(d["response_format"]["type"].GetString()) == "json_schema");
  const auto& schema = d["response_format"]["json_schema"];
  BOOST_TEST(std::string(schema["name"].GetString()) == "replies");
  BOOST_TEST(schema["strict"].GetBool());
  BOOST_TEST(schema["schema"]["properties"]["replies"]["minItems"].GetInt() == 3);
  BOOST_TEST(schema["schema"]["properties"]["replies"]["maxItems"].GetInt() == 3);
  std::string user = d["messages"][1]["content"].GetString();
  BOOST_TEST(user.find("我们分手吧") != std::string::npos);
  BOOST_TEST(user.find("Scene: breakup") != std::string::npos);

  // json_object mode: the schema moves into the system prompt.
  std::string plain = encodeChatCall(analysisCall(settings(false), {"hi", "", "", 0}));
  d.Parse(plain.c_str());
  BOOST_TEST(std::string(d["response_format"]["type"].GetString()) == "json_object");
  std::string system = d["messages"][0]["content"].GetString();
  BOOST_TEST(system.find("\"relationship_stage\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(every_schema_is_valid_json) {
  ReplyInput in;
  in.message = "x";
  Analysis a{"joy", 0.5, "n", "dating", "s"};
  std::vector<Candidate> cands = {{"humor", {"a", 0.5, "w"}}, {"flirt", {"b", 0.5, "w"}}};
  for (const ChatCall& call :
       {analysisCall(settings(true), {"x", "", "", 0}), repliesCall(settings(true), in, &a, "humor", 1),
        judgeCall(settings(true), in, a, cands)}) {
    rapidjson::Document d;
    d.Parse(call.schema_json.c_str());
    BOOST_TEST(d.IsObject(), call.schema_name);
    d.Parse(encodeChatCall(call).c_str());
    BOOST_TEST(d.IsObject(), call.schema_name);
  }
}

BOOST_AUTO_TEST_CASE(repair_appends_the_bad_answer_and_the_error) {
  ChatCall c = withRepair(analysisCall(settings(true), {"x", "", "", 0}), "{oops", "not JSON");
  BOOST_REQUIRE_EQUAL(c.messages.size(), 4u);
  BOOST_TEST(c.messages[2].role == "assistant");
  BOOST_TEST(c.messages[2].content == "{oops");
  BOOST_TEST(c.messages[3].content.find("not JSON") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(perfect_tries_more_strategies_than_replies_scene_first) {
  Analysis sad{"sadness", 0.8, "", "post_breakup", ""};
  std::vector<std::string> s = perfectStrategies(sad, "breakup", 1);
  BOOST_TEST(s.size() == 3u);
  BOOST_TEST(s[0] == "space");
  for (int count = 1; count <= 5; ++count) {
    std::vector<std::string> all = perfectStrategies(sad, "", count);
    BOOST_TEST(all.size() == static_cast<size_t>(std::max(count + 1, 3)));
    BOOST_TEST(std::set<std::string>(all.begin(), all.end()).size() == all.size());
  }
}

BOOST_AUTO_TEST_CASE(language_of_labels) {
  BOOST_TEST(looksChinese("好的"));
  BOOST_TEST(looksChinese("ok 㐀"));
  BOOST_TEST(!looksChinese("okay!"));
  BOOST_TEST(!looksChinese("café"));
  BOOST_TEST(strategyLabel("empathize", true) == "共情");
  BOOST_TEST(strategyLabel("empathize", false) == "empathize");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(llm_config)

// Sets EQ_* variables for one test and removes them again.
struct Env {
  std::vector<std::string> names;
  void set(const std::string& n, const std::string& v) {
    setenv(n.c_str(), v.c_str(), 1);
    names.push_back(n);
  }
  ~Env() {
    for (const auto& n : names) unsetenv(n.c_str());
  }
};

BOOST_AUTO_TEST_CASE(llm_needs_a_url_and_a_model) {
  Env env;
  env.set("EQ_ENGINE", "llm");
  auto missing = eq::Config::fromEnv();
  BOOST_REQUIRE(!missing.isOk());
  BOOST_TEST(missing.status().msg().find("EQ_LLM_BASE_URL") != std::string::npos);
  env.set("EQ_LLM_BASE_URL", "http://gpu:8000/v1/");
  env.set("EQ_LLM_MODEL", "qwen");
  env.set("EQ_LLM_MODEL_PERFECT", "qwen-large");
  env.set("EQ_LLM_TIMEOUT_MS_FAST", "5000");
  env.set("EQ_LLM_FALLBACK", "builtin");
  auto c = eq::Config::fromEnv();
  BOOST_REQUIRE_MESSAGE(c.isOk(), c.status().msg());
  BOOST_TEST(c.value().llm.base_url == "http://gpu:8000/v1");  // trailing slash dropped
  BOOST_TEST(c.value().llm.mode_model[2] == "qwen-large");
  BOOST_TEST(c.value().llm.mode_timeout_ms[0] == 5000);
  BOOST_TEST(c.value().llm.fallback_builtin);
  for (auto [name, value] : {std::pair{"EQ_LLM_BASE_URL", "gpu:8000"},
                             std::pair{"EQ_LLM_TEMPERATURE", "hot"},
                             std::pair{"EQ_LLM_RESPONSE_FORMAT", "xml"},
                             std::pair{"EQ_LLM_FALLBACK", "yes"},
                             std::pair{"EQ_WORKER_CONCURRENCY", "-1"}}) {
    const char* old = getenv(name);
    std::string keep = old ? old : "";
    setenv(name, value, 1);
    auto r = eq::Config::fromEnv();
    BOOST_TEST(!r.isOk(), name);
    if (!r.isOk()) BOOST_TEST(r.status().msg().find(name) != std::string::npos, r.status().msg());
    if (old) setenv(name, keep.c_str(), 1);
    else unsetenv(name);
  }
}

BOOST_AUTO_TEST_SUITE_END()
