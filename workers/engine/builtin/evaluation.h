// Measuring the built-in analyzer against labelled messages: the loaders for
// the project's evaluation sets (tests/data/eval_*.tsv) and for the CLUE
// emotion jsonl, and a confusion-matrix report (accuracy, per-class precision,
// recall and F1, macro-F1).
//
// Shared by tools/engine_eval (the report in docs/engine.md) and
// tests/unit/engine_eval_test.cc (the accuracy floor), so that the numbers the
// docs quote and the numbers the test asserts come from the same code. Header
// only: it is a development aid, not part of what eq-worker runs, and keeping
// it out of the eq_engine library keeps it out of the worker binary.
//
// Everything here is plain values and free functions; no state, no threads.
#pragma once

#include <rapidjson/document.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "workers/engine/builtin/builtin_engine.h"
#include "workers/engine/engine.h"

namespace eq::engine::builtin::eval {

// docs/contract.md §3's emotions, in the order the report prints them.
inline constexpr std::array<std::string_view, 8> kEmotions = {
    "joy", "affection", "anger", "sadness", "anxiety", "disgust", "surprise", "neutral"};
inline constexpr size_t kEmotionCount = kEmotions.size();

inline int emotionIndex(std::string_view name) {
  for (size_t i = 0; i < kEmotionCount; ++i) {
    if (kEmotions[i] == name) return static_cast<int>(i);
  }
  return -1;
}

struct Sample {
  std::string message;
  std::string emotion;  // gold label, one of kEmotions
  std::string stage;    // gold relationship_stage, or empty when not labelled
  std::string context;
  std::string scene;
  int line = 0;  // 1-based line in the source file, for reports
};

namespace detail {

inline std::vector<std::string_view> splitTabs(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    const size_t tab = s.find('\t', start);
    out.push_back(
        s.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
    if (tab == std::string_view::npos) return out;
    start = tab + 1;
  }
}

// Calls f(lineNumber, line) for each line without its "\n" or "\r\n".
template <typename F>
Status forEachLine(std::string_view text, F f) {
  int number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++number;
    Status st = f(number, line);
    if (!st.isOk()) return st;
    pos = nl + 1;
  }
  return Status::ok();
}

}  // namespace detail

// The project's TSV format (see the header comment of tests/data/eval_zh.tsv):
// message, emotion, then optional relationship_stage, context and scene.
// Blank lines and lines starting with # are skipped; an unknown emotion is an
// error naming the line.
inline Result<std::vector<Sample>> parseTsv(std::string_view text, std::string_view name) {
  std::vector<Sample> out;
  Status st = detail::forEachLine(text, [&](int number, std::string_view line) {
    if (line.empty() || line.front() == '#') return Status::ok();
    const auto f = detail::splitTabs(line);
    if (f.size() < 2 || f[0].empty() || emotionIndex(f[1]) < 0) {
      return Status(400, std::string(name) + ":" + std::to_string(number) +
                             ": want message<TAB>emotion[<TAB>stage<TAB>context<TAB>scene]");
    }
    Sample s;
    s.message = std::string(f[0]);
    s.emotion = std::string(f[1]);
    if (f.size() > 2) s.stage = std::string(f[2]);
    if (f.size() > 3) s.context = std::string(f[3]);
    if (f.size() > 4) s.scene = std::string(f[4]);
    s.line = number;
    out.push_back(std::move(s));
    return Status::ok();
  });
  if (!st.isOk()) return st;
  return out;
}

// CLUEmotion2020's labels in the vocabulary of docs/contract.md §3 (docs/engine.md, "CLUE").
// The set has no neutral label.
inline std::string_view clueLabel(std::string_view label) {
  if (label == "like") return "affection";
  if (label == "happiness") return "joy";
  if (label == "sadness") return "sadness";
  if (label == "anger") return "anger";
  if (label == "disgust") return "disgust";
  if (label == "fear") return "anxiety";
  if (label == "surprise") return "surprise";
  return {};
}

// One {"id", "content", "label"} object a line. Only the labels are mapped;
// the content is measured and never kept beyond the run.
inline Result<std::vector<Sample>> parseClueJsonl(std::string_view text, std::string_view name) {
  std::vector<Sample> out;
  Status st = detail::forEachLine(text, [&](int number, std::string_view line) {
    if (line.empty()) return Status::ok();
    rapidjson::Document doc;
    const Status parsed = json::parse(line, &doc, 4);
    const auto bad = [&](std::string_view what) {
      return Status(400,
                    std::string(name) + ":" + std::to_string(number) + ": " + std::string(what));
    };
    if (!parsed.isOk()) return bad(parsed.msg());
    if (!doc.IsObject()) return bad("not a JSON object");
    const auto content = doc.FindMember("content");
    const auto label = doc.FindMember("label");
    if (content == doc.MemberEnd() || !content->value.IsString() || label == doc.MemberEnd() ||
        !label->value.IsString()) {
      return bad("want string members content and label");
    }
    const std::string_view mapped = clueLabel(label->value.GetString());
    if (mapped.empty()) return bad("unknown label");
    Sample s;
    s.message.assign(content->value.GetString(), content->value.GetStringLength());
    s.emotion = std::string(mapped);
    s.line = number;
    out.push_back(std::move(s));
    return Status::ok();
  });
  if (!st.isOk()) return st;
  return out;
}

// A class-balanced sample: `per_label` samples of every gold label (all of
// a label that has fewer). Which ones is fixed and does not follow the
// file's order: samples are ranked by a hash of their line number, so the
// sample is the same on every run and spread over the whole file.
inline std::vector<Sample> balancedSample(std::vector<Sample> all, int per_label) {
  auto rank = [](int line) {
    uint64_t x = static_cast<uint64_t>(line) + 0x9E3779B97F4A7C15ULL;  // splitmix64
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
  };
  std::stable_sort(all.begin(), all.end(),
                   [&](const Sample& a, const Sample& b) { return rank(a.line) < rank(b.line); });
  std::map<std::string, int> taken;
  std::vector<Sample> out;
  for (Sample& s : all) {
    if (taken[s.emotion]++ < per_label) out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(),
            [](const Sample& a, const Sample& b) { return a.line < b.line; });
  return out;
}

// Rows are the gold label, columns the prediction.
struct Report {
  std::array<std::array<int, kEmotionCount>, kEmotionCount> confusion{};
  int total = 0;
  int correct = 0;
  int stage_total = 0;  // samples with a gold relationship_stage
  int stage_correct = 0;
  int failed = 0;  // analyze() returned an error (counted as wrong)

  int support(size_t gold) const {
    int n = 0;
    for (int v : confusion[gold]) n += v;
    return n;
  }
  int predicted(size_t pred) const {
    int n = 0;
    for (const auto& row : confusion) n += row[pred];
    return n;
  }
  // Counts one answer (indices into kEmotions).
  void add(size_t gold, size_t pred) {
    ++total;
    ++confusion[gold][pred];
    if (gold == pred) ++correct;
  }
  double accuracy() const { return total == 0 ? 0.0 : static_cast<double>(correct) / total; }
  double precision(size_t i) const {
    const int p = predicted(i);
    return p == 0 ? 0.0 : static_cast<double>(confusion[i][i]) / p;
  }
  double recall(size_t i) const {
    const int s = support(i);
    return s == 0 ? 0.0 : static_cast<double>(confusion[i][i]) / s;
  }
  double f1(size_t i) const {
    const double p = precision(i);
    const double r = recall(i);
    return p + r == 0.0 ? 0.0 : 2.0 * p * r / (p + r);
  }
  // The unweighted mean F1 over the classes that occur in the gold labels:
  // CLUE has no neutral, and a class nobody labelled says nothing about the
  // analyzer (a neutral prediction on CLUE still costs recall elsewhere).
  double macroF1() const {
    double sum = 0;
    int classes = 0;
    for (size_t i = 0; i < kEmotionCount; ++i) {
      if (support(i) == 0) continue;
      sum += f1(i);
      ++classes;
    }
    return classes == 0 ? 0.0 : sum / classes;
  }
  // The share of the most frequent gold class: what always guessing it scores.
  double majorityBaseline() const {
    int best = 0;
    for (size_t i = 0; i < kEmotionCount; ++i) best = std::max(best, support(i));
    return total == 0 ? 0.0 : static_cast<double>(best) / total;
  }

  // On a set with no neutral gold label (CLUE), a neutral prediction means the
  // analyzer found no feeling at all: coverage is the share of messages it
  // committed to an emotion, and answeredAccuracy its accuracy on those.
  double coverage() const {
    const size_t neutral = kEmotionCount - 1;
    return total == 0 ? 0.0 : 1.0 - static_cast<double>(predicted(neutral)) / total;
  }
  double answeredAccuracy() const {
    const int answered = total - predicted(kEmotionCount - 1);
    return answered == 0 ? 0.0 : static_cast<double>(correct) / answered;
  }

  // A plain-text table: the summary line, per-class precision/recall/F1, and
  // the confusion matrix (rows gold, columns predicted).
  std::string format() const {
    std::string out;
    char buf[256];
    std::snprintf(buf, sizeof buf, "n=%d  accuracy=%.1f%%  macro-F1=%.3f  majority-class=%.1f%%\n",
                  total, 100.0 * accuracy(), macroF1(), 100.0 * majorityBaseline());
    out += buf;
    if (support(kEmotionCount - 1) == 0 && total > 0) {
      std::snprintf(buf, sizeof buf,
                    "no neutral gold label: answered %.1f%% of messages, %.1f%% of those right\n",
                    100.0 * coverage(), 100.0 * answeredAccuracy());
      out += buf;
    }
    if (stage_total > 0) {
      std::snprintf(buf, sizeof buf, "relationship_stage: %d/%d labelled rows right\n",
                    stage_correct, stage_total);
      out += buf;
    }
    out += "\nclass       support  precision  recall     F1\n";
    for (size_t i = 0; i < kEmotionCount; ++i) {
      std::snprintf(buf, sizeof buf, "%-10s  %7d  %9.3f  %6.3f  %5.3f\n",
                    std::string(kEmotions[i]).c_str(), support(i), precision(i), recall(i), f1(i));
      out += buf;
    }
    out += "\nconfusion (rows gold, columns predicted)\n           ";
    for (std::string_view e : kEmotions) {
      std::snprintf(buf, sizeof buf, " %5.5s", std::string(e).c_str());
      out += buf;
    }
    out += '\n';
    for (size_t g = 0; g < kEmotionCount; ++g) {
      std::snprintf(buf, sizeof buf, "%-10s ", std::string(kEmotions[g]).c_str());
      out += buf;
      for (size_t p = 0; p < kEmotionCount; ++p) {
        std::snprintf(buf, sizeof buf, " %5d", confusion[g][p]);
        out += buf;
      }
      out += '\n';
    }
    return out;
  }
};

// The analyzer's input for a labelled sample (Sample or ActSample).
template <typename LabelledSample>
AnalyzeInput inputOf(const LabelledSample& s) {
  AnalyzeInput in;
  in.message = s.message;
  in.context = s.context;
  in.scene = s.scene;
  return in;
}

// A sample the analyzer got wrong, for the tool's --misses listing.
struct Miss {
  const Sample* sample = nullptr;
  std::string predicted;
};

// Runs analyze() on every sample. Misses are collected when misses != nullptr.
inline Report evaluate(const Engine& engine, const std::vector<Sample>& samples,
                       std::vector<Miss>* misses = nullptr) {
  Report r;
  for (const Sample& s : samples) {
    const Result<Analysis> a = engine.analyze(inputOf(s));
    const int gold = emotionIndex(s.emotion);
    const int pred = a.isOk() ? emotionIndex(a.value().emotion) : -1;
    if (gold < 0 || pred < 0) {
      ++r.total;
      ++r.failed;
      if (misses != nullptr) misses->push_back({&s, "error"});
      continue;
    }
    r.add(static_cast<size_t>(gold), static_cast<size_t>(pred));
    if (gold != pred && misses != nullptr) misses->push_back({&s, a.value().emotion});
    if (!s.stage.empty()) {
      ++r.stage_total;
      if (a.value().relationship_stage == s.stage) ++r.stage_correct;
    }
  }
  return r;
}

// Where the answers come from (BuiltinEngine::emotionSourcesOf): the same
// samples scored three times, by the lexicon's words alone, by the example
// posts alone, and by the analyzer, which combines them. Shows which source
// a rule or a new example moves, and which one errs (docs/engine.md).
struct SourceReports {
  Report words;
  Report examples;
  Report emotion;
};

inline SourceReports evaluateSources(const BuiltinEngine& engine,
                                     const std::vector<Sample>& samples) {
  SourceReports r;
  for (const Sample& s : samples) {
    const BuiltinEngine::EmotionSources got = engine.emotionSourcesOf(inputOf(s));
    const int gold = emotionIndex(s.emotion);
    const int words = emotionIndex(got.words);
    const int examples = emotionIndex(got.examples);
    const int emotion = emotionIndex(got.emotion);
    if (gold < 0 || words < 0 || examples < 0 || emotion < 0) {
      for (Report* report : {&r.words, &r.examples, &r.emotion}) {
        ++report->total;
        ++report->failed;
      }
      continue;
    }
    const auto g = static_cast<size_t>(gold);
    r.words.add(g, static_cast<size_t>(words));
    r.examples.add(g, static_cast<size_t>(examples));
    r.emotion.add(g, static_cast<size_t>(emotion));
  }
  return r;
}

// ---------------------------------------------------------------------------
// Speech acts (tests/data/acts_*.tsv): message<TAB>act[<TAB>context<TAB>scene],
// scored against BuiltinEngine::actOf.

inline constexpr std::array<std::string_view, 13> kActs = {
    "invite",         "ask",           "request_favour",        "share_good_news",
    "confide_trouble", "complain_about_reader", "apologize",  "thank",
    "reject_or_breakup", "confess_feelings", "flirt",          "test_reader",
    "small_talk"};
inline constexpr size_t kActCount = kActs.size();

inline int actIndex(std::string_view name) {
  for (size_t i = 0; i < kActCount; ++i) {
    if (kActs[i] == name) return static_cast<int>(i);
  }
  return -1;
}

struct ActSample {
  std::string message;
  std::string act;
  std::string context;
  std::string scene;
  int line = 0;
};

inline Result<std::vector<ActSample>> parseActTsv(std::string_view text, std::string_view name) {
  std::vector<ActSample> out;
  Status st = detail::forEachLine(text, [&](int number, std::string_view line) {
    if (line.empty() || line.front() == '#') return Status::ok();
    const auto f = detail::splitTabs(line);
    if (f.size() < 2 || f[0].empty() || actIndex(f[1]) < 0) {
      return Status(400, std::string(name) + ":" + std::to_string(number) +
                             ": want message<TAB>act[<TAB>context<TAB>scene]");
    }
    ActSample s;
    s.message = std::string(f[0]);
    s.act = std::string(f[1]);
    if (f.size() > 2) s.context = std::string(f[2]);
    if (f.size() > 3) s.scene = std::string(f[3]);
    s.line = number;
    out.push_back(std::move(s));
    return Status::ok();
  });
  if (!st.isOk()) return st;
  return out;
}

// Accuracy and macro-F1 (over the acts present in the gold labels).
struct ActReport {
  std::array<std::array<int, kActCount>, kActCount> confusion{};
  int total = 0;
  int correct = 0;
  std::vector<std::pair<const ActSample*, std::string>> misses;

  double accuracy() const { return total == 0 ? 0.0 : static_cast<double>(correct) / total; }
  double macroF1() const {
    double sum = 0;
    int classes = 0;
    for (size_t i = 0; i < kActCount; ++i) {
      int support = 0;
      int predicted = 0;
      for (size_t j = 0; j < kActCount; ++j) {
        support += confusion[i][j];
        predicted += confusion[j][i];
      }
      if (support == 0) continue;
      const double p = predicted == 0 ? 0.0 : static_cast<double>(confusion[i][i]) / predicted;
      const double r = static_cast<double>(confusion[i][i]) / support;
      sum += p + r == 0.0 ? 0.0 : 2.0 * p * r / (p + r);
      ++classes;
    }
    return classes == 0 ? 0.0 : sum / classes;
  }
  std::string format() const {
    char buf[160];
    std::snprintf(buf, sizeof buf, "acts: n=%d  accuracy=%.1f%%  macro-F1=%.3f\n", total,
                  100.0 * accuracy(), macroF1());
    return buf;
  }
};

inline ActReport evaluateActs(const BuiltinEngine& engine, const std::vector<ActSample>& samples) {
  ActReport r;
  for (const ActSample& s : samples) {
    const std::string got = engine.actOf(inputOf(s));
    const int gold = actIndex(s.act);
    const int pred = actIndex(got);
    ++r.total;
    if (gold < 0 || pred < 0) continue;
    ++r.confusion[static_cast<size_t>(gold)][static_cast<size_t>(pred)];
    if (gold == pred) {
      ++r.correct;
    } else {
      r.misses.emplace_back(&s, got);
    }
  }
  return r;
}

}  // namespace eq::engine::builtin::eval
