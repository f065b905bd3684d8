// engine_eval: measures the built-in analyzer's emotion labels against a
// labelled file and prints accuracy, macro-F1, per-class precision/recall and
// the confusion matrix (the numbers in docs/engine.md).
//
//   engine_eval [--misses] FILE...
//
// FILE is either the project's TSV (tests/data/eval_*.tsv) or, when its name
// ends in .jsonl, the CLUE emotion format ({"id","content","label"}). The
// engine data is read from EQ_ENGINE_DATA_DIR (default
// workers/engine/builtin/data, relative to the working directory), so a
// changed lexicon is measured without rebuilding. --misses lists every
// message of a TSV file that was labelled wrong; it is never applied to CLUE,
// whose sentences stay out of our logs and notes (shared/data/README.md).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "workers/engine/builtin/builtin_engine.h"
#include "workers/engine/builtin/evaluation.h"

namespace {

namespace eval = eq::engine::builtin::eval;
using eq::engine::builtin::BuiltinEngine;

bool readFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

bool endsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool listMisses = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--misses") {
      listMisses = true;
    } else if (arg == "-h" || arg == "--help") {
      std::printf("usage: engine_eval [--misses] FILE.tsv|FILE.jsonl...\n");
      return 0;
    } else {
      files.push_back(arg);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: engine_eval [--misses] FILE.tsv|FILE.jsonl...\n");
    return 2;
  }

  const char* env = std::getenv("EQ_ENGINE_DATA_DIR");
  const std::string dir = (env != nullptr && *env != '\0') ? env : "workers/engine/builtin/data";
  std::string lexicon;
  std::string phrases;
  if (!readFile(dir + "/lexicon.tsv", &lexicon) || !readFile(dir + "/phrases.tsv", &phrases)) {
    std::fprintf(stderr, "engine_eval: cannot read %s/{lexicon,phrases}.tsv (set EQ_ENGINE_DATA_DIR)\n",
                 dir.c_str());
    return 1;
  }
  auto created = BuiltinEngine::create(lexicon, phrases);
  if (!created.isOk()) {
    std::fprintf(stderr, "engine_eval: %s\n", created.status().msg().c_str());
    return 1;
  }
  const std::unique_ptr<BuiltinEngine> engine = std::move(created).value();

  int status = 0;
  for (const std::string& path : files) {
    std::string text;
    if (!readFile(path, &text)) {
      std::fprintf(stderr, "engine_eval: cannot read %s\n", path.c_str());
      status = 1;
      continue;
    }
    const bool clue = endsWith(path, ".jsonl");
    auto samples = clue ? eval::parseClueJsonl(text, path) : eval::parseTsv(text, path);
    if (!samples.isOk()) {
      std::fprintf(stderr, "engine_eval: %s\n", samples.status().msg().c_str());
      status = 1;
      continue;
    }
    std::vector<eval::Miss> misses;
    const eval::Report report =
        eval::evaluate(*engine, samples.value(), (listMisses && !clue) ? &misses : nullptr);
    std::printf("== %s\n%s\n", path.c_str(), report.format().c_str());
    for (const eval::Miss& m : misses) {
      std::printf("miss %s:%d  gold=%s  got=%s  %s\n", path.c_str(), m.sample->line,
                  m.sample->emotion.c_str(), m.predicted.c_str(), m.sample->message.c_str());
    }
    if (!misses.empty()) std::printf("\n");
  }
  return status;
}
