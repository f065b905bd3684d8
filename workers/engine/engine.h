// The engine seam: turns one job (a message plus its optional context) into an
// analysis or a set of candidate replies.
//
// An Engine is built once per worker process at start-up and then called from
// the worker's job threads, several at once (EQ_WORKER_CONCURRENCY), so its
// const methods must be thread-safe: the built-in engine holds read-only data
// after construction, the llm engine a thread-safe HTTP client. Whoever builds
// it owns it (normally main(), through a unique_ptr that outlives the worker).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace eq::engine {

// The three generation modes of the interface. Their wire names are
// "fast", "standard" and "perfect" (see modeName / parseMode in common/).
enum class Mode { kFast, kStandard, kPerfect };

// What the caller sent, already validated by eq-api (lengths, enums, bounds).
struct ReplyInput {
  Mode mode = Mode::kFast;
  std::string message;  // UTF-8, trimmed, 1..2000 code points
  std::string context;  // UTF-8, possibly empty
  std::string scene;    // "" or one of chat, ambiguous, dating, humor, conflict,
                        // social, work, breakup, proposal
  int reply_count = 1;  // 1..5
  // Unix ms after which nobody waits for the answer (a sync call's
  // deadline), 0 for none: an engine that calls out stops there.
  int64_t deadline_ms = 0;
};

struct AnalyzeInput {
  std::string message;
  std::string context;
  std::string scene;  // analyze requests carry no scene; kept for reuse by reply
  int64_t deadline_ms = 0;  // as in ReplyInput
};

// docs/contract.md §3: emotion is one of joy, affection, anger, sadness, anxiety,
// disgust, surprise, neutral; relationship_stage one of stranger,
// acquaintance, ambiguous, dating, committed, strained, post_breakup,
// colleague, family, unknown. The two texts are in the message's language.
struct Analysis {
  std::string emotion;
  double intensity = 0.0;  // [0, 1]
  std::string underlying_need;
  std::string relationship_stage;
  std::string suggested_strategy;
};

struct Reply {
  std::string text;
  double score = 0.0;  // [0, 1]
  std::string eq_analysis;
};

// Exactly reply_count distinct replies, sorted by score descending.
struct ReplyOutput {
  std::vector<Reply> replies;
  int64_t tokens_used = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual Result<Analysis> analyze(const AnalyzeInput& in) const = 0;
  virtual Result<ReplyOutput> reply(const ReplyInput& in) const = 0;
};

}  // namespace eq::engine
