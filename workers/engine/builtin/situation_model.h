// A situation reader learnt from examples: naive Bayes over the pieces of a
// message (docs/engine.md, "Situations").
//
// Cue words catch what the map names ("嫁给我", "passed away") but people
// rarely use the map's words: "你英语说得也太溜了" is a compliment with no
// cue of one, "dbq 我忘了" an apology. Messages written for each situation
// by people who never saw the engine (situation_examples.tsv) teach what
// such messages are made of: for Chinese every run of one to three
// characters, for English every word and pair of adjacent words (the
// message's start and end counted as words); the context's runs of one or
// two characters, or its words, scored at half weight; the scene; and the
// speech act the analyzer reads, scored at kActWeight. (The weights apply
// when a message is scored; an example counts each of its pieces once.) A message's
// score for a situation is how likely its known pieces are among that
// situation's examples (multinomial naive Bayes over presence, additive
// smoothing, every situation equally likely before the message is read).
//
// Ownership and threads: filled by add() while situation_examples.tsv is
// parsed (parseSituationExamples), frozen by finish(); scores() is const and safe on any number of
// threads afterwards.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "workers/engine/builtin/vocabulary.h"

namespace eq::engine::builtin::detail {

class SituationModel {
 public:
  // A piece of a message: a key (a hash of its kind and text), its weight
  // in the score, and whether it is evidence from the message's own text
  // (not its start or end, the context, the scene or the act).
  struct Piece {
    uint64_t key;
    double weight;
    bool evidence;
  };
  using Pieces = std::vector<Piece>;

  // The additive smoothing of every piece's count.
  static constexpr double kSmoothing = 0.1;
  // The weight of a piece of the context against one of the message.
  static constexpr double kContextWeight = 0.5;
  // The weight of the speech act the analyzer reads (acts.h), a piece too:
  // "where did you grow up?" is a question before it is anything else.
  static constexpr double kActWeight = 4.0;

  // Adds one example of situation (an index of Situations::ids()).
  void add(Lang lang, int situation, std::string_view message, std::string_view context,
           std::string_view scene, Act act);
  // Turns the counts into weights; situations is the number of situations.
  // Call once, after the last add().
  void finish(int situations);

  bool trained(Lang lang) const { return !lang_[idx(lang)].base.empty(); }
  size_t examples(Lang lang, int situation) const;

  // Per situation, the log-likelihood of the message's known pieces among
  // the situation's examples; a situation without examples in lang gets
  // kUnseen. Empty when lang has no examples at all.
  // *evidence, when given, is the number of the message's own pieces the
  // examples know: what the reading rests on (a lone "好" is one).
  static constexpr double kUnseen = -1e30;
  std::vector<double> scores(Lang lang, std::string_view message, std::string_view context,
                             std::string_view scene, Act act, int* evidence = nullptr) const;

 private:
  static Pieces piecesOf(Lang lang, std::string_view message, std::string_view context,
                         std::string_view scene, Act act);

  struct LangModel {
    std::unordered_map<uint64_t, int32_t> ids;  // piece key -> id
    // While adding: one (piece id, situation) per example a piece occurs in.
    std::vector<std::pair<int32_t, int32_t>> seen;
    std::vector<size_t> examples;  // per situation
    // After finish(): per piece, the situations it was seen in and the log
    // weight it adds to them above an unseen piece's.
    std::vector<std::vector<std::pair<int32_t, float>>> lift;
    // Per situation: an unseen piece's log-probability (kUnseen when the
    // situation has no examples).
    std::vector<double> base;
  };
  std::array<LangModel, kLangCount> lang_;
};

}  // namespace eq::engine::builtin::detail
