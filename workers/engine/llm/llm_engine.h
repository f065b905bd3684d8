// The llm engine (EQ_ENGINE=llm): analysis and replies from any
// OpenAI-compatible chat-completions server (llama.cpp llama-server, vLLM,
// Ollama, hosted APIs), one pipeline per mode (docs/contract.md §8):
//
//   fast      one call: replies straight from the message;
//   standard  an analysis call, then one call for replies built on it, each
//             from a different strategy, ranked;
//   perfect   an analysis call, then one generation per applicable strategy,
//             all in flight at once, then a judging call that ranks every
//             candidate and compares the strategies (shown in eq_analysis).
//
// Every answer must follow a JSON Schema (response_format) and is checked
// again here (answers.h); an invalid one gets one repair retry with the
// error. 429, 5xx and refused connections are retried with backoff
// (Retry-After honoured, capped); a timeout is not. The analysis falls back
// to the built-in engine only when EQ_LLM_FALLBACK=builtin. tokens_used sums
// usage.total_tokens of every call a reply made, repairs included.
//
// Ownership and threads: built once per worker process and owned by the
// worker's context; reply() and analyze() are called from many job threads
// at once and block their caller until the pipeline ends. The one shared
// piece, the ChatClient, is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "common/config.h"
#include "workers/engine/engine.h"
#include "workers/engine/llm/answers.h"
#include "workers/engine/llm/chat_client.h"
#include "workers/engine/llm/prompts.h"

namespace eq::engine::llm {

class LlmEngine : public Engine {
 public:
  // fallback: the engine whose analysis replaces a failed model analysis;
  // null unless EQ_LLM_FALLBACK=builtin.
  LlmEngine(const LlmConfig& cfg, std::unique_ptr<Engine> fallback);

  Result<Analysis> analyze(const AnalyzeInput& in) const override;
  Result<ReplyOutput> reply(const ReplyInput& in) const override;

 private:
  // How long one call may take: the mode's timeout, and never past the
  // caller's deadline (sync calls; 0 = none).
  struct Budget {
    int64_t timeout_ms = 0;
    int64_t deadline_ms = 0;
  };

  CallSettings settingsFor(int mode_index) const;
  Budget budgetFor(int mode_index, int64_t deadline_ms) const;
  // One HTTP exchange with retries on 429/5xx/connect errors.
  Result<Completion> complete(const ChatCall& call, const Budget& budget,
                              std::atomic<int64_t>* tokens) const;
  // complete() plus the schema check and its one repair retry.
  template <typename T, typename Parse>
  Result<T> ask(const ChatCall& call, Parse parse, const Budget& budget,
                std::atomic<int64_t>* tokens) const;
  // The model's analysis, or the fallback's when configured.
  Result<Analysis> analysisFor(const AnalyzeInput& in, const CallSettings& s,
                               const Budget& budget, std::atomic<int64_t>* tokens) const;
  Result<ReplyOutput> perfect(const ReplyInput& in, const CallSettings& s, const Budget& budget,
                              std::atomic<int64_t>* tokens) const;

  LlmConfig cfg_;
  std::unique_ptr<Engine> fallback_;
  mutable ChatClient client_;  // post() is thread-safe; mutable because Engine's API is const
};

}  // namespace eq::engine::llm
