// What the llm engine asks a chat-completions model: the prompts, the JSON
// Schema each answer must follow, and the request body that carries both.
//
// Stateless functions over values; the engine (llm_engine.h) decides which
// calls a mode makes and reads the answers with answers.h. Prompts are in
// English, which every instruction-tuned model follows best, and tell the
// model to write in the language of the message, Chinese first.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "workers/engine/engine.h"

namespace eq::engine::llm {

struct Message {
  std::string role;  // system | user | assistant
  std::string content;
};

// The settings every call of one mode shares (from LlmConfig).
struct CallSettings {
  std::string model;
  double temperature = 0.7;
  int64_t max_tokens = 1024;
  bool json_schema = true;  // response_format json_schema; false: json_object
};

// One chat-completions request: messages plus the schema its answer must
// follow, named so that logs (and a test's stub server) can tell calls apart.
struct ChatCall {
  CallSettings settings;
  std::vector<Message> messages;
  std::string schema_name;  // "analysis" | "replies" | "judge"
  std::string schema_json;  // a JSON Schema (draft 2020-12 subset the servers accept)
};

// The request body: model, messages, temperature, max_tokens, stream false
// and response_format (json_schema with strict: true, or json_object with the
// schema spelled out in the system prompt instead).
std::string encodeChatCall(const ChatCall& call);

// The same conversation plus the rejected answer and what was wrong with it:
// the one repair retry of docs/contract.md §8.
ChatCall withRepair(ChatCall call, const std::string& bad_answer, const std::string& error);

// Analysis of a message (the analyze endpoint; standard and perfect start here).
ChatCall analysisCall(const CallSettings& s, const AnalyzeInput& in);

// `count` replies. Without an analysis (fast) the model reads the message
// itself; with one (standard, perfect) it builds on it. An empty strategy
// asks for replies from different strategies, ranked; a named one (perfect)
// asks for replies using that strategy only.
ChatCall repliesCall(const CallSettings& s, const ReplyInput& in, const Analysis* analysis,
                     std::string_view strategy, int count);

struct Candidate {
  std::string strategy;
  Reply reply;
};
// Ranks every candidate (perfect): a score and a reason each, and a short
// comparison of the strategies.
ChatCall judgeCall(const CallSettings& s, const ReplyInput& in, const Analysis& analysis,
                   const std::vector<Candidate>& candidates);

// The strategies perfect mode tries for this analysis and scene, most
// fitting first: enough for reply_count replies plus at least one to lose,
// at most every strategy the engine knows.
std::vector<std::string> perfectStrategies(const Analysis& analysis, const std::string& scene,
                                           int reply_count);

// How eq_analysis names a strategy: "共情" or "empathize".
std::string strategyLabel(std::string_view strategy, bool chinese);

// True when the text has a CJK ideograph: eq_analysis labels follow it.
bool looksChinese(std::string_view text);

}  // namespace eq::engine::llm
