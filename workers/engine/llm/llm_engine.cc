#include "workers/engine/llm/llm_engine.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "common/defaults.h"
#include "common/log.h"
#include "common/timefmt.h"

namespace eq::engine::llm {
namespace {

constexpr int kNoMode = -1;  // the analyze endpoint has no mode

bool retryable(long http_status) {
  return http_status == 429 || http_status == 500 || http_status == 502 || http_status == 503 ||
         http_status == 504;
}

// A short, single-line excerpt of an error body for logs and errors.
std::string excerpt(const std::string& body) {
  std::string out = body.substr(0, 200);
  std::replace(out.begin(), out.end(), '\n', ' ');
  return out;
}

}  // namespace

LlmEngine::LlmEngine(const LlmConfig& cfg, std::unique_ptr<Engine> fallback)
    : cfg_(cfg), fallback_(std::move(fallback)), client_(cfg.base_url + "/chat/completions",
                                                        cfg.api_key) {}

CallSettings LlmEngine::settingsFor(int mode_index) const {
  CallSettings s;
  s.model = cfg_.model;
  if (mode_index != kNoMode && !cfg_.mode_model[mode_index].empty()) {
    s.model = cfg_.mode_model[mode_index];
  }
  s.temperature = cfg_.temperature;
  s.max_tokens = cfg_.max_tokens;
  s.json_schema = cfg_.response_format == "json_schema";
  return s;
}

LlmEngine::Budget LlmEngine::budgetFor(int mode_index, int64_t deadline_ms) const {
  Budget b;
  b.timeout_ms = cfg_.timeout_ms;
  if (mode_index != kNoMode && cfg_.mode_timeout_ms[mode_index] > 0) {
    b.timeout_ms = cfg_.mode_timeout_ms[mode_index];
  }
  b.deadline_ms = deadline_ms;
  return b;
}

Result<Completion> LlmEngine::complete(const ChatCall& call, const Budget& budget,
                                       std::atomic<int64_t>* tokens) const {
  std::string body = encodeChatCall(call);
  Status last;
  for (int attempt = 0;; ++attempt) {
    int64_t timeout = budget.timeout_ms;
    if (budget.deadline_ms > 0) {
      timeout = std::min(timeout, budget.deadline_ms - nowMs());
      if (timeout <= 0) return Status(504, "llm: the caller's deadline passed");
    }
    int64_t started = nowMs();
    Result<ChatResponse> r = client_.post(body, timeout).get();
    int64_t wait_ms = -1;
    if (r.isOk()) {
      const ChatResponse& resp = r.value();
      log::debug("llm call", {{"schema", call.schema_name},
                              {"model", call.settings.model},
                              {"status", static_cast<long long>(resp.http_status)},
                              {"duration_ms", static_cast<long long>(nowMs() - started)}});
      if (resp.http_status >= 200 && resp.http_status < 300) {
        Result<Completion> c = parseCompletion(resp.body);
        if (c.isOk()) tokens->fetch_add(c.value().total_tokens);
        return c;
      }
      last = Status(502, "llm: server answered " + std::to_string(resp.http_status) + ": " +
                             excerpt(resp.body));
      if (!retryable(resp.http_status)) return last;
      if (resp.retry_after_ms >= 0) wait_ms = std::min(resp.retry_after_ms,
                                                        defaults::kLlmMaxRetryAfterMs);
    } else {
      last = r.status();
      // Only a failed connection or transfer (503) is retried. A timeout is
      // not: the server that stalled once would most likely stall again,
      // and the caller's time is spent.
      if (last.code() != 503) return last;
    }
    if (attempt >= cfg_.max_retries) return last;
    if (wait_ms < 0) {
      wait_ms = std::min(defaults::kLlmRetryBackoffMs << attempt, defaults::kLlmMaxRetryAfterMs);
    }
    if (budget.deadline_ms > 0 && nowMs() + wait_ms >= budget.deadline_ms) return last;
    log::warn("llm call failed; retrying", {{"schema", call.schema_name},
                                            {"error", last.msg()},
                                            {"attempt", static_cast<long long>(attempt + 1)},
                                            {"wait_ms", static_cast<long long>(wait_ms)}});
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  }
}

template <typename T, typename Parse>
Result<T> LlmEngine::ask(const ChatCall& call, Parse parse, const Budget& budget,
                         std::atomic<int64_t>* tokens) const {
  Result<Completion> first = complete(call, budget, tokens);
  if (!first.isOk()) return first.status();
  Result<T> parsed = parse(first.value().content);
  if (parsed.isOk()) return parsed;
  std::string error = parsed.status().msg();
  if (first.value().finish_reason == "length") error += " (the answer was cut off: be shorter)";
  log::warn("llm answer rejected; asking for a repair",
            {{"schema", call.schema_name}, {"error", error}});
  Result<Completion> second = complete(withRepair(call, first.value().content, error), budget,
                                       tokens);
  if (!second.isOk()) return second.status();
  parsed = parse(second.value().content);
  if (!parsed.isOk()) {
    return Status(502, "llm: " + call.schema_name + " answer still invalid after a repair: " +
                           parsed.status().msg());
  }
  return parsed;
}

Result<Analysis> LlmEngine::analysisFor(const AnalyzeInput& in, const CallSettings& s,
                                        const Budget& budget,
                                        std::atomic<int64_t>* tokens) const {
  Result<Analysis> a = ask<Analysis>(analysisCall(s, in), parseAnalysis, budget, tokens);
  if (a.isOk() || fallback_ == nullptr) return a;
  log::warn("llm analysis failed; using the built-in analysis (EQ_LLM_FALLBACK=builtin)",
            {{"error", a.status().msg()}});
  return fallback_->analyze(in);
}

Result<Analysis> LlmEngine::analyze(const AnalyzeInput& in) const {
  std::atomic<int64_t> tokens{0};
  return analysisFor(in, settingsFor(kNoMode), budgetFor(kNoMode, in.deadline_ms), &tokens);
}

Result<ReplyOutput> LlmEngine::reply(const ReplyInput& in) const {
  int mode = static_cast<int>(in.mode);
  CallSettings s = settingsFor(mode);
  Budget budget = budgetFor(mode, in.deadline_ms);
  std::atomic<int64_t> tokens{0};
  auto parse = [n = in.reply_count](std::string_view c) { return parseReplies(c, n); };
  ReplyOutput out;
  if (in.mode == Mode::kPerfect) return perfect(in, s, budget, &tokens);
  if (in.mode == Mode::kFast) {
    Result<std::vector<Reply>> r =
        ask<std::vector<Reply>>(repliesCall(s, in, nullptr, "", in.reply_count), parse, budget,
                                &tokens);
    if (!r.isOk()) return r.status();
    out.replies = std::move(r).value();
  } else {
    Result<Analysis> a =
        analysisFor({in.message, in.context, in.scene, in.deadline_ms}, s, budget, &tokens);
    if (!a.isOk()) return a.status();
    Result<std::vector<Reply>> r = ask<std::vector<Reply>>(
        repliesCall(s, in, &a.value(), "", in.reply_count), parse, budget, &tokens);
    if (!r.isOk()) return r.status();
    out.replies = std::move(r).value();
  }
  out.tokens_used = tokens.load();
  return out;
}

Result<ReplyOutput> LlmEngine::perfect(const ReplyInput& in, const CallSettings& s,
                                       const Budget& budget,
                                       std::atomic<int64_t>* tokens) const {
  Result<Analysis> a =
      analysisFor({in.message, in.context, in.scene, in.deadline_ms}, s, budget, tokens);
  if (!a.isOk()) return a.status();
  const Analysis& analysis = a.value();

  // One generation per strategy, all in flight at once on the shared client.
  std::vector<std::string> strategies = perfectStrategies(analysis, in.scene, in.reply_count);
  std::vector<std::future<Result<std::vector<Reply>>>> pending;
  auto one = [](std::string_view c) { return parseReplies(c, 1); };
  for (const std::string& strategy : strategies) {
    pending.push_back(std::async(std::launch::async, [&, strategy] {
      return ask<std::vector<Reply>>(repliesCall(s, in, &analysis, strategy, 1), one, budget,
                                     tokens);
    }));
  }
  std::vector<Candidate> candidates;
  Status first_error;
  for (size_t i = 0; i < pending.size(); ++i) {
    Result<std::vector<Reply>> r = pending[i].get();
    if (!r.isOk()) {
      log::warn("llm strategy failed", {{"strategy", strategies[i]}, {"error", r.status().msg()}});
      if (first_error.isOk()) first_error = r.status();
      continue;
    }
    bool duplicate = std::any_of(candidates.begin(), candidates.end(), [&](const Candidate& c) {
      return c.reply.text == r.value()[0].text;
    });
    if (!duplicate) candidates.push_back({strategies[i], r.value()[0]});
  }
  // A strategy that failed is dropped while enough candidates remain.
  if (candidates.size() < static_cast<size_t>(in.reply_count)) {
    if (!first_error.isOk()) return first_error;
    return Status(502, "llm: only " + std::to_string(candidates.size()) +
                           " distinct candidates for " + std::to_string(in.reply_count) +
                           " replies");
  }

  int n = static_cast<int>(candidates.size());
  Result<Judgement> j = ask<Judgement>(
      judgeCall(s, in, analysis, candidates),
      [n](std::string_view c) { return parseJudgement(c, n); }, budget, tokens);
  if (!j.isOk()) return j.status();

  bool zh = looksChinese(in.message);
  ReplyOutput out;
  for (const Ranked& r : j.value().ranking) {
    if (out.replies.size() == static_cast<size_t>(in.reply_count)) break;
    const Candidate& c = candidates[static_cast<size_t>(r.candidate - 1)];
    Reply reply;
    reply.text = c.reply.text;
    reply.score = r.score;
    std::string label = strategyLabel(c.strategy, zh);
    reply.eq_analysis =
        zh ? "策略「" + label + "」：" + c.reply.eq_analysis + " 评审：" + r.reason +
                 " 对比（" + std::to_string(n) + " 种策略）：" + j.value().comparison
           : "Strategy " + label + ": " + c.reply.eq_analysis + " Judge: " + r.reason +
                 " Comparison of " + std::to_string(n) + " strategies: " + j.value().comparison;
    out.replies.push_back(std::move(reply));
  }
  out.tokens_used = tokens->load();
  return out;
}

}  // namespace eq::engine::llm
