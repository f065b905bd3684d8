// Reading what a chat-completions server answers: the response envelope,
// then the model's JSON content checked against the schema it was asked for
// (prompts.h). Every check a schema states is done here again, because a
// server may ignore response_format (json_object mode, older servers, hosted
// APIs without strict schemas) and a model may still produce garbage.
//
// Stateless functions. Errors are 502-coded Status values whose message says
// what was wrong in words a model can act on: the engine sends it back in
// the repair retry.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "workers/engine/engine.h"

namespace eq::engine::llm {

struct Completion {
  std::string content;       // choices[0].message.content
  std::string finish_reason;  // "stop", "length", ...
  int64_t total_tokens = 0;   // usage.total_tokens (0 when the server sends no usage)
};

// The chat-completions envelope of a 2xx answer.
Result<Completion> parseCompletion(std::string_view body);

// The model's content. Markdown code fences around the object are tolerated
// (common in json_object mode); unknown members are ignored; everything the
// schema requires is enforced.
Result<Analysis> parseAnalysis(std::string_view content);

// Exactly `count` replies after dropping duplicates (texts compared after
// trimming); more distinct ones than asked are cut to the best `count`.
// Sorted by score, best first.
Result<std::vector<Reply>> parseReplies(std::string_view content, int count);

struct Ranked {
  int candidate = 0;  // 1-based, as the model saw them
  double score = 0.0;
  std::string reason;
};
struct Judgement {
  std::vector<Ranked> ranking;  // every candidate exactly once, best first
  std::string comparison;
};
Result<Judgement> parseJudgement(std::string_view content, int candidates);

}  // namespace eq::engine::llm
