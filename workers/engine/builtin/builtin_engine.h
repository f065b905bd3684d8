// The built-in engine (docs/contract.md §8): a lexicon- and rule-based emotion
// analyzer and reply composer, Chinese first and English second, that needs no
// model and gives the same output for the same input.
//
// Ownership and threads: create() parses the two data texts (the emotion
// lexicon and the reply phrase bank, embedded into the binary by the build)
// into lookup tables that the object owns and never changes afterwards, so
// analyze() and reply() may run on any number of threads at once. The worker's
// context object owns the engine through a unique_ptr and destroys it at
// shutdown; nothing outlives it and it holds no thread, socket or file.
//
// How a message is read, in short: the text is normalized (ASCII lower-cased,
// full-width punctuation folded, letter stretches like "sooo" collapsed), then
// scanned once by longest match against a byte trie of the lexicon, which
// handles multi-byte UTF-8 and English word boundaries alike. The hits (emotion
// terms, degree adverbs, negations, contrast words, clause breaks) are folded
// left to right into per-emotion scores; the stage comes from the context and
// the scene. Replies are phrase-bank templates filled with a key term echoed
// from the message, ranked by a documented score (Composer::candidates,
// composer.h). builtin_engine.cc lists the files that do each step.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "workers/engine/engine.h"

namespace eq::engine::builtin {

namespace detail {
struct Signals;
class Composer;
struct SituationReading;
}  // namespace detail

class BuiltinEngine final : public eq::engine::Engine {
 public:
  // Parses the lexicon, the phrase bank, the example posts, the situations
  // and the situations' example messages (formats are described at the top
  // of each data file). Without situation examples the situations are read
  // from their cue words alone. A malformed line, a phrase bank that cannot
  // serve every strategy in both languages, or examples missing an emotion
  // is a Status with code 500 whose message names the file, the line number
  // and what is wrong.
  static eq::Result<std::unique_ptr<BuiltinEngine>> create(
      std::string_view lexicon_tsv, std::string_view phrases_tsv, std::string_view examples_tsv,
      std::string_view situations_tsv, std::string_view situation_examples_tsv = {});

  ~BuiltinEngine() override;
  BuiltinEngine(const BuiltinEngine&) = delete;
  BuiltinEngine& operator=(const BuiltinEngine&) = delete;

  eq::Result<Analysis> analyze(const AnalyzeInput& in) const override;
  eq::Result<ReplyOutput> reply(const ReplyInput& in) const override;

  // The speech act the analyzer reads in the message ("invite",
  // "reject_or_breakup", ...; docs/engine.md): not part of the API's
  // analysis, exposed for tools/engine_eval and the unit tests.
  std::string actOf(const AnalyzeInput& in) const;

  // Where analyze()'s emotion comes from (docs/engine.md, "Reading by
  // example"): what the lexicon's words say alone, what the example posts say
  // alone, and the emotion analyze() reports after combining them. Emotion
  // names as in the API; not part of the API's analysis, exposed for
  // `tools/engine_eval --sources` and the unit tests.
  struct EmotionSources {
    std::string words;     // "neutral" when no word names a feeling
    std::string examples;  // their most likely class, neutral included, asked
                           // about every message whatever its length or
                           // shape; "neutral" when no character of it
                           // occurs in any example
    std::string emotion;   // what analyze() reports
  };
  EmotionSources emotionSourcesOf(const AnalyzeInput& in) const;

  // The situation the message is in (an id of docs/situations.md, such as
  // "death_of_pet"), or "" when no situation's cues are strong enough and
  // the reply is composed from the feelings read (docs/engine.md,
  // "Situations"). Not part of the API; for tools/engine_eval and the tests.
  std::string situationOf(const AnalyzeInput& in) const;
  // Whether a reply breaks the guard of a situation (what no reply in it may
  // contain), in the reply's language; false for an unknown situation.
  bool breaksSituationGuard(std::string_view situation, std::string_view reply) const;

 private:
  // The parsed, read-only tables (detail::Data, tables.h). Defined in the .cc
  // so that the lexicon and composer internals can grow without touching
  // every includer.
  struct Tables;

  explicit BuiltinEngine(std::unique_ptr<const Tables> tables);

  eq::Result<ReplyOutput> replyInSituation(const ReplyInput& in, const detail::Signals& sig,
                                           const detail::Composer& composer,
                                           const detail::SituationReading& sit) const;

  std::unique_ptr<const Tables> tables_;
};

}  // namespace eq::engine::builtin
