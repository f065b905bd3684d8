// Measuring how the built-in engine reads situations and answers them
// (issue 22; docs/engine.md, "Situations"), on the blind batches of
// tests/data/situations/: situation accuracy with its most common
// misreadings, the rubric (what a reply must and must not contain, written by
// someone who never saw the engine), and the guards (what no reply in the
// gold situation may contain) over every mode.
//
// Header-only and stateless, like evaluation.h: tools/engine_eval prints the
// reports, tests/unit/engine_eval_test.cc holds the floors.
#pragma once

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "workers/engine/builtin/builtin_engine.h"
#include "workers/engine/builtin/evaluation.h"
#include "workers/engine/engine.h"

namespace eq::engine::builtin::eval {

// One line of a blind batch: message, gold situation, context, scene, and
// for a rubric file what a reply must contain (one of) and must not (any).
struct SituationSample {
  int line = 0;
  std::string message, situation, context, scene;
  std::vector<std::string> must, must_not;  // lower case
};

inline std::vector<std::string> splitAlternatives(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    const size_t bar = s.find('|');
    std::string part(s.substr(0, bar));
    for (char& c : part) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    if (!part.empty()) out.push_back(std::move(part));
    if (bar == std::string_view::npos) break;
    s.remove_prefix(bar + 1);
  }
  return out;
}

// "message<TAB>situation<TAB>context<TAB>scene", and for a rubric
// "<TAB>must<TAB>must_not" after them; # lines are comments.
inline Result<std::vector<SituationSample>> parseSituationTsv(std::string_view text,
                                                              std::string_view name, bool rubric) {
  std::vector<SituationSample> out;
  const size_t want = rubric ? 6 : 4;
  Status st = detail::forEachLine(text, [&](int number, std::string_view line) {
    if (line.empty() || line.front() == '#') return Status::ok();
    const std::vector<std::string_view> f = detail::splitTabs(line);
    if (f.size() != want || f[0].empty() || f[1].empty()) {
      return Status(400, std::string(name) + ":" + std::to_string(number) + ": want " +
                             std::to_string(want) + " TAB-separated fields");
    }
    SituationSample s;
    s.line = number;
    s.message = f[0];
    s.situation = f[1];
    s.context = f[2];
    s.scene = f[3];
    if (rubric) {
      s.must = splitAlternatives(f[4]);
      s.must_not = splitAlternatives(f[5]);
    }
    out.push_back(std::move(s));
    return Status::ok();
  });
  if (!st.isOk()) return st;
  return out;
}

// The messages of situation_examples.tsv ("lang<TAB>situation<TAB>scene
// <TAB>context<TAB>message"): a blind batch is scored without them, since
// the engine has learnt them (two writers often send the same "晚安").
inline std::set<std::string> exampleMessages(std::string_view examples_tsv) {
  std::set<std::string> out;
  (void)detail::forEachLine(examples_tsv, [&](int, std::string_view line) {
    if (line.empty() || line.front() == '#') return Status::ok();
    const std::vector<std::string_view> f = detail::splitTabs(line);
    if (f.size() == 5) out.emplace(f[4]);
    return Status::ok();
  });
  return out;
}

// The samples whose message is not in known.
inline std::vector<SituationSample> unknownTo(const std::set<std::string>& known,
                                              std::vector<SituationSample> samples) {
  std::erase_if(samples, [&](const SituationSample& s) { return known.count(s.message) > 0; });
  return samples;
}

inline AnalyzeInput analyzeInputOf(const SituationSample& s) {
  AnalyzeInput a;
  a.message = s.message;
  a.context = s.context;
  a.scene = s.scene;
  return a;
}

inline std::string lowerAscii(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// Situation accuracy of one batch, per situation, and its misreadings.
struct SituationReport {
  int total = 0;
  int correct = 0;
  int unread = 0;  // no situation read: the reply came from the feelings alone
  std::map<std::string, std::pair<int, int>> per_situation;  // gold -> {correct, total}
  std::map<std::pair<std::string, std::string>, int> confusions;  // {gold, got} -> count
  std::vector<std::pair<const SituationSample*, std::string>> misses;

  double accuracy() const { return total == 0 ? 0 : static_cast<double>(correct) / total; }

  std::string format(size_t top_confusions = 15) const {
    char buf[160];
    std::string out;
    std::snprintf(buf, sizeof buf, "situation accuracy %.1f%% (%d/%d); no situation read: %d\n",
                  100 * accuracy(), correct, total, unread);
    out += buf;
    out += "per situation (correct/total):\n";
    for (const auto& [id, ct] : per_situation) {
      std::snprintf(buf, sizeof buf, "  %-26s %2d/%-2d\n", id.c_str(), ct.first, ct.second);
      out += buf;
    }
    std::vector<std::pair<int, std::pair<std::string, std::string>>> sorted;
    for (const auto& [pair, n] : confusions) sorted.push_back({n, pair});
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    out += "most common misreadings (gold -> read):\n";
    for (size_t i = 0; i < sorted.size() && i < top_confusions; ++i) {
      const auto& [n, pair] = sorted[i];
      std::snprintf(buf, sizeof buf, "  %3d  %s -> %s\n", n, pair.first.c_str(),
                    pair.second.empty() ? "(none)" : pair.second.c_str());
      out += buf;
    }
    return out;
  }
};

inline SituationReport evaluateSituations(const BuiltinEngine& engine,
                                          const std::vector<SituationSample>& samples) {
  SituationReport r;
  for (const SituationSample& s : samples) {
    const std::string got = engine.situationOf(analyzeInputOf(s));
    auto& ct = r.per_situation[s.situation];
    ++ct.second;
    ++r.total;
    if (got.empty()) ++r.unread;
    if (got == s.situation) {
      ++ct.first;
      ++r.correct;
    } else {
      ++r.confusions[{s.situation, got}];
      r.misses.push_back({&s, got});
    }
  }
  return r;
}

// The replies of every mode for one sample: 1, 3 and 5 replies in fast,
// standard and perfect (27 replies, some the same text).
inline std::vector<std::string> allReplies(const BuiltinEngine& engine, const SituationSample& s) {
  std::vector<std::string> out;
  for (Mode mode : {Mode::kFast, Mode::kStandard, Mode::kPerfect}) {
    for (int count : {1, 3, 5}) {
      ReplyInput in;
      in.mode = mode;
      in.message = s.message;
      in.context = s.context;
      in.scene = s.scene;
      in.reply_count = count;
      const Result<ReplyOutput> got = engine.reply(in);
      if (!got.isOk()) continue;
      for (const Reply& r : got.value().replies) out.push_back(r.text);
    }
  }
  return out;
}

// The rubric: every reply of every mode must contain one of the sample's
// `must` (when it has any) and none of its `must_not`.
struct RubricReport {
  int replies = 0;
  int passed = 0;
  int must_missed = 0;
  int must_not_hit = 0;
  std::map<std::string, std::pair<int, int>> per_situation;  // gold -> {passed, replies}
  std::vector<std::pair<const SituationSample*, std::string>> failures;  // one per sample

  double passRate() const { return replies == 0 ? 0 : static_cast<double>(passed) / replies; }

  std::string format() const {
    char buf[160];
    std::string out;
    std::snprintf(buf, sizeof buf,
                  "rubric pass %.1f%% (%d/%d replies); missing every must: %d; containing a "
                  "must_not: %d\n",
                  100 * passRate(), passed, replies, must_missed, must_not_hit);
    out += buf;
    out += "per situation (passed/replies), those below 100%:\n";
    for (const auto& [id, pt] : per_situation) {
      if (pt.first == pt.second) continue;
      std::snprintf(buf, sizeof buf, "  %-26s %3d/%-3d\n", id.c_str(), pt.first, pt.second);
      out += buf;
    }
    return out;
  }
};

inline RubricReport evaluateRubric(const BuiltinEngine& engine,
                                   const std::vector<SituationSample>& samples) {
  RubricReport r;
  for (const SituationSample& s : samples) {
    bool reported = false;
    for (const std::string& text : allReplies(engine, s)) {
      const std::string lower = lowerAscii(text);
      const auto has = [&](const std::string& w) { return lower.find(w) != std::string::npos; };
      const bool must = s.must.empty() || std::any_of(s.must.begin(), s.must.end(), has);
      const bool must_not = std::any_of(s.must_not.begin(), s.must_not.end(), has);
      auto& pt = r.per_situation[s.situation];
      ++pt.second;
      ++r.replies;
      if (!must) ++r.must_missed;
      if (must_not) ++r.must_not_hit;
      if (must && !must_not) {
        ++pt.first;
        ++r.passed;
      } else if (!reported) {
        r.failures.push_back({&s, text});
        reported = true;
      }
    }
  }
  return r;
}

// The guards: no reply of any mode to a sample may contain what its gold
// situation forbids (the engine's own guard list, from the map's "never").
struct GuardReport {
  int replies = 0;
  int broken = 0;
  std::vector<std::pair<const SituationSample*, std::string>> breaks;
};

inline GuardReport evaluateGuards(const BuiltinEngine& engine,
                                  const std::vector<SituationSample>& samples) {
  GuardReport r;
  for (const SituationSample& s : samples) {
    for (const std::string& text : allReplies(engine, s)) {
      ++r.replies;
      if (engine.breaksSituationGuard(s.situation, text)) {
        ++r.broken;
        r.breaks.push_back({&s, text});
      }
    }
  }
  return r;
}

}  // namespace eq::engine::builtin::eval
