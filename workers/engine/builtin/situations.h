// What happened: the everyday situation a message is in (a proposal, a pet's
// death, a birthday wish to the reader, a boss's request), read from cue
// words, the request's context and its scene, and from its likeness to
// example messages of every situation (situation_model.h), and what the
// reader can send back in it (docs/engine.md, "Situations"; the map is
// docs/situations.md).
//
// Feelings alone misread such messages: "嫁给我好吗？" is a question by its
// shape and a proposal by what it does, "我的猫昨天走了" has no word of
// sadness in it, and a wish turned into the reader's own words by a pronoun
// swap ("Hope I have an amazing day!") is no reply at all. So a message is
// first read for its situation; a message in a known situation is answered
// from sentences written for that situation, by the strategies it allows,
// and the reply never contains what the situation forbids (its guard).
//
// Ownership and threads: BuiltinEngine::create() parses situations.tsv into
// one Situations (parseSituations) that never changes afterwards; read() is
// const and safe on any number of threads. Destroyed with the engine.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "workers/engine/builtin/situation_model.h"
#include "workers/engine/builtin/trie.h"
#include "workers/engine/builtin/vocabulary.h"

namespace eq::engine::builtin::detail {

// The best reading of a message, when one situation's cues are strong
// enough; situation indexes Situations::ids().
struct SituationReading {
  int situation = -1;
  // The cues' score of the situation; 0 when the reading is the examples'
  // alone and the cues read another situation or none.
  int score = 0;
  // The situation the cues alone read (-1 for none): what the words say,
  // whatever the examples make of the whole.
  int cues = -1;
  // A situation the message came close to being read as (within
  // Situations::kNearMargin of the best under the examples): a reply that
  // breaks its guard would be wrong if that reading were the right one.
  struct Near {
    int situation = -1;
    double gap = 0;  // how far below the best its log-likelihood is
  };
  std::vector<Near> near;  // closest first
  bool found() const { return situation >= 0; }
};

// The speech act the analyzer reads in a message, its context and scene.
using ActOf = std::function<Act(std::string_view, std::string_view, std::string_view)>;

// One reply written for a situation, in the strategy it takes.
struct SituationReply {
  Strategy strategy = Strategy::kEmpathize;
  std::string text;
  // How many situations of its language have a guard the reply breaks:
  // the fewer, the safer it is outside the situation it was written for.
  int guardsBroken = 0;
};

class Situations {
 public:
  // A situation is read when its score reaches this: one strong cue (4 to
  // 6), or a typical cue with a hint from the context or the scene.
  static constexpr int kMinScore = 3;
  // With examples (parseSituationExamples), what the cues read adds this to
  // its situation's log-likelihood under the examples (situation_model.h):
  // a strong cue outweighs a few pieces of text that lean elsewhere.
  static constexpr double kCueBonus = 8.0;
  // Without a cue, the examples must know at least this many pieces of the
  // message's own text to read it: a lone "好" or "asdfghjkl" is no
  // situation, and is answered from its feelings.
  static constexpr int kMinEvidence = 2;
  // How close (in log-likelihood) another situation's reading must come to
  // the best one's for its guard to hold too (SituationReading::near).
  // Chosen by leaving each of blind batches 4 to 6 out of the examples in
  // turn (docs/engine.md, "Guards"): 16 breaks more guards, 32 passes fewer
  // rubric lines.
  static constexpr double kNearMargin = 24.0;

  // The message's situation. message and context are the request's text;
  // scene its scene name ("" for none); act the speech act the analyzer
  // read (acts.h), which adds its weight to the situations it points at.
  // With examples, the situation is the one most likely under them (the
  // cues' reading adding kCueBonus to its own), and the situations within
  // kNearMargin of it are its near ones; without, the cues' reading.
  SituationReading read(Lang lang, std::string_view message, std::string_view context,
                        std::string_view scene, Act act) const;

  const std::vector<std::string>& ids() const { return ids_; }
  int indexOf(std::string_view id) const;
  // The situation's replies in its language, in the data file's order: the
  // first reply's strategy is the situation's main one.
  const std::vector<SituationReply>& replies(Lang lang, int situation) const {
    return lang_[idx(lang)].info[static_cast<size_t>(situation)].replies;
  }
  // What the message is and what the replies do (eq_analysis), the
  // sender's need and the advice to the reader (analyze).
  const std::string& why(Lang lang, int situation) const { return info(lang, situation).why; }
  const std::string& need(Lang lang, int situation) const { return info(lang, situation).need; }
  const std::string& advice(Lang lang, int situation) const {
    return info(lang, situation).advice;
  }
  // What no reply in the situation may contain (lower-case substrings).
  const std::vector<std::string>& guard(Lang lang, int situation) const {
    return info(lang, situation).guard;
  }
  // Whether text (a reply in lang) contains any of the situation's guard
  // substrings, compared in lower case.
  bool breaksGuard(Lang lang, int situation, std::string_view text) const;
  // The emotion a reading of the situation sets, whatever the words say (a
  // death is sadness though "走了" is not a word of feeling); nullopt for
  // the situations whose emotion the analyzer reads as usual.
  std::optional<Emotion> emotion(int situation) const {
    return emotion_[static_cast<size_t>(situation)];
  }

  // The situation's precedence tier: 1 (danger, death and loss) to 6.
  int tier(int situation) const { return tier_[static_cast<size_t>(situation)]; }

  friend Status parseSituations(std::string_view text, Situations* out);
  friend Status parseSituationExamples(std::string_view text, const ActOf& actOf,
                                       Situations* out);

 private:
  // A cue and the situation it counts for. A gap cue ("猫…走了") is two
  // patterns; its second part must start within kMaxGap units (code points
  // in Chinese, words in English) of the first's end.
  struct CueRef {
    int32_t situation;
    int32_t weight;
  };
  struct GapCue {
    int32_t first, second;  // pattern ids
    CueRef ref;
  };
  // The cues matched against one text (the message, or the context).
  struct CueSet {
    Trie trie;                                // pattern text -> pattern id
    std::vector<std::vector<CueRef>> plain;   // per pattern: the cues that are it alone
    std::vector<GapCue> gaps;
    int32_t pattern(std::string_view text);  // the id of text, added when new
    void score(Lang lang, std::string_view text, std::vector<int>* scores) const;
  };
  struct Info {
    std::vector<SituationReply> replies;
    std::string why, need, advice;
    std::vector<std::string> guard;
    std::array<int, kSceneCount> scene{};  // weight per scene
  };
  struct LangData {
    CueSet message, context;
    std::vector<Info> info;  // per situation
  };

  // The reading of the cue words alone.
  SituationReading readCues(Lang lang, std::string_view message, std::string_view context,
                            std::string_view scene, Act act) const;
  const Info& info(Lang lang, int situation) const {
    return lang_[idx(lang)].info[static_cast<size_t>(situation)];
  }
  int add(std::string_view id);  // the index of id, added when new

  std::vector<std::string> ids_;
  std::vector<int> tier_;                     // precedence: 1 outranks 6
  std::vector<std::array<int, kActCount>> act_;  // weight per speech act
  std::vector<std::optional<Emotion>> emotion_;
  std::array<LangData, kLangCount> lang_;
  SituationModel model_;  // empty without examples: the cues alone decide
};

// situations.tsv: "kind<TAB>lang<TAB>situation<TAB>key<TAB>text" (format at
// the top of the file). Every situation needs a tier, and in each language
// at least five replies, a why, a need, an advice and a guard; no reply may
// break its own guard.
Status parseSituations(std::string_view text, Situations* out);

// situation_examples.tsv, after parseSituations: messages written for each
// situation, "lang<TAB>situation<TAB>scene<TAB>context<TAB>message" (scene
// and context may be "-" for none). With them a message's situation is the
// one its text is most like, the cue reading weighing in (kCueBonus); every
// message with enough known text (kMinEvidence) is then read as some
// situation. actOf is the analyzer's speech act of an example (message,
// context, scene).
Status parseSituationExamples(std::string_view text, const ActOf& actOf, Situations* out);

// The text the cues are matched against: lower-case ASCII, full-width
// letters and digits folded, and for English words separated by single
// spaces with a space at each end (so that " hi " matches the word only).
// stretch: for English, letters repeated three times or more are kept
// twice ("sooo" -> "soo"); without it, once ("sooo" -> "so").
std::string cueText(Lang lang, std::string_view text, bool stretch);

}  // namespace eq::engine::builtin::detail
