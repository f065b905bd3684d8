// engine_eval: measures the built-in analyzer's emotion labels against a
// labelled file and prints accuracy, macro-F1, per-class precision/recall and
// the confusion matrix (the numbers in docs/engine.md).
//
//   engine_eval [--misses] [--half even|odd] [--balanced N] [--sources] FILE...
//   engine_eval --reply MODE[:COUNT] [--scene S] [--context C] MESSAGE...
//
// A FILE named acts_*.tsv is a speech-act set (tests/data/acts_*.tsv): its
// act accuracy and macro-F1 are printed (--misses lists the wrong ones; never
// use it on the acts_holdout_* files while tuning).
// FILE is either the project's TSV (tests/data/eval_*.tsv) or, when its name
// ends in .jsonl, the CLUE emotion format ({"id","content","label"}). The
// engine data is read from EQ_ENGINE_DATA_DIR (default
// workers/engine/builtin/data, relative to the working directory), so a
// changed lexicon is measured without rebuilding. --misses lists every
// message of a TSV file that was labelled wrong; it is never applied to CLUE,
// whose sentences stay out of our logs and notes (shared/data/README.md).
//
// --half keeps only the even or the odd lines of each file, counted from 0
// (the first line is even). Rules are tried on the even half of CLUE and
// confirmed on the odd half, so that a rule that only fits the lines it was
// tried on shows up (docs/engine.md).
//
// --balanced N keeps N samples of every gold label (fewer where a label has
// fewer), the same ones on every run: the class-balanced view of CLUE, whose
// full split is dominated by two labels.
//
// --sources also scores each emotion file by the lexicon's words alone and by
// the example posts alone (BuiltinEngine::emotionSourcesOf), after the
// analyzer's own report: which source a change moved, and which one errs.
//
// A FILE named blind*.tsv is a blind batch of situations
// (tests/data/situations/): situation accuracy per situation, the most
// common misreadings, and the guards over every mode (no reply may contain
// what its gold situation forbids); blind*_rubric_*.tsv is scored by its
// rubric instead. Messages the engine's situation examples hold are left
// out (it has learnt them) unless --keep-known is given (the rubrics of
// batches 1 and 2, whose messages are examples now, still test the
// replies). --misses lists the misread messages and the
// failing replies: never use it on a batch before its first report.
// --exclude FILE leaves out the messages that FILE also has.
//
// --reply prints the analysis and the replies for each MESSAGE (MODE is fast,
// standard or perfect, COUNT 1..5, default 3), so replies can be read the way
// a user reads them while the phrase bank is edited.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "workers/engine/builtin/builtin_engine.h"
#include "workers/engine/builtin/evaluation.h"
#include "workers/engine/builtin/situation_evaluation.h"

namespace {

namespace eval = eq::engine::builtin::eval;
using eq::engine::builtin::BuiltinEngine;

constexpr const char* kUsage =
    "usage: engine_eval [--misses] [--half even|odd] [--balanced N] [--sources] "
    "[--exclude FILE] [--keep-known] FILE.tsv|FILE.jsonl...\n"
    "       engine_eval --reply MODE[:COUNT] [--scene S] [--context C] MESSAGE...\n";

bool readFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

bool endsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Prints the analysis and the replies of one message.
void printReplies(const BuiltinEngine& engine, eq::engine::Mode mode, int count,
                  const std::string& scene, const std::string& context, const std::string& msg) {
  eq::engine::AnalyzeInput a;
  a.message = msg;
  a.context = context;
  a.scene = scene;
  eq::engine::ReplyInput in;
  in.mode = mode;
  in.message = msg;
  in.context = context;
  in.scene = scene;
  in.reply_count = count;
  const auto analysis = engine.analyze(a);
  const auto out = engine.reply(in);
  std::printf("## %s%s%s\n", msg.c_str(), scene.empty() ? "" : "  [scene ",
              scene.empty() ? "" : (scene + "]").c_str());
  if (analysis.isOk()) {
    const eq::engine::Analysis& an = analysis.value();
    std::printf("   %s %.2f | %s | need: %s | strategy: %s\n        ", an.emotion.c_str(),
                an.intensity, an.relationship_stage.c_str(), an.underlying_need.c_str(),
                an.suggested_strategy.c_str());
  }
  if (!out.isOk()) {
    std::printf("   error: %s\n", out.status().msg().c_str());
    return;
  }
  for (const eq::engine::Reply& r : out.value().replies) {
    std::printf("   %.3f  %s\n          (%s)\n", r.score, r.text.c_str(), r.eq_analysis.c_str());
  }
}

// Scores a blind batch of situations, or its rubric; returns false when the
// file cannot be parsed.
bool evaluateBlind(const BuiltinEngine& engine, const std::string& path, const std::string& text,
                   const std::set<std::string>& exclude, bool listMisses) {
  const bool rubric = path.find("_rubric_") != std::string::npos;
  auto parsed = eval::parseSituationTsv(text, path, rubric);
  if (!parsed.isOk()) {
    std::fprintf(stderr, "engine_eval: %s\n", parsed.status().msg().c_str());
    return false;
  }
  std::vector<eval::SituationSample>& samples = parsed.value();
  const size_t before = samples.size();
  samples = eval::unknownTo(exclude, std::move(samples));
  std::printf("== %s (%zu samples", path.c_str(), samples.size());
  if (samples.size() != before) {
    std::printf(", %zu left out: the engine's situation examples or --exclude have them",
                before - samples.size());
  }
  std::printf(")\n");
  if (rubric) {
    const eval::RubricReport report = eval::evaluateRubric(engine, samples);
    std::printf("%s\n", report.format().c_str());
    if (listMisses) {
      for (const auto& [s, text] : report.failures) {
        std::printf("fail %s:%d [%s] %s -> %s\n", path.c_str(), s->line, s->situation.c_str(),
                    s->message.c_str(), text.c_str());
      }
    }
    return true;
  }
  const eval::SituationReport report = eval::evaluateSituations(engine, samples);
  const eval::GuardReport guards = eval::evaluateGuards(engine, samples);
  std::printf("%sguards broken: %d of %d replies\n", report.format().c_str(), guards.broken,
              guards.replies);
  for (const auto& [s, text] : guards.breaks) {
    std::printf("guard %s:%d [%s] -> %s\n", path.c_str(), s->line, s->situation.c_str(),
                text.c_str());
  }
  if (listMisses) {
    for (const auto& [s, got] : report.misses) {
      std::printf("miss %s:%d  gold=%s  got=%s  %s\n", path.c_str(), s->line,
                  s->situation.c_str(), got.empty() ? "(none)" : got.c_str(), s->message.c_str());
    }
  }
  std::printf("\n");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  bool listMisses = false;
  bool keepKnown = false;
  bool sources = false;
  std::string replyMode;
  std::string scene;
  std::string context;
  std::string half;
  int balanced = 0;
  std::string excludeFile;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--keep-known") {
      keepKnown = true;
    } else if (arg == "--misses") {
      listMisses = true;
    } else if (arg == "--exclude" && i + 1 < argc) {
      excludeFile = argv[++i];
    } else if (arg == "--sources") {
      sources = true;
    } else if (arg == "--balanced" && i + 1 < argc) {
      balanced = std::atoi(argv[++i]);
      if (balanced < 1) {
        std::fprintf(stderr, "engine_eval: --balanced takes a count per label (e.g. 60)\n");
        return 2;
      }
    } else if (arg == "--half" && i + 1 < argc) {
      half = argv[++i];
      if (half != "even" && half != "odd") {
        std::fprintf(stderr, "engine_eval: --half takes even or odd\n");
        return 2;
      }
    } else if ((arg == "--reply" || arg == "--scene" || arg == "--context") && i + 1 < argc) {
      (arg == "--reply" ? replyMode : arg == "--scene" ? scene : context) = argv[++i];
    } else if (arg == "-h" || arg == "--help") {
      std::printf("%s", kUsage);
      return 0;
    } else {
      files.push_back(arg);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }

  const char* env = std::getenv("EQ_ENGINE_DATA_DIR");
  const std::string dir = (env != nullptr && *env != '\0') ? env : "workers/engine/builtin/data";
  std::string lexicon;
  std::string phrases;
  std::string examples;
  std::string situations;
  std::string situationExamples;
  if (!readFile(dir + "/lexicon.tsv", &lexicon) || !readFile(dir + "/phrases.tsv", &phrases) ||
      !readFile(dir + "/examples.tsv", &examples) ||
      !readFile(dir + "/situations.tsv", &situations) ||
      !readFile(dir + "/situation_examples.tsv", &situationExamples)) {
    std::fprintf(stderr,
                 "engine_eval: cannot read %s/{lexicon,phrases,examples,situations,"
                 "situation_examples}.tsv (set EQ_ENGINE_DATA_DIR)\n",
                 dir.c_str());
    return 1;
  }
  auto created = BuiltinEngine::create(lexicon, phrases, examples, situations, situationExamples);
  if (!created.isOk()) {
    std::fprintf(stderr, "engine_eval: %s\n", created.status().msg().c_str());
    return 1;
  }
  const std::unique_ptr<BuiltinEngine> engine = std::move(created).value();

  if (!replyMode.empty()) {
    const size_t colon = replyMode.find(':');
    const std::string modeName = replyMode.substr(0, colon);
    const int count = colon == std::string::npos ? 3 : std::atoi(replyMode.c_str() + colon + 1);
    eq::engine::Mode mode = eq::engine::Mode::kFast;
    if (modeName == "standard") {
      mode = eq::engine::Mode::kStandard;
    } else if (modeName == "perfect") {
      mode = eq::engine::Mode::kPerfect;
    } else if (modeName != "fast") {
      std::fprintf(stderr, "engine_eval: --reply takes fast, standard or perfect\n");
      return 2;
    }
    if (count < 1 || count > 5) {
      std::fprintf(stderr, "engine_eval: reply count must be 1..5\n");
      return 2;
    }
    for (const std::string& msg : files) printReplies(*engine, mode, count, scene, context, msg);
    return 0;
  }

  std::set<std::string> exclude;
  if (!keepKnown) exclude = eval::exampleMessages(situationExamples);
  if (!excludeFile.empty()) {
    std::string text;
    auto parsed = readFile(excludeFile, &text)
                      ? eval::parseSituationTsv(text, excludeFile, false)
                      : eq::Result<std::vector<eval::SituationSample>>(
                            eq::Status(400, "cannot read " + excludeFile));
    if (!parsed.isOk()) {
      std::fprintf(stderr, "engine_eval: --exclude: %s\n", parsed.status().msg().c_str());
      return 2;
    }
    for (const eval::SituationSample& s : parsed.value()) exclude.insert(s.message);
  }

  int status = 0;
  for (const std::string& path : files) {
    std::string text;
    if (!readFile(path, &text)) {
      std::fprintf(stderr, "engine_eval: cannot read %s\n", path.c_str());
      status = 1;
      continue;
    }
    // A speech-act set (tests/data/acts_*.tsv): act accuracy and macro-F1.
    const std::string base = path.substr(path.find_last_of('/') + 1);
    if (base.rfind("blind", 0) == 0) {
      if (!evaluateBlind(*engine, path, text, exclude, listMisses)) status = 1;
      continue;
    }
    if (base.rfind("acts_", 0) == 0) {
      auto acts = eval::parseActTsv(text, path);
      if (!acts.isOk()) {
        std::fprintf(stderr, "engine_eval: %s\n", acts.status().msg().c_str());
        status = 1;
        continue;
      }
      const eval::ActReport report = eval::evaluateActs(*engine, acts.value());
      std::printf("== %s\n%s\n", path.c_str(), report.format().c_str());
      if (listMisses) {
        for (const auto& [sample, got] : report.misses) {
          std::printf("miss %s:%d  gold=%s  got=%s  %s\n", path.c_str(), sample->line,
                      sample->act.c_str(), got.c_str(), sample->message.c_str());
        }
      }
      continue;
    }
    const bool clue = endsWith(path, ".jsonl");
    auto samples = clue ? eval::parseClueJsonl(text, path) : eval::parseTsv(text, path);
    if (!samples.isOk()) {
      std::fprintf(stderr, "engine_eval: %s\n", samples.status().msg().c_str());
      status = 1;
      continue;
    }
    if (!half.empty()) {
      // Sample lines are 1-based: line 1 is line 0 counted from 0, so even.
      const int keep = half == "even" ? 1 : 0;
      std::erase_if(samples.value(), [keep](const eval::Sample& s) { return s.line % 2 != keep; });
    }
    if (balanced > 0) samples.value() = eval::balancedSample(std::move(samples).value(), balanced);
    std::vector<eval::Miss> misses;
    const eval::Report report =
        eval::evaluate(*engine, samples.value(), (listMisses && !clue) ? &misses : nullptr);
    std::printf("== %s\n%s\n", path.c_str(), report.format().c_str());
    if (sources) {
      const eval::SourceReports by = eval::evaluateSources(*engine, samples.value());
      std::printf("== %s, the words alone\n%s\n", path.c_str(), by.words.format().c_str());
      std::printf("== %s, the examples alone\n%s\n", path.c_str(), by.examples.format().c_str());
    }
    for (const eval::Miss& m : misses) {
      std::printf("miss %s:%d  gold=%s  got=%s  %s\n", path.c_str(), m.sample->line,
                  m.sample->emotion.c_str(), m.predicted.c_str(), m.sample->message.c_str());
    }
    if (!misses.empty()) std::printf("\n");
  }
  return status;
}
