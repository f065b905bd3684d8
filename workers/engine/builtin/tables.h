// The engine's parsed data: the lexicon (emotion terms with their kinds and
// tags, and the words that name a relationship stage), the reply phrase bank
// of each language, and the example posts, with the parsers that build them
// from the three TSV files in data/ (formats at the top of each file).
//
// Ownership and threads: BuiltinEngine::create() fills one Data (its Tables)
// through parseLexicon, parsePhrases and parseExamples, owns it through a
// unique_ptr and never changes it afterwards, so any number of threads may
// read it at once; it is destroyed with the engine.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "workers/engine/builtin/example_reader.h"
#include "workers/engine/builtin/situations.h"
#include "workers/engine/builtin/trie.h"
#include "workers/engine/builtin/vocabulary.h"

namespace eq::engine::builtin::detail {

enum class TermKind : uint8_t { kEmotion, kDegree, kPostDegree, kNegation, kContrast, kSkip };
// The kinds a lexicon line may name; "stage" (last) goes to the stage table
// and has no TermKind.
constexpr std::array<std::string_view, 7> kTermKindNames = {
    "emotion", "degree", "postdegree", "negation", "contrast", "skip", "stage"};

// Optional tags of an emotion term (fifth field). "news" marks a joy that
// reports an event (升职, got the job) rather than a mood (哈哈): only news
// calls for congratulations.
// not_joy and not_affection mark a lexicalized negation of a positive feeling
// (不开心, 心情不好): negated once more ("没有不开心", "我不是不开心") it affirms
// that feeling, weakly, instead of being cancelled like other negative terms.
// "rhetorical" marks a complaint shaped as a question to the reader (就不能,
// 有完没完, can't you just): the feeling stays the sender's and is not re-read
// as concern for the reader (attributeQuestions).
// "backoff" marks a single character with a strong emotional reading (惊, 羡,
// 馋) that counts, weakly, only when no word of the lexicon names a feeling:
// a post whose feeling sits in a compound the lexicon lacks (惊呆, 羡煞) is not
// left neutral, while a post that names its feeling is read by its words
// alone (scoreEmotion).
// "mirative" marks a word that says a fact was unexpected without saying how
// the writer feels about it (居然, 竟然, 没想到, 原来): "他居然当众挖鼻孔" is
// disgust and "居然考过了" joy. It reads as surprise only when no other word
// names a feeling.
enum TermTag : uint8_t {
  kTagNews = 1,
  kTagNotJoy = 2,
  kTagNotAffection = 4,
  kTagRhetorical = 8,
  kTagBackoff = 16,
  kTagMirative = 32,
};
constexpr std::array<std::string_view, 6> kTermTagNames = {"news",       "not_joy", "not_affection",
                                                           "rhetorical", "backoff", "mirative"};

struct Term {
  TermKind kind = TermKind::kSkip;
  Emotion emotion = Emotion::kNeutral;
  double value = 1.0;  // emotion: base strength in (0, 1]; degree: multiplier
  uint8_t tags = 0;    // TermTag bits
};

constexpr uint32_t kAllEmotions = (1u << kEmotionCount) - 1;
constexpr uint32_t kAllStages = (1u << kStageCount) - 1;

struct Phrase {
  std::string text;
  uint32_t emotions = kAllEmotions;  // bit per Emotion
  uint32_t stages = kAllStages;      // bit per Stage (need lines only)
  uint8_t slots = 0;
  uint8_t require = 0;  // Condition bits that must hold
  uint8_t forbid = 0;   // Condition bits that must not hold
  uint16_t acts = 0;    // Act bits ("@invite"); 0: any act
  int line = 0;         // stable id, also seeds the per-message jitter

  bool fitsEmotion(Emotion e) const { return (emotions >> idx(e)) & 1u; }
  bool fitsConditions(uint8_t conditions) const {
    return (require & ~conditions) == 0 && (forbid & conditions) == 0;
  }
  bool unconditional() const { return require == 0 && forbid == 0; }
  // How targeted the phrase is, in [0, 1]: written for one to three emotions
  // beats a broad list, which beats "*"; requiring a situation (a question, an
  // invitation) adds on top.
  double specificity() const {
    const int n = std::popcount(emotions);
    double spec = anyEmotion() ? 0.3 : n <= 3 ? 0.7 : 0.5;
    // A phrase written for an asked question is the only kind that says the
    // question back as reported speech, so it outranks any statement-shaped one.
    if (require != 0) spec += (require & kCondAsked) != 0 ? 0.6 : 0.3;
    return std::min(spec, 1.0);
  }
  bool anyEmotion() const { return emotions == kAllEmotions; }
  // acts: bit per Act from "@act" items; 0 means written for any act.
  bool fitsAct(Act a) const { return acts == 0 || ((acts >> idx(a)) & 1u) != 0; }
  bool forAct() const { return acts != 0; }
  bool fitsStage(Stage s) const { return (stages >> idx(s)) & 1u; }
  bool anyStage() const { return stages == kAllStages; }
};

struct LangTables {
  std::array<std::vector<Phrase>, kStrategyCount> replies;
  std::array<std::vector<Phrase>, kStrategyCount> whys;
  std::array<std::vector<Phrase>, kStrategyCount> advice;
  std::vector<Phrase> needs;
  std::array<std::string, kStrategyCount> strategy_names;
  std::array<std::string, kStageCount> stage_names;
  std::array<std::string, kSceneCount> scene_names;  // [0] (no scene) stays empty
  std::array<std::string, kEmotionCount> emotion_names;
};

// Everything create() parses. BuiltinEngine::Tables (declared in the header)
// derives from it, so that the engine's parts can name it while the public
// header only declares Tables.
struct Data {
  Trie terms;
  std::vector<Term> term_info;
  Trie stages;  // value: Stage index, or kStageCount for a shield entry ("none")
  std::array<LangTables, kLangCount> lang;
  ExampleReader examples;  // the team's example posts (parseExamples)
  Situations situations;   // situations.tsv and situation_examples.tsv
};
static_assert(ExampleReader::kClasses == kEmotionCount);

// Each parser reads one data file into *tables. A malformed line is a Status
// with code 500 whose message names the file, the line number and what is
// wrong; so is a file that leaves the engine unable to serve a message (no
// emotion term, no fallback phrase for a strategy in a language, no example
// for an emotion).
Status parseLexicon(std::string_view text, Data* tables);
Status parsePhrases(std::string_view text, Data* tables);
// examples.tsv: "emotion<TAB>text", one example post per line (format at the
// top of the file). Every emotion, neutral included, needs examples: a
// reader that has never seen one emotion would never answer it.
Status parseExamples(std::string_view text, Data* tables);

// The code points of normalized text without white space: what the example
// reader counts (example_reader.h), for the examples and for messages alike.
std::u32string exampleText(std::string_view normalized);

}  // namespace eq::engine::builtin::detail
