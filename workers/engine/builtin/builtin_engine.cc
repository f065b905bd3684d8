// The built-in engine. The file reads top to bottom in the order a request
// flows: vocabulary and UTF-8 helpers, the lexicon trie, parsing of the two
// data files, reading a message into Signals (emotion, intensity, stage, echo
// terms), fitting strategies to those signals, and composing replies.
//
// Everything here is a pure function of the parsed tables and the input: no
// clock, no randomness, no mutable state after create(). Where the output needs
// variety between messages, it comes from a hash of the input.
#include "workers/engine/builtin/builtin_engine.h"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "workers/engine/builtin/acts.h"
#include "workers/engine/builtin/example_reader.h"
#include "workers/engine/builtin/tables.h"
#include "workers/engine/builtin/text.h"
#include "workers/engine/builtin/trie.h"
#include "workers/engine/builtin/vocabulary.h"

namespace eq::engine::builtin {

struct BuiltinEngine::Tables : detail::Data {};

namespace detail {
namespace {

// ---------------------------------------------------------------------------
// Scanning. The message (normalized) becomes a list of hits in text order:
// lexicon terms, clause breaks, and bursts of "?!" that read as surprise.

constexpr int32_t kBreakHit = -1;
constexpr int32_t kBurstHit = -2;
constexpr int32_t kTildeHit = -3;
constexpr int32_t kEllipsisHit = -4;

struct Hit {
  size_t begin = 0;
  size_t end = 0;
  int32_t term = kBreakHit;  // >= 0: index into the trie's value space
};

// A term that ends inside an English word ("happy" in "happyish") does not
// count; a term that ends on a CJK character needs no boundary.
auto wordEndAcceptor(std::string_view text) {
  return [text](size_t end) {
    if (end >= text.size()) return true;
    return !isWordByte(static_cast<unsigned char>(text[end - 1])) ||
           !isWordByte(static_cast<unsigned char>(text[end]));
  };
}

std::vector<Hit> scan(const Trie& trie, std::string_view text) {
  std::vector<Hit> hits;
  const auto accept = wordEndAcceptor(text);
  size_t pos = 0;
  while (pos < text.size()) {
    const auto b = static_cast<unsigned char>(text[pos]);
    const auto [len, value] = trie.longest(text, pos, accept);
    if (len > 0) {
      hits.push_back({pos, pos + len, value});
      pos += len;
      continue;
    }
    if (isWordByte(b)) {
      while (pos < text.size() && isWordByte(static_cast<unsigned char>(text[pos]))) ++pos;
      continue;
    }
    char32_t cp = 0;
    const size_t cpLen = decodeUtf8(text, pos, &cp);
    if (cp == '?' || cp == '!') {
      // A run like "??" or "?!" is a clause break that also reads as surprise.
      size_t end = pos;
      int questions = 0;
      int bangs = 0;
      while (end < text.size() && (text[end] == '?' || text[end] == '!')) {
        (text[end] == '?' ? questions : bangs) += 1;
        ++end;
      }
      const bool burst = questions >= 2 || (questions >= 1 && bangs >= 1);
      hits.push_back({pos, end, burst ? kBurstHit : kBreakHit});
      pos = end;
      continue;
    }
    if (cp == '~') {
      // A wave dash ends a clause and, in Chinese online writing, gives it a
      // light, playful tone ("要开始努力啦～"): a weak joy cue that only
      // decides a message with no stronger feeling in it.
      size_t end = pos;
      while (end < text.size() && text[end] == '~') ++end;
      hits.push_back({pos, end, kTildeHit});
      pos = end;
      continue;
    }
    if (cp == 0x2026 || cp == 0x3002 || cp == '.') {
      // A trailed-off sentence ("……", "。。。", "...") sighs: in Chinese
      // online writing it leaves something unsaid, mostly weariness or regret.
      // One "。" or "." is a plain full stop.
      size_t end = pos;
      int dots = 0;
      char32_t next = 0;
      while (end < text.size()) {
        const size_t l = decodeUtf8(text, end, &next);
        if (next != 0x2026 && next != 0x3002 && next != '.') break;
        dots += next == 0x2026 ? 3 : 1;
        end += l;
      }
      hits.push_back({pos, end, dots >= 3 ? kEllipsisHit : kBreakHit});
      pos = end;
      continue;
    }
    if (isClauseBreak(cp)) hits.push_back({pos, pos + cpLen, kBreakHit});
    pos += cpLen;
  }
  return hits;
}

// ---------------------------------------------------------------------------
// Reading a message.

// How far (in units) a modifier reaches forward to the emotion term it
// modifies: "不觉得你烦" has three units between 不 and 烦.
constexpr size_t kNegationWindow = 3;
constexpr size_t kDegreeWindow = 2;
constexpr size_t kPostDegreeWindow = 1;
// "A, but B": what came before the contrast word counts less, what follows
// counts more.
constexpr double kBeforeContrast = 0.4;
constexpr double kAfterContrast = 1.5;
// "不太开心" is milder than "开心" is strong: a degree word inside a negation
// softens instead of amplifying.
constexpr double kNegatedDegree = 0.6;
// "不是不喜欢" affirms, but more weakly than "喜欢".
constexpr double kDoubleNegation = 0.7;
constexpr double kBurstStrength = 0.4;
// A trailing wave dash ("～") is a weak joy cue: strong enough to decide a
// message that names no feeling, too weak to outvote any lexicon term.
constexpr double kTildeStrength = 0.2;
// A trailing-off ellipsis ("……") is a weak sadness cue, on the same footing.
constexpr double kEllipsisStrength = 0.2;
// The share of affection that turns into sadness when both are present
// (scoreEmotion).
constexpr double kLoveLament = 0.5;
// ...but only when the sadness is at least this share of the affection.
constexpr double kLamentShare = 0.5;
// The share of affection that counts as joy when both are present in a message
// addressed to no one (scoreEmotion).
constexpr double kSharedDelight = 0.5;
// A backoff character (kTagBackoff) weighs this share of its listed strength:
// together with a "～" or "??" cue it still decides, but two hints of another
// feeling outweigh one character.
constexpr double kBackoffWeight = 0.5;
// Below this total score a category is noise and the message is neutral.
constexpr double kMinEmotionScore = 0.05;
// Reading by example (example_reader.h). The words decide; the examples add
// kExampleWeight times their probability to each emotion's share of the
// lexicon's score, so they settle a message whose words are split between
// feelings, and read one whose words name none. A message with no feeling
// word stays neutral unless the examples favour an emotion over neutral by
// kExampleMargin. Only messages with at least kExampleMinIdeographs Chinese
// characters are read this way (the examples are Chinese, and a chat line as
// short as "好的" or "我到了" is not enough to go on); an emotion read from
// the examples alone is reported at kExampleIntensity times its probability:
// never strongly, since no word said it.
constexpr double kExampleWeight = 0.2;
constexpr double kExampleMargin = 0.3;
constexpr size_t kExampleMinIdeographs = 6;
constexpr double kExampleIntensity = 0.5;

// What a single negation does to a term: positive feelings turn into their
// opposite (weaker), negative ones and surprise are simply cancelled ("一点也
// 不生气" is not anger, and not joy either).
std::optional<std::pair<Emotion, double>> negationFlip(Emotion e) {
  switch (e) {
    case Emotion::kJoy:
      return std::make_pair(Emotion::kSadness, 0.7);
    case Emotion::kAffection:
      return std::make_pair(Emotion::kDisgust, 0.5);
    default:
      return std::nullopt;
  }
}

struct EmotionHit {
  Emotion emotion = Emotion::kNeutral;
  double strength = 0;    // base strength times degree, negation and post-degree
  double weight = 1;      // contrast weighting
  size_t feel_begin = 0;  // the words to echo back ("不开心" when negated)
  size_t feel_end = 0;
  size_t chain_begin = 0;  // including modifiers ("好生气", "开心死了")
  size_t chain_end = 0;
  size_t clause = 0;  // index into the clause list
  bool echoable = true;
  bool news = false;
  bool rhetorical = false;  // a complaint shaped as a question: stays the sender's
  bool backoff = false;     // a single character that counts only without a word (kTagBackoff)
  bool mirative = false;    // "unexpectedly": surprise only without another feeling (kTagMirative)
  bool cue = false;         // punctuation ("??", "～"), not a lexicon term
};

struct Signals {
  Lang lang = Lang::kEn;
  Emotion emotion = Emotion::kNeutral;
  // What the words alone say (before the examples weigh in, scoreEmotion):
  // a complaint about the reader must be said in words (readAct).
  Emotion worded_emotion = Emotion::kNeutral;
  double intensity = 0;
  Stage stage = Stage::kUnknown;
  Scene scene = Scene::kNone;
  uint8_t conditions = 0;  // Condition bits
  Act act = Act::kSmallTalk;
  bool greeting = false;  // small talk read from a cue ("在吗", "hey"), not by default
  std::string feel;        // the emotion words as the sender wrote them
  std::string topic;       // the most salient clause or chunk
  std::string echo;        // topic in the reader's words, else feel or a cut, quoted
  std::string said;        // what echo stands for, in the sender's own words (for eq_analysis)
  size_t message_units = 0;
  uint64_t hash = 0;
};

bool spanHasLetters(std::string_view t, size_t a, size_t b) {
  for (size_t pos = a; pos < b;) {
    char32_t cp = 0;
    const size_t len = decodeUtf8(t, pos, &cp);
    if (isCjkIdeograph(cp) || (cp < 0x80 && isAsciiAlpha(static_cast<unsigned char>(cp)))) {
      return true;
    }
    pos += len;
  }
  return false;
}

// Emphasis read from the original text: "!!!", stretched characters
// ("啊啊啊", "sooo") and shouted words ("I HATE this").
double emphasisOf(std::string_view original, std::string_view normalized) {
  const auto bangs = static_cast<double>(std::count(normalized.begin(), normalized.end(), '!'));
  bool repeated = false;
  bool shouted = false;
  char32_t prev = 0;
  int run = 0;
  int capsRun = 0;
  bool capsWord = true;
  for (size_t pos = 0; pos <= original.size();) {
    char32_t cp = 0;
    size_t len = 1;
    if (pos < original.size()) len = decodeUtf8(original, pos, &cp);
    // Shouting: a word of 3+ letters, all upper case.
    if (cp < 0x80 && isAsciiAlpha(static_cast<unsigned char>(cp))) {
      if (cp < 'A' || cp > 'Z') capsWord = false;
      ++capsRun;
    } else {
      if (capsWord && capsRun >= 3) shouted = true;
      capsRun = 0;
      capsWord = true;
    }
    const char32_t folded = (cp >= 'A' && cp <= 'Z') ? cp - 'A' + 'a' : cp;
    const bool countable = !isSpace(cp) && !(cp >= '0' && cp <= '9') && cp != '.' && cp != '!' &&
                           cp != 0xFF01 && cp != 0x3002 && cp != '-' && cp != '=';
    run = (folded == prev && countable) ? run + 1 : 1;
    if (run >= 3) repeated = true;
    prev = folded;
    pos += len;
  }
  return 1.0 + 0.1 * std::min(bangs, 5.0) + (repeated ? 0.15 : 0.0) + (shouted ? 0.1 : 0.0);
}

// Function characters and fillers that never make a good echo chunk on their
// own; used to trim the echoed clause and to cut over-long clauses.
// Question particles (吗, 么, 嘛) and 吧 stay: dropping them changes the
// meaning ("你爱我吗", "我们分手吧", "在干嘛").
constexpr std::array<std::string_view, 9> kZhEdgeParticles = {"啊", "呀", "呢", "哦", "噢",
                                                              "啦", "呗", "咯", "喔"};
constexpr std::array<std::string_view, 10> kZhLeadFillers = {"然后", "而且", "所以", "就是", "其实",
                                                             "反正", "因为", "那个", "话说", "嗯"};
constexpr std::array<std::string_view, 12> kEnLeadFillers = {
    "and", "so", "but", "because", "well", "um", "uh", "oh", "like", "just", "also", "anyway"};
constexpr std::string_view kZhChunkBreakers =
    "的了在和跟与把被给是我你他她它们吧呢吗啊就都也还又很太这那个要会说着过得地";
constexpr std::array<std::string_view, 40> kEnStopwords = {
    "i",   "me",   "my",   "you",  "your", "he",     "she",  "it",  "we",   "they",
    "the", "a",    "an",   "and",  "or",   "but",    "so",   "to",  "of",   "in",
    "on",  "at",   "for",  "with", "is",   "am",     "are",  "was", "were", "be",
    "i'm", "it's", "that", "this", "just", "really", "have", "has", "had",  "again"};

bool startsWithAt(std::string_view t, size_t pos, std::string_view word) {
  return t.substr(pos, word.size()) == word;
}

// Whether the text at pos continues the word before it ("后" in "分手后",
// "的" in "开心的事"), so a cut there would leave a fragment.
bool boundAfter(std::string_view t, size_t pos) {
  for (std::string_view m :
       {"后", "之后", "以后", "前", "时", "的", "了", "着", "过", "得", "地"}) {
    if (startsWithAt(t, pos, m)) return true;
  }
  return false;
}

// Cuts [s, e) of the normalized text down to its content: spaces, quotes,
// leading fillers, sentence-final particles and the feeling chain itself (so
// that "今天被老板骂了好生气" echoes "今天被老板骂了").
// The feeling chain is only cut off when at least minRemainder units are
// left: "最近心好累" stays whole instead of shrinking to "最近心".
std::pair<size_t, size_t> trimChunk(std::string_view t, size_t s, size_t e, size_t chainBegin,
                                    size_t chainEnd, size_t minRemainder) {
  bool changed = true;
  while (changed && s < e) {
    changed = false;
    char32_t cp = 0;
    const size_t len = decodeUtf8(t, s, &cp);
    if (isSpace(cp) || cp == '\'' || cp == '"') {
      s += len;
      changed = true;
      continue;
    }
    // The trailing side: walk back to the start of the last code point.
    size_t last = e - 1;
    while (last > s && (static_cast<unsigned char>(t[last]) & 0xC0) == 0x80) --last;
    char32_t lastCp = 0;
    decodeUtf8(t, last, &lastCp);
    if (isSpace(lastCp) || lastCp == '\'' || lastCp == '"') {
      e = last;
      changed = true;
      continue;
    }
    // ...unless what follows is bound to it: "分手后我每天都在想你" must not
    // shrink to "后我每天都在想你".
    if (s >= chainBegin && s < chainEnd && chainEnd < e &&
        countUnits(t, chainEnd, e) >= minRemainder && !boundAfter(t, chainEnd)) {
      s = chainEnd;
      changed = true;
      continue;
    }
    if (e > chainBegin && e <= chainEnd && chainBegin > s &&
        countUnits(t, s, chainBegin) >= minRemainder) {
      e = chainBegin;
      changed = true;
      continue;
    }
    for (std::string_view p : kZhEdgeParticles) {
      if (e - s > p.size() && t.substr(e - p.size(), p.size()) == p) {
        e -= p.size();
        changed = true;
        break;
      }
    }
    if (changed) continue;
    for (std::string_view p : kZhLeadFillers) {
      if (e - s > p.size() && startsWithAt(t, s, p)) {
        s += p.size();
        changed = true;
        break;
      }
    }
    if (changed) continue;
    for (std::string_view w : kEnLeadFillers) {
      if (e - s > w.size() + 1 && startsWithAt(t, s, w) && t[s + w.size()] == ' ') {
        s += w.size();
        changed = true;
        break;
      }
    }
  }
  return {s, e};
}

// For a clause too long to quote whole: the longest run of content characters
// (Chinese) or content words (English), the nearest thing to a noun phrase
// that a rule can find without a segmenter.
std::pair<size_t, size_t> nounChunk(std::string_view t, size_t s, size_t e, Lang lang) {
  std::pair<size_t, size_t> best{s, s};
  size_t bestUnits = 0;
  if (lang == Lang::kZh) {
    constexpr size_t kMaxChunk = 8;
    size_t runStart = s;
    size_t runUnits = 0;
    auto close = [&](size_t at) {
      if (runUnits >= 2 && runUnits <= kMaxChunk && runUnits > bestUnits) {
        best = {runStart, at};
        bestUnits = runUnits;
      }
    };
    for (size_t pos = s; pos < e;) {
      char32_t cp = 0;
      const size_t len = decodeUtf8(t, pos, &cp);
      const bool breaker = !isCjkIdeograph(cp) ||
                           kZhChunkBreakers.find(t.substr(pos, len)) != std::string_view::npos;
      if (breaker) {
        close(pos);
        runStart = pos + len;
        runUnits = 0;
      } else {
        ++runUnits;
      }
      pos += len;
    }
    close(e);
    return best;
  }
  constexpr size_t kMaxWords = 4;
  size_t runStart = s;
  size_t runWords = 0;
  size_t pos = s;
  while (pos < e) {
    if (!isWordByte(static_cast<unsigned char>(t[pos]))) {
      ++pos;
      continue;
    }
    size_t end = pos;
    while (end < e && isWordByte(static_cast<unsigned char>(t[end]))) ++end;
    const std::string_view word = t.substr(pos, end - pos);
    const bool stop =
        std::find(kEnStopwords.begin(), kEnStopwords.end(), word) != kEnStopwords.end();
    if (stop) {
      runWords = 0;
    } else {
      if (runWords == 0) runStart = pos;
      ++runWords;
      if (runWords <= kMaxWords && runWords > bestUnits) {
        best = {runStart, end};
        bestUnits = runWords;
      }
    }
    pos = end;
  }
  return best;
}

// When the context names several relationships ("我和男朋友吵架了"), the one that
// says most about the current state of things wins: a fight or a breakup
// colours the reply more than the label of the relationship does.
constexpr std::array<int, kStageCount> kStagePriority = {1, 2, 7, 5, 6, 8, 9, 3, 4, 0};

Stage stageFromScene(Scene scene) {
  switch (scene) {
    case Scene::kDating:
    case Scene::kProposal:
      return Stage::kDating;
    case Scene::kAmbiguous:
      return Stage::kAmbiguous;
    case Scene::kWork:
      return Stage::kColleague;
    case Scene::kBreakup:
      return Stage::kPostBreakup;
    case Scene::kConflict:
      return Stage::kStrained;
    default:
      return Stage::kUnknown;
  }
}

Stage readStage(const Data& tables, std::string_view context, Scene scene) {
  if (!context.empty()) {
    const Normalized n = normalize(context);
    int best = -1;
    for (const Hit& h : scan(tables.stages, n.text)) {
      if (h.term < 0 || h.term >= static_cast<int32_t>(kStageCount)) continue;
      if (best < 0 ||
          kStagePriority[static_cast<size_t>(h.term)] > kStagePriority[static_cast<size_t>(best)]) {
        best = h.term;
      }
    }
    if (best >= 0) return static_cast<Stage>(best);
  }
  return stageFromScene(scene);
}

// A clause of the normalized message: text between clause breaks or contrast
// words. Negation and degree words never reach across clause boundaries.
struct Clause {
  size_t begin = 0;
  size_t end = 0;
  bool after_contrast = false;
  bool question = false;
};

// What folding the hits yields: the emotion hits, the clauses, and the
// clauses that ask "X不X".
struct Fold {
  std::vector<EmotionHit> found;
  std::vector<Clause> clauses;
  std::vector<size_t> a_not_a_clauses;
  size_t denied = 0;  // feelings a negation cancelled ("一点也不生气")
};

// Folds the hits left to right into emotion hits. A "chain" is the run of
// negation and degree words waiting for the emotion term they modify.
Fold foldHits(const Data& tables, std::string_view t, const std::vector<Hit>& hits) {
  struct Chain {
    bool active = false;
    int negations = 0;
    size_t begin = 0;
    size_t negation_begin = 0;
    size_t end = 0;
    double degree = 1.0;
  } chain;
  Fold fold;
  std::vector<EmotionHit>& found = fold.found;
  size_t clauseStart = 0;
  bool seenContrast = false;
  double weight = 1.0;
  int last = -1;  // the previous emotion hit in this clause, for post-degree words
  auto endClause = [&](size_t at, size_t next) {
    fold.clauses.push_back({clauseStart, at, seenContrast, false});
    clauseStart = next;
  };

  for (size_t i = 0; i < hits.size(); ++i) {
    const Hit& h = hits[i];
    if (h.term == kBreakHit || h.term == kBurstHit || h.term == kTildeHit ||
        h.term == kEllipsisHit) {
      endClause(h.begin, h.end);
      chain = Chain{};
      last = -1;
      if (h.term != kBreakHit) {
        EmotionHit e;
        e.emotion = h.term == kBurstHit   ? Emotion::kSurprise
                    : h.term == kTildeHit ? Emotion::kJoy
                                          : Emotion::kSadness;
        e.strength = h.term == kBurstHit   ? kBurstStrength
                     : h.term == kTildeHit ? kTildeStrength
                                           : kEllipsisStrength;
        e.weight = weight;
        e.feel_begin = e.chain_begin = h.begin;
        e.feel_end = e.chain_end = h.end;
        e.clause = fold.clauses.size() - 1;
        e.echoable = false;
        e.cue = true;
        found.push_back(e);
      }
      continue;
    }
    const Term& term = tables.term_info[static_cast<size_t>(h.term)];
    if (chain.active && countUnits(t, chain.end, h.begin) > kNegationWindow) chain = Chain{};
    switch (term.kind) {
      case TermKind::kSkip:
        break;
      case TermKind::kContrast:
        for (EmotionHit& e : found) e.weight *= kBeforeContrast;
        weight = kAfterContrast;
        endClause(h.begin, h.end);
        seenContrast = true;
        chain = Chain{};
        last = -1;
        break;
      case TermKind::kNegation:
        // "爱不爱", "开心不开心": the A-not-A question form is not a negation.
        // The first term already counted; the repeat is skipped.
        if (i > 0 && i + 1 < hits.size() && last >= 0 && hits[i - 1].term >= 0 &&
            tables.term_info[static_cast<size_t>(hits[i - 1].term)].kind == TermKind::kEmotion &&
            hits[i - 1].end == h.begin && hits[i + 1].term == hits[i - 1].term &&
            hits[i + 1].begin == h.end) {
          fold.a_not_a_clauses.push_back(fold.clauses.size());
          ++i;
          break;
        }
        if (!chain.active) {
          chain.active = true;
          chain.begin = h.begin;
        }
        if (chain.negations == 0) chain.negation_begin = h.begin;
        ++chain.negations;
        chain.end = h.end;
        break;
      case TermKind::kDegree: {
        double v = term.value;
        if (chain.negations % 2 == 1 && v > 1.0) v = kNegatedDegree;
        if (!chain.active) {
          chain.active = true;
          chain.begin = h.begin;
        }
        chain.degree *= v;
        chain.end = h.end;
        break;
      }
      case TermKind::kPostDegree:
        if (last >= 0) {
          EmotionHit& e = found[static_cast<size_t>(last)];
          if (countUnits(t, e.chain_end, h.begin) <= kPostDegreeWindow) {
            e.strength *= term.value;
            e.chain_end = h.end;
          }
        }
        break;
      case TermKind::kEmotion: {
        EmotionHit e;
        e.emotion = term.emotion;
        e.strength = term.value;
        e.weight = weight;
        e.feel_begin = e.chain_begin = h.begin;
        e.feel_end = e.chain_end = h.end;
        e.clause = fold.clauses.size();
        e.news = (term.tags & kTagNews) != 0;
        e.rhetorical = (term.tags & kTagRhetorical) != 0;
        e.backoff = (term.tags & kTagBackoff) != 0;
        e.mirative = (term.tags & kTagMirative) != 0;
        bool cancelled = false;
        if (chain.active) {
          e.chain_begin = chain.begin;
          if (countUnits(t, chain.end, h.begin) <= kDegreeWindow) {
            e.strength *= std::clamp(chain.degree, 0.3, 2.5);
          }
          if (chain.negations % 2 == 1) {
            const auto flip = negationFlip(term.emotion);
            if ((term.tags & (kTagNotJoy | kTagNotAffection)) != 0) {
              // "没有不开心": the negation of a negated positive affirms it.
              e.emotion = (term.tags & kTagNotJoy) != 0 ? Emotion::kJoy : Emotion::kAffection;
              e.strength *= kDoubleNegation;
              e.feel_begin = chain.negation_begin;
              e.news = false;
            } else if (flip) {
              e.emotion = flip->first;
              e.strength *= flip->second;
              e.feel_begin = chain.negation_begin;
              e.news = false;
            } else {
              cancelled = true;
            }
          } else if (chain.negations > 0) {
            e.strength *= kDoubleNegation;
          }
        }
        chain = Chain{};
        if (cancelled) {
          ++fold.denied;
          last = -1;
          break;
        }
        e.echoable = spanHasLetters(t, e.feel_begin, e.feel_end);
        found.push_back(e);
        last = static_cast<int>(found.size()) - 1;
        break;
      }
    }
  }
  endClause(t.size(), t.size());
  return fold;
}

// Marks question clauses, then re-reads feelings asked about the reader
// ("你是不是生气了？", "are you mad at me?"): they are not the sender's; what the
// sender feels is concern. In a question clause where the reader is the last
// person named before the term, a negative feeling reads as the sender's
// anxiety and a happy one as care.
void attributeQuestions(std::string_view t, Fold* fold) {
  for (Clause& c : fold->clauses) {
    const size_t end = contentEnd(t, c.begin, c.end);
    c.question = (c.end < t.size() && t[c.end] == '?') || endsWithAny(t, end, {"吗", "么"});
  }
  for (size_t c : fold->a_not_a_clauses) {
    if (c < fold->clauses.size()) fold->clauses[c].question = true;
  }
  for (EmotionHit& e : fold->found) {
    if (!e.echoable || e.rhetorical || e.clause >= fold->clauses.size()) continue;
    const Clause& c = fold->clauses[e.clause];
    if (!c.question || !readerNamedLast(t, c.begin, e.chain_begin)) continue;
    if (isNegative(e.emotion)) {
      e.emotion = Emotion::kAnxiety;
      e.strength *= 0.7;
    } else if (e.emotion == Emotion::kJoy) {
      e.emotion = Emotion::kAffection;
      e.strength *= 0.6;
    }
  }
}

// Sets sig->emotion and sig->intensity from the hits; returns the index of
// the strongest echoable hit of the chosen emotion, or -1.
int scoreEmotion(const std::vector<EmotionHit>& found, double emphasis, bool addressed,
                 const std::optional<ExampleReader::Posterior>& examples, Signals* sig) {
  // The dominant category by weighted score; ties go to the stronger peak.
  std::array<double, kEmotionCount> score{};
  std::array<double, kEmotionCount> peak{};
  // Single characters (backoff terms) speak only when no word does, and then
  // softly: "惊呆了" is surprise, but in "吓死了，惊了一下" the word decides.
  // Mirative words (kTagMirative) likewise yield to any word that names how
  // the writer feels about the unexpected fact, unless that word is itself
  // one of surprise ("真的假的？你居然要结婚了" is astonished twice over).
  const bool worded = std::any_of(found.begin(), found.end(), [](const EmotionHit& e) {
    return !e.backoff && !e.cue && !e.mirative;
  });
  const bool astonished = std::any_of(found.begin(), found.end(), [](const EmotionHit& e) {
    return !e.backoff && !e.cue && !e.mirative && e.emotion == Emotion::kSurprise;
  });
  const auto yields = [worded, astonished](const EmotionHit& e) {
    return worded && (e.backoff || (e.mirative && !astonished));
  };
  for (const EmotionHit& e : found) {
    if (yields(e)) continue;
    const double v = e.strength * e.weight * (e.backoff ? kBackoffWeight : 1.0);
    score[idx(e.emotion)] += v;
    peak[idx(e.emotion)] = std::max(peak[idx(e.emotion)], v);
  }
  // Love said together with sorrow is heartache, not fondness: "我还是爱你，
  // 可是好累" and "想你想得睡不着，好难过" grieve over the one they love. Half
  // of the affection's weight then counts as sadness, so sadness wins unless
  // the love clearly dominates ("爱死你了，就是有点累"). A passing sad word
  // next to a strong feeling of love (less than half its weight) is no
  // lament and changes nothing.
  const size_t sad = idx(Emotion::kSadness);
  const size_t aff = idx(Emotion::kAffection);
  if (score[aff] > 0 && score[sad] >= kLamentShare * score[aff]) {
    score[sad] += kLoveLament * score[aff];
    score[aff] *= 1.0 - kLoveLament;
  }
  // Fondness in a happy message that speaks to no one ("今天的晚霞好美，喜欢，
  // 开心") is part of the delight; said to the reader ("谢谢你，好开心") it
  // stays affection.
  const size_t joy = idx(Emotion::kJoy);
  if (!addressed && score[joy] > 0 && score[aff] > 0) {
    score[joy] += kSharedDelight * score[aff];
    score[aff] *= 1.0 - kSharedDelight;
  }
  int dominant = -1;
  for (size_t i = 0; i < kEmotionCount; ++i) {
    if (score[i] < kMinEmotionScore) continue;
    const auto d = static_cast<size_t>(dominant);
    if (dominant < 0 || score[i] > score[d] + 1e-9 ||
        (std::abs(score[i] - score[d]) <= 1e-9 && peak[i] > peak[d])) {
      dominant = static_cast<int>(i);
    }
  }
  const size_t neutral = idx(Emotion::kNeutral);
  sig->worded_emotion = dominant < 0 ? Emotion::kNeutral : static_cast<Emotion>(dominant);
  if (examples) {
    const ExampleReader::Posterior& p = *examples;
    if (dominant >= 0) {
      double total = 0;
      for (size_t i = 0; i < neutral; ++i) total += score[i] >= kMinEmotionScore ? score[i] : 0;
      double best = -1;
      for (size_t i = 0; i < neutral; ++i) {
        const double share = score[i] >= kMinEmotionScore ? score[i] / total : 0;
        const double v = share + kExampleWeight * p[i];
        if (v > best + 1e-9) {
          best = v;
          dominant = static_cast<int>(i);
        }
      }
    } else {
      const auto top =
          static_cast<size_t>(std::max_element(p.begin(), p.begin() + neutral) - p.begin());
      if (p[top] > p[neutral] + kExampleMargin) dominant = static_cast<int>(top);
    }
  }
  int strongest = -1;
  if (dominant < 0) {
    sig->emotion = Emotion::kNeutral;
    // A neutral message can still be emphatic ("好的！！！"), never strongly so.
    sig->intensity = std::min(0.3, (emphasis - 1.0) * 0.6);
  } else {
    sig->emotion = static_cast<Emotion>(dominant);
    // Intensity: the strongest hit plus a share of the others, scaled by
    // emphasis and squashed into [0, 1) so that more of anything always
    // reads as more intense without ever saturating.
    double maxV = 0;
    double sumV = 0;
    double strongestV = 0;
    for (size_t i = 0; i < found.size(); ++i) {
      const EmotionHit& e = found[i];
      if (e.emotion != sig->emotion || yields(e)) continue;
      const double v = e.strength * std::min(e.weight, 1.0) * (e.backoff ? kBackoffWeight : 1.0);
      sumV += v;
      maxV = std::max(maxV, v);
      if (e.echoable && (strongest < 0 || e.strength * e.weight > strongestV)) {
        strongest = static_cast<int>(i);
        strongestV = e.strength * e.weight;
      }
    }
    const double raw = (maxV + 0.3 * (sumV - maxV)) * emphasis;
    sig->intensity = std::clamp(1.0 - std::exp(-1.8 * raw), 0.0, 1.0);
    if (sumV == 0 && examples) {
      // No word named this feeling: the examples chose it.
      sig->intensity = kExampleIntensity * (*examples)[idx(sig->emotion)];
    }
  }
  sig->intensity = std::round(sig->intensity * 1000.0) / 1000.0;
  return strongest;
}

// The topic: the clause with the most content besides the feeling words (the
// echoed feeling counts for nothing, other emotion terms for half: "I got the
// job" beats "I'm so happy"), preferring a clause that carries the dominant
// feeling, what follows a contrast and, on ties, the later clause. A clause
// that is nothing but the feeling ("好想你啊") still qualifies, so a short
// message is quoted whole rather than reduced to a bare word. Returns a span
// of the normalized text, empty when no clause qualifies.
std::pair<size_t, size_t> pickTopic(std::string_view t, const Fold& fold, Emotion emotion,
                                    Lang lang, size_t chainBegin, size_t chainEnd) {
  const size_t limit = lang == Lang::kZh ? 16 : 10;
  const size_t minRemainder = lang == Lang::kZh ? 6 : 4;
  int bestClause = -1;
  double bestScore = 0;
  std::pair<size_t, size_t> best{0, 0};
  for (size_t c = 0; c < fold.clauses.size(); ++c) {
    const Clause& clause = fold.clauses[c];
    auto [s, e] = trimChunk(t, clause.begin, clause.end, chainBegin, chainEnd, minRemainder);
    if (s >= e) continue;
    const size_t units = countUnits(t, s, e);
    if (units < 2) continue;
    double feeling = 0;
    bool carriesFeeling = false;
    for (const EmotionHit& h : fold.found) {
      carriesFeeling = carriesFeeling || (h.clause == c && h.emotion == emotion);
      const size_t a = std::max(h.chain_begin, s);
      const size_t b = std::min(h.chain_end, e);
      if (a >= b) continue;
      const bool echoed = h.chain_begin == chainBegin && h.chain_end == chainEnd;
      feeling += static_cast<double>(countUnits(t, a, b)) * (echoed ? 1.0 : 0.5);
    }
    const double content = std::max(0.0, static_cast<double>(units) - feeling);
    const double score = std::min(content, static_cast<double>(limit)) +
                         (clause.after_contrast ? 3.0 : 0.0) + (carriesFeeling ? 2.0 : 0.0);
    if (bestClause < 0 || score >= bestScore) {
      bestClause = static_cast<int>(c);
      bestScore = score;
      best = {s, e};
    }
  }
  if (bestClause < 0) return {0, 0};
  if (countUnits(t, best.first, best.second) > limit) {
    best = nounChunk(t, best.first, best.second, lang);
  }
  return best;
}

// When nothing in the message is recognizable ("？？？", "ok", an emoji): the
// message itself, cut to a quotable length.
std::string fallbackEcho(std::string_view original, const Normalized& n, Lang lang) {
  const std::string_view t = n.text;
  const size_t cap = lang == Lang::kZh ? 12 : 8;
  auto [s, e] = trimChunk(t, 0, t.size(), std::string_view::npos, std::string_view::npos, 0);
  if (s >= e) {
    s = 0;
    e = t.size();
  }
  size_t units = 0;
  size_t cut = s;
  bool truncated = false;
  bool inWord = false;
  while (cut < e) {
    char32_t cp = 0;
    const size_t len = decodeUtf8(t, cut, &cp);
    const bool word = cp < 0x80 && isWordByte(static_cast<unsigned char>(cp));
    if (!(word && inWord) && !isSpace(cp)) {
      if (units == cap) {
        truncated = true;
        break;
      }
      ++units;
    }
    inWord = word;
    cut += len;
  }
  std::string echo = cutOriginal(original, n, s, cut);
  while (!echo.empty() && echo.back() == ' ') echo.pop_back();
  if (truncated) echo += "…";
  return echo;
}

// A yes/no question said back inside a sentence takes the A-not-A form
// ("我今晚有空吗" -> "我今晚有没有空", so "你问我今晚有没有空"), built on the
// first modal or verb that has one; without such a verb the 吗 stays.
std::string embedQuestion(std::string s) {
  constexpr std::string_view kMa = "吗";
  if (s.size() <= kMa.size() || s.compare(s.size() - kMa.size(), kMa.size(), kMa) != 0) return s;
  const std::string body = s.substr(0, s.size() - kMa.size());
  struct Form {
    std::string_view verb;
    std::string_view asked;
  };
  static constexpr std::array<Form, 14> kForms = {{{"喜欢", "喜不喜欢"},
                                                   {"可以", "可不可以"},
                                                   {"愿意", "愿不愿意"},
                                                   {"知道", "知不知道"},
                                                   {"有", "有没有"},
                                                   {"是", "是不是"},
                                                   {"会", "会不会"},
                                                   {"能", "能不能"},
                                                   {"要", "要不要"},
                                                   {"想", "想不想"},
                                                   {"爱", "爱不爱"},
                                                   {"在", "在不在"},
                                                   {"去", "去不去"},
                                                   {"来", "来不来"}}};
  size_t bestPos = std::string::npos;
  const Form* best = nullptr;
  for (const Form& f : kForms) {
    const size_t at = body.find(f.verb);
    if (at != std::string::npos && (best == nullptr || at < bestPos)) {
      bestPos = at;
      best = &f;
    }
  }
  if (best == nullptr) return s;
  return body.substr(0, bestPos) + std::string(best->asked) +
         body.substr(bestPos + best->verb.size());
}

// Whether a clause said back by speakBack is a yes/no question: it ended in
// 吗, or it asks in the A-not-A form ("你是不是生气了").
bool askedForm(std::string_view said, std::string_view back) {
  // Only 吗: a final 么 is as often the end of 什么 or 怎么 ("你居然记得我喜欢吃什么").
  constexpr std::string_view kMa = "吗";
  if (said.size() > kMa.size() && said.substr(said.size() - kMa.size()) == kMa) return true;
  for (std::string_view form :
       {"是不是", "有没有", "会不会", "能不能", "要不要", "想不想", "爱不爱", "可不可以", "在不在",
        "去不去", "来不来", "喜不喜欢", "愿不愿意", "知不知道"}) {
    if (back.find(form) != std::string_view::npos) return true;
  }
  return false;
}

// Whether the span [s, e) holds nothing besides the feeling chain
// [chainBegin, chainEnd) but particles and pronouns after it ("笑死我了", "爱死
// 你了").
bool interjectionOnly(std::string_view t, size_t s, size_t e, size_t chainBegin, size_t chainEnd) {
  constexpr std::string_view kLight = "我你了啊呀啦吧呢哦的哈";
  for (size_t pos = s; pos < e;) {
    char32_t cp = 0;
    const size_t len = decodeUtf8(t, pos, &cp);
    // A subject before the feeling makes a statement to say back ("我升职了",
    // "我不是不喜欢你"), not an exclamation.
    if (pos < chainBegin && (t.substr(pos, len) == "我" || t.substr(pos, len) == "你")) {
      return false;
    }
    const bool inChain = pos >= chainBegin && pos < chainEnd;
    const bool light = isSpace(cp) || isClauseBreak(cp) || cp == '!' ||
                       kLight.find(t.substr(pos, len)) != std::string_view::npos;
    if (!inChain && !light) return false;
    pos += len;
  }
  return true;
}

// Words after which "you" is an object ("I miss you", "with you"): common
// prepositions and verbs, and any past tense in -ed ("texted you").
bool takesObject(std::string_view w) {
  static constexpr std::array<std::string_view, 44> kWords = {
      "to",   "for",  "with", "at",   "about", "from", "of",    "like",   "love",
      "miss", "hate", "tell", "told", "call",  "see",  "saw",   "meet",   "met",
      "ask",  "help", "need", "want", "give",  "gave", "thank", "trust",  "know",
      "knew", "hear", "text", "hug",  "kiss",  "than", "on",    "in",     "without",
      "by",   "let",  "make", "made", "get",   "got",  "blame", "believe"};
  if (std::find(kWords.begin(), kWords.end(), w) != kWords.end()) return true;
  return w.size() > 3 && w.substr(w.size() - 2) == "ed";
}

std::string asciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lowerAscii(c);
  return out;
}

// Turns the sender's words into the reader's: a reply says "你升职了", not
// "「我升职了」". In Chinese, 我 and 你 (您) swap and 你们 becomes 我们; a
// question adverb right after the opening pronoun is dropped ("你怎么又迟到了"
// -> "我又迟到了") and so are sentence-final particles other than the
// question's own (吗, 嘛 stay: "你问我爱你吗"), so that the clause can sit
// inside a reply's own sentence. In English, first and second person swap
// ("I got the job" -> "you got the job"; "you" is "I" at the start of a clause
// and "me" elsewhere) and the verb "am/are/was/were" follows its new subject.
// Returns the text unchanged when it holds nothing to turn.
std::string speakBack(std::string_view s, Lang lang) {
  std::string out;
  out.reserve(s.size() + 8);
  if (lang == Lang::kZh) {
    bool openedWithPronoun = false;
    for (size_t pos = 0; pos < s.size();) {
      const bool first = pos == 0;
      if (startsWithAt(s, pos, "我们") || startsWithAt(s, pos, "咱们")) {
        out += s.substr(pos, 6);
        pos += 6;
      } else if (startsWithAt(s, pos, "你们")) {
        out += "我们";
        pos += 6;
      } else if (startsWithAt(s, pos, "我")) {
        out += "你";
        pos += 3;
        openedWithPronoun = openedWithPronoun || first;
      } else if (startsWithAt(s, pos, "你") || startsWithAt(s, pos, "您")) {
        out += "我";
        pos += 3;
        openedWithPronoun = openedWithPronoun || first;
      } else {
        char32_t cp = 0;
        const size_t len = decodeUtf8(s, pos, &cp);
        out += s.substr(pos, len);
        pos += len;
      }
      if (openedWithPronoun && out.size() == 3 && pos < s.size()) {
        for (std::string_view q : {"怎么", "为什么", "为啥", "干嘛", "凭什么"}) {
          if (startsWithAt(s, pos, q) && s.size() > pos + q.size()) {
            pos += q.size();
            break;
          }
        }
      }
    }
    bool trimmed = true;
    while (trimmed) {
      trimmed = false;
      for (std::string_view p : {"吧", "呢", "啊", "呀", "啦", "哦", "哈", "呗"}) {
        if (out.size() > p.size() + 3 && out.compare(out.size() - p.size(), p.size(), p) == 0) {
          out.resize(out.size() - p.size());
          trimmed = true;
        }
      }
    }
    return embedQuestion(out);
  }
  // English: word by word, keeping everything between words as written. A
  // proposal's opener goes first ("let's grab dinner" -> "grab dinner"), so
  // that the rest reads as the plan itself ("Grab dinner? I'd love to!").
  for (std::string_view opener : {"let's ", "lets ", "wanna ", "shall we ", "how about "}) {
    if (s.size() > opener.size() + 2 && asciiLower(s.substr(0, opener.size())) == opener) {
      s.remove_prefix(opener.size());
      break;
    }
  }
  bool clauseStart = true;
  bool subjectI = false;    // the previous word became "I"
  bool subjectYou = false;  // the previous word became "you" as a subject
  std::string prevLower;
  for (size_t pos = 0; pos < s.size();) {
    if (!isWordByte(static_cast<unsigned char>(s[pos]))) {
      if (s[pos] == ',' || s[pos] == ';') clauseStart = true;
      out += s[pos++];
      continue;
    }
    size_t end = pos;
    while (end < s.size() && isWordByte(static_cast<unsigned char>(s[end]))) ++end;
    const std::string_view word = s.substr(pos, end - pos);
    std::string lower(word);
    for (char& c : lower) c = lowerAscii(c);
    std::string repl;
    bool nowI = false;
    bool nowYou = false;
    if (lower == "i") {
      repl = "you";
      nowYou = true;
    } else if (lower == "me") {
      repl = "you";
    } else if (lower == "my") {
      repl = "your";
    } else if (lower == "mine") {
      repl = "yours";
    } else if (lower == "myself") {
      repl = "yourself";
    } else if (lower == "i'm") {
      repl = "you're";
    } else if (lower == "i've") {
      repl = "you've";
    } else if (lower == "i'll") {
      repl = "you'll";
    } else if (lower == "i'd") {
      repl = "you'd";
    } else if (lower == "you") {
      // Object after a verb or preposition ("told you", "with you"), else
      // subject ("you sent", "that meme you sent").
      const bool object = !clauseStart && takesObject(prevLower);
      repl = object ? "me" : "I";
      nowI = !object;
    } else if (lower == "your") {
      repl = "my";
    } else if (lower == "yours") {
      repl = "mine";
    } else if (lower == "yourself") {
      repl = "myself";
    } else if (lower == "you're") {
      repl = "I'm";
    } else if (lower == "you've") {
      repl = "I've";
    } else if (lower == "you'll") {
      repl = "I'll";
    } else if (lower == "you'd") {
      repl = "I'd";
    } else if (subjectYou && lower == "am") {
      repl = "are";
    } else if (subjectYou && lower == "was") {
      repl = "were";
    } else if (subjectI && lower == "are") {
      repl = "am";
    } else if (subjectI && lower == "were") {
      repl = "was";
    } else {
      repl = std::string(word);
    }
    out += repl;
    prevLower = lower;
    subjectI = nowI;
    subjectYou = nowYou;
    clauseStart = false;
    for (std::string_view c : {"and", "but", "if", "when", "that", "because", "so"}) {
      if (lower == c) clauseStart = true;
    }
    pos = end;
  }
  return out;
}

// Does the clause t[a, b) stop mid-sentence? A cut that ends on a word that
// needs something after it ("my mom is in the hospital and i am", "我觉得很")
// is a fragment: said back it reads as a broken question ("...and you are?").
bool endsDangling(std::string_view t, size_t a, size_t b, Lang lang) {
  b = contentEnd(t, a, b);
  if (b <= a) return true;
  if (lang == Lang::kEn) {
    size_t w = b;
    while (w > a && isWordByte(static_cast<unsigned char>(t[w - 1]))) --w;
    static constexpr std::array<std::string_view, 40> kNeedsMore = {
        "am",  "are",  "is",   "was",  "were", "be",    "been",  "being", "and",    "or",
        "but", "to",   "the",  "a",    "an",   "of",    "so",    "very",  "really", "i",
        "my",  "your", "feel", "felt", "too",  "get",   "got",   "with",  "for",    "in",
        "at",  "on",   "just", "than", "that", "about", "quite", "kinda", "gonna",  "because"};
    const std::string_view last = t.substr(w, b - w);
    return std::find(kNeedsMore.begin(), kNeedsMore.end(), last) != kNeedsMore.end();
  }
  return endsWithAny(t, b, {"很", "太", "和", "跟", "把", "被", "的", "得", "地", "是", "就", "都",
                            "也", "又", "还", "在", "让", "给", "对", "更", "最", "非常", "特别",
                            "真", "好", "有点", "因为", "觉得"});
}

// Where the clause holding t[pos] ends: the next clause break, or the end.
size_t clauseEndFrom(std::string_view t, size_t pos) {
  while (pos < t.size()) {
    char32_t cp = 0;
    const size_t len = decodeUtf8(t, pos, &cp);
    if (isClauseBreak(cp)) break;
    pos += len;
  }
  return pos;
}

// Reads a message (and its context and scene) into Signals: the steps above,
// in order.
Signals readMessage(const Data& tables, std::string_view message, std::string_view context,
                    std::string_view sceneName) {
  Signals sig;
  sig.hash = fnv1a(sceneName, fnv1a(context, fnv1a(message) ^ 0x1F));
  const int scene = indexOf(kSceneNames, sceneName);
  sig.scene = scene > 0 ? static_cast<Scene>(scene) : Scene::kNone;
  sig.stage = readStage(tables, context, sig.scene);
  // Chinese as soon as there is one ideograph; English when there are Latin
  // letters and no ideograph; Chinese (the service's first language) for a
  // message of punctuation and emoji only ("？？？", "😭").
  bool letters = false;
  size_t ideographs = 0;
  for (size_t pos = 0; pos < message.size();) {
    char32_t cp = 0;
    pos += decodeUtf8(message, pos, &cp);
    ideographs += isCjkIdeograph(cp) ? 1 : 0;
    letters = letters || (cp < 0x80 && isAsciiAlpha(static_cast<unsigned char>(cp)));
  }
  sig.lang = (ideographs > 0 || !letters) ? Lang::kZh : Lang::kEn;

  const Normalized n = normalize(message);
  const std::string_view t = n.text;
  sig.message_units = countUnits(t, 0, t.size());
  Fold fold = foldHits(tables, t, scan(tables.terms, t));
  attributeQuestions(t, &fold);
  // The examples are not asked about a message that denies the only
  // feeling it names ("我一点也不生气": it says it is calm, and the examples
  // would read 生气 there), nor about a question that names no feeling ("你为
  // 什么选这个专业"): without a word of feeling a question asks for an answer,
  // however much it resembles an angry one, and angry questions that mean it
  // carry their words (凭什么, 有完没完).
  const bool question = isQuestion(t) || !fold.a_not_a_clauses.empty();
  const bool asks = question || (sig.lang == Lang::kZh && hasQuestionWord(t));
  const bool silent = fold.found.empty();
  const bool denies = silent && fold.denied > 0;
  const std::optional<ExampleReader::Posterior> examples =
      ideographs >= kExampleMinIdeographs && !denies && !(silent && asks)
          ? tables.examples.read(exampleText(t))
          : std::nullopt;
  const int strongest =
      scoreEmotion(fold.found, emphasisOf(message, t), mentionsYou(t), examples, &sig);

  size_t chainBegin = std::string_view::npos;
  size_t chainEnd = std::string_view::npos;
  if (strongest >= 0) {
    const EmotionHit& e = fold.found[static_cast<size_t>(strongest)];
    sig.feel = cutOriginal(message, n, e.feel_begin, e.feel_end);
    chainBegin = e.chain_begin;
    chainEnd = e.chain_end;
  }

  // Spoken to the reader ("你怎么又迟到了，我真的很生气"): with anger, replies then
  // own their part instead of taking the sender's side against a third party.
  bool news = false;
  for (const EmotionHit& e : fold.found) {
    news = news || (e.news && (e.emotion == Emotion::kJoy || e.emotion == Emotion::kSurprise));
  }
  sig.conditions = static_cast<uint8_t>(
      (mentionsYou(t) ? kCondAddressed : 0) | (question ? kCondQuestion : 0) |
      (isInvite(t, question) ? kCondInvite | kCondQuestion : 0) | (news ? kCondNews : 0));

  sig.act = readAct(t, sig.lang, question, (sig.conditions & kCondInvite) != 0, news, sig.emotion,
                    sig.worded_emotion, (sig.conditions & kCondAddressed) != 0, &sig.greeting);

  auto [s, e] = pickTopic(t, fold, sig.emotion, sig.lang, chainBegin, chainEnd);
  // No fragment is ever said back: a cut that stops mid-sentence is carried
  // to the end of its clause ("...and i am" -> "...and i am scared"), and if
  // that still does not read as a whole clause, the reply does without it.
  if (s < e && endsDangling(t, s, e, sig.lang)) {
    const size_t whole = clauseEndFrom(t, e);
    if (whole > e && !endsDangling(t, s, whole, sig.lang) &&
        countUnits(t, s, whole) <= (sig.lang == Lang::kZh ? 24u : 16u)) {
      e = whole;
    } else {
      s = e = 0;
    }
  }
  if (s < e) sig.topic = cutOriginal(message, n, s, e);

  // The echo prefers the sender's own clause over a bare emotion word:
  // 「今天被老板骂了」 says more than 「生气」.
  // A clause is said back in the reader's words and woven into the reply's
  // own sentence; a bare feeling word or a message with nothing to take hold
  // of ("？？？", "ok") is quoted instead, the way people quote a word back.
  std::string interjection;
  // A topic that is nothing but the feeling ("呵呵", "笑死我了") is an
  // interjection, not a clause to weave in: turned round it would read "笑死你
  // 了". It is quoted like a bare word instead.
  if (s < e && chainBegin != std::string_view::npos &&
      interjectionOnly(t, s, e, chainBegin, chainEnd)) {
    interjection = std::move(sig.topic);
    sig.topic.clear();
  }
  if (!sig.topic.empty()) {
    sig.said = sig.topic;
    sig.topic = speakBack(sig.topic, sig.lang);
    sig.echo = sig.topic;
    // A yes/no question only reads right as reported speech ("你问我今晚有没有
    // 空"): phrases that weave {echo} into a statement quote it instead.
    // In English any question is asked back in quotes; an invitation that is
    // not phrased as a question ("let's grab dinner") is woven in like a statement.
    const bool asked = sig.lang == Lang::kZh ? askedForm(sig.said, sig.topic) : question;
    if (asked) {
      sig.conditions |= kCondAsked;
      sig.echo = sig.lang == Lang::kZh ? "「" + sig.said + "」" : "\"" + sig.said + "\"";
    }
  } else {
    const std::string bare = !interjection.empty() ? interjection
                             : sig.feel.empty()    ? fallbackEcho(message, n, sig.lang)
                                                   : sig.feel;
    sig.said = bare;
    sig.echo = sig.lang == Lang::kZh ? "「" + bare + "」" : "\"" + bare + "\"";
  }
  return sig;
}

// ---------------------------------------------------------------------------
// Strategy fit: how well each strategy suits the signals, in [0, 1], kept as
// components so that perfect mode can say which one made the difference.

// clang-format off
// Columns: empathize, reassure, humor, apologize, boundary, flirt,
// congratulate, space, curious. Rows follow Emotion. Apologizing is only a
// mild fit for anger in general (the sender may be angry at someone else);
// being addressed, a strained relationship or a conflict scene raise it.
constexpr double kBaseFit[kEmotionCount][kStrategyCount] = {
    {.55, .10, .60, .00, .00, .35, .80, .00, .60},  // joy
    {.45, .60, .45, .00, .05, .70, .15, .00, .40},  // affection
    {.85, .40, .10, .25, .20, .00, .00, .35, .40},  // anger
    {.90, .75, .15, .05, .00, .00, .00, .35, .45},  // sadness
    {.70, .90, .20, .05, .00, .00, .00, .15, .50},  // anxiety
    {.70, .30, .30, .15, .20, .00, .00, .30, .45},  // disgust
    {.40, .20, .50, .00, .00, .15, .45, .00, .80},  // surprise
    {.35, .20, .45, .00, .00, .20, .00, .10, .75},  // neutral
};

// Rows follow Stage. -1 rules a strategy out (flirting with a colleague).
constexpr double kStageFit[kStageCount][kStrategyCount] = {
    {-.05, -.05, .00, .00, .05, -.30, .00, .00, .10},  // stranger
    {.00, .00, .05, .00, .00, -.20, .00, .00, .10},    // acquaintance
    {.00, .00, .05, .00, -.05, .20, .00, -.05, .10},   // ambiguous
    {.05, .05, .05, .10, -.05, .15, .00, .00, .00},    // dating
    {.05, .10, .00, .10, -.05, .10, .00, .00, .00},    // committed
    {.05, .00, -.15, .30, .10, -1, -.10, .15, .00},    // strained
    {.00, -.10, -.20, .00, .30, -1, -.10, .30, -.10},  // post_breakup
    {.00, .00, -.10, .05, .10, -1, .00, .00, .10},     // colleague
    {.05, .10, .00, .05, .00, -1, .00, .00, .00},      // family
    {.00, .00, .00, .00, .00, .00, .00, .00, .00},     // unknown
};

// Rows follow Scene.
constexpr double kSceneFit[kSceneCount][kStrategyCount] = {
    {.00, .00, .00, .00, .00, .00, .00, .00, .00},   // none
    {.00, .00, .05, .00, .00, .00, .00, .00, .05},   // chat
    {.00, .00, .05, .00, .00, .25, .00, .00, .10},   // ambiguous
    {.00, .00, .05, .00, .00, .20, .00, .00, .05},   // dating
    {-.05, .00, .35, .00, .00, .00, .00, .00, .00},  // humor
    {.05, .00, -.15, .20, .20, -1, -.10, .10, .00},  // conflict
    {.00, .00, .10, .00, .00, -.10, .00, .00, .10},  // social
    {.00, .00, -.10, .05, .10, -1, .00, .00, .10},   // work
    {.00, -.05, -.15, .00, .20, -1, -.10, .25, .00}, // breakup
    {.00, .10, .00, .00, .00, .20, .20, .00, .00},   // proposal
};
// clang-format on

// Rows follow Act: what the message does moves the fit on top of the
// feeling. -1 rules a strategy out: flirting with, joking at or soothing the
// one who is leaving; apologizing back to an apology or to thanks.
constexpr double kActFit[kActCount][kStrategyCount] = {
    {.00, .10, .10, -.30, .10, .15, -1, -.20, .15},   // invite
    {.00, .20, .00, -.20, .00, .00, -1, .20, .00},    // ask
    {.00, .35, .00, -.20, .20, .00, -1, .00, .10},    // request_favour
    {.05, .00, .05, -1, -.20, .00, .35, -.20, .05},   // share_good_news
    {.10, .10, -.20, .00, -.20, -1, -1, .00, .00},    // confide_trouble
    {.00, .00, -.30, .40, .10, -1, -1, .00, .00},     // complain_about_reader
    {.00, .40, .00, -1, .20, .00, -1, .00, -.10},     // apologize
    {.00, .40, .15, -1, -.20, .05, -1, -.20, -.20},   // thank
    {-.30, -1, -1, .00, .45, -1, -1, .50, .10},       // reject_or_breakup
    {.00, .35, -.20, -.20, .15, .15, -1, .10, -.10},  // confess_feelings
    {.00, .00, .15, -.30, .00, .20, -1, -.20, .00},   // flirt
    {.00, .50, -.30, .00, .00, .00, -1, -.20, -.10},  // test_reader
    {.00, .00, .00, .00, .00, .00, .00, .00, .00},    // small_talk: no act, no change
};

// A strategy is "applicable" (offered in standard and perfect mode) from here.
constexpr double kApplicableFit = 0.3;

enum Component : uint8_t {
  kByEmotion,
  kByIntensity,
  kByStage,
  kByScene,
  kBySituation,
  kByAct,
  kComponentCount
};

struct Fit {
  std::array<double, kComponentCount> parts{};
  double total = 0;
};

std::array<Fit, kStrategyCount> fitStrategies(const Signals& sig) {
  std::array<Fit, kStrategyCount> fits;
  const bool negative = isNegative(sig.emotion);
  const bool high = sig.intensity >= 0.7;
  for (size_t s = 0; s < kStrategyCount; ++s) {
    Fit& f = fits[s];
    const auto strategy = static_cast<Strategy>(s);
    f.parts[kByEmotion] = kBaseFit[idx(sig.emotion)][s];
    double intensity = 0;
    if (negative && high) {
      // Strong negative feelings: no jokes, fewer questions, more room.
      if (strategy == Strategy::kHumor) intensity = -.25;
      if (strategy == Strategy::kCurious) intensity = -.10;
      if (strategy == Strategy::kSpace) intensity = .10;
      if (strategy == Strategy::kEmpathize) intensity = .05;
    } else if (negative && sig.intensity < 0.35) {
      if (strategy == Strategy::kHumor) intensity = .10;
      if (strategy == Strategy::kCurious) intensity = .05;
    } else if (sig.emotion == Emotion::kJoy && high) {
      if (strategy == Strategy::kCongratulate) intensity = .10;
      if (strategy == Strategy::kHumor) intensity = .05;
    }
    f.parts[kByIntensity] = intensity;
    f.parts[kByStage] = kStageFit[idx(sig.stage)][s];
    f.parts[kByScene] = kSceneFit[idx(sig.scene)][s];
    // The situation: what the message does besides feeling something.
    double situation = 0;
    const uint8_t cond = sig.conditions;
    if ((cond & kCondAddressed) &&
        (sig.emotion == Emotion::kAnger || sig.emotion == Emotion::kDisgust)) {
      // Anger aimed at the reader: owning it comes first, taking sides with
      // the sender against "them" no longer fits, and jokes land badly.
      if (strategy == Strategy::kApologize) situation += .50;
      if (strategy == Strategy::kBoundary) situation += .20;
      if (strategy == Strategy::kEmpathize) situation -= .15;
      if (strategy == Strategy::kHumor) situation -= .15;
      if (strategy == Strategy::kReassure) situation -= .20;
    }
    if ((cond & kCondAddressed) && sig.emotion == Emotion::kSadness) {
      // Hurt that names the reader ("你今天怎么没回我消息"): an apology becomes
      // an option, though comfort still leads.
      if (strategy == Strategy::kApologize) situation += .25;
    }
    if ((cond & kCondQuestion) && sig.emotion == Emotion::kAffection) {
      // "你到底爱不爱我": a question about feelings asks for reassurance.
      if (strategy == Strategy::kReassure) situation += .20;
      if (strategy == Strategy::kFlirt) situation -= .10;
    }
    if ((cond & kCondQuestion) && sig.emotion == Emotion::kAnxiety) {
      if (strategy == Strategy::kReassure) situation += .10;
    }
    if (cond & kCondInvite) {
      if (strategy == Strategy::kCurious) situation += .10;
      if (strategy == Strategy::kFlirt) situation += .10;
      if (strategy == Strategy::kHumor) situation += .05;
    }
    if (sig.emotion == Emotion::kJoy || sig.emotion == Emotion::kSurprise) {
      // Congratulations need something to congratulate on: 升职 yes, 哈哈 no.
      if (strategy == Strategy::kCongratulate) situation += (cond & kCondNews) ? .10 : -.35;
    }
    f.parts[kBySituation] = situation;
    const double byAct = kActFit[idx(sig.act)][s];
    f.parts[kByAct] = byAct <= -1 ? 0 : byAct;  // a -1 rules out below, it adds nothing
    double total = 0;
    for (double p : f.parts) total += p;
    // Hard rules that no bonus overrides.
    if (strategy == Strategy::kFlirt && negative && sig.intensity >= 0.3) total = 0;
    if (strategy == Strategy::kCongratulate && negative) total = 0;
    if (strategy == Strategy::kApologize && isPositive(sig.emotion)) total = 0;
    if (kActFit[idx(sig.act)][s] <= -1) total = 0;
    f.total = std::clamp(total, 0.0, 1.0);
  }
  return fits;
}

std::array<Strategy, kStrategyCount> rankStrategies(const std::array<Fit, kStrategyCount>& fits) {
  std::array<Strategy, kStrategyCount> order;
  for (size_t s = 0; s < kStrategyCount; ++s) order[s] = static_cast<Strategy>(s);
  std::stable_sort(order.begin(), order.end(),
                   [&](Strategy a, Strategy b) { return fits[idx(a)].total > fits[idx(b)].total; });
  return order;
}

// ---------------------------------------------------------------------------
// Composition.

// Sentence frames the engine itself adds around the data phrases. They stay
// in code because they are tied to the logic that picks them (which reason,
// which intensity band); the data file holds everything else.
struct Frames {
  std::string_view lead_calm, lead_low, lead_mid, lead_high;
  std::string_view compare_top, compare_below, same_strategy, also_consider;
  std::string_view reason_emotion, reason_calm, reason_intensity, reason_stage, reason_scene,
      reason_addressed, reason_question, reason_invite, reason_news, reason_detail, reason_act;
};

constexpr Frames kZhFrames{
    "对方语气比较平静。",
    "对方有点{mood}。",
    "对方挺{mood}的。",
    "对方非常{mood}。",
    "在{count}种适用的策略里比较下来，比起「{other}」，「{self}」{reason}。",
    "它排在「{other}」之后，因为「{other}」{reason}。",
    "和首选同属「{self}」，换了一种说法，方便你挑选。",
    "也可以考虑「{other}」。",
    "更贴合对方此刻的{mood}",
    "更适合这种平和的语气",
    "在情绪这么强烈的时候更稳妥",
    "更符合你们目前（{stage}）的关系",
    "更契合「{scene}」这个场景",
    "更能回应对方冲着你来的情绪",
    "更能接住对方的问题",
    "更适合回应对方的邀约",
    "更适合回应对方的好消息",
    "说法更具体，长度也更合适",
    "更能回应这条消息在做的事",
};

constexpr Frames kEnFrames{
    "Their tone is fairly calm. ",
    "They sound a little {mood}. ",
    "They sound quite {mood}. ",
    "They sound really {mood}. ",
    "Of the {count} approaches that fit here, {self} beats {other}: it {reason}.",
    "It ranks below {other}, which {reason}.",
    "Same approach as the top pick ({self}), phrased differently to give you a choice.",
    " Also worth considering: {other}.",
    "fits their {mood} mood better",
    "suits their calm tone better",
    "is safer when feelings run this high",
    "suits where you two are ({stage}) better",
    "fits the {scene} setting better",
    "answers feelings aimed at you more directly",
    "takes up their question better",
    "answers their invitation better",
    "does their good news more justice",
    "is more specific and better sized",
    "does what their message asks of you",
};

const Frames& framesFor(Lang lang) { return lang == Lang::kZh ? kZhFrames : kEnFrames; }

// Replaces {name} placeholders through lookup(name); unknown names stay as
// they are (data placeholders are validated at load time).
template <typename Lookup>
std::string fill(std::string_view tpl, Lookup lookup) {
  std::string out;
  out.reserve(tpl.size() + 32);
  size_t pos = 0;
  while (pos < tpl.size()) {
    const size_t open = tpl.find('{', pos);
    if (open == std::string_view::npos) break;
    const size_t close = tpl.find('}', open);
    if (close == std::string_view::npos) break;
    out.append(tpl.substr(pos, open - pos));
    const std::string_view name = tpl.substr(open + 1, close - open - 1);
    const std::optional<std::string_view> value = lookup(name);
    if (value) {
      out.append(*value);
    } else {
      out.append(tpl.substr(open, close - open + 1));
    }
    pos = close + 1;
  }
  out.append(tpl.substr(pos));
  return out;
}

void capitalizeFirst(std::string& s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') {
      c = static_cast<char>(c - 'a' + 'A');
      return;
    }
    if (isAsciiAlnum(static_cast<unsigned char>(c))) return;
  }
}

struct Candidate {
  Strategy strategy = Strategy::kEmpathize;
  double score = 0;
  std::string text;
  int line = 0;
};

class Composer {
 public:
  Composer(const Data& tables, const Signals& sig)
      : sig_(sig),
        lang_(tables.lang[idx(sig.lang)]),
        frames_(framesFor(sig.lang)),
        fits_(fitStrategies(sig)),
        ranking_(rankStrategies(fits_)) {
    for (const auto& list : lang_.replies) {
      for (const Phrase& p : list) {
        if (p.forAct() && fitsAct(p) && p.fitsEmotion(sig_.emotion) &&
            p.fitsConditions(sig_.conditions) && fillable(p)) {
          actOnly_ = true;
        }
      }
    }
  }

  Act act() const { return sig_.act; }

  // Does the phrase fit the message's act? Lines written for small talk
  // answer a greeting ("在吗", "hey") only: small talk is also the act of any
  // message without a cue, which the emotion phrases serve.
  bool fitsAct(const Phrase& p) const {
    if (!p.fitsAct(sig_.act)) return false;
    return !(p.forAct() && sig_.act == Act::kSmallTalk && !sig_.greeting);
  }

  // The analysis' suggested_strategy when the bank has advice written for
  // the act (any strategy's list), else empty.
  std::string actAdvice() const {
    for (const auto& list : lang_.advice) {
      for (const Phrase& p : list) {
        if (p.forAct() && fitsAct(p)) return render(p.text);
      }
    }
    return {};
  }

  const std::array<Fit, kStrategyCount>& fits() const { return fits_; }
  const std::array<Strategy, kStrategyCount>& ranking() const { return ranking_; }

  std::string_view strategyName(Strategy s) const { return lang_.strategy_names[idx(s)]; }

  std::optional<std::string_view> slotValue(std::string_view name) const {
    if (name == "echo") return std::string_view(sig_.echo);
    if (name == "said") return std::string_view(sig_.said);
    if (name == "feel") return std::string_view(sig_.feel);
    if (name == "topic") return std::string_view(sig_.topic);
    if (name == "mood") return std::string_view(lang_.emotion_names[idx(sig_.emotion)]);
    if (name == "stage") return std::string_view(lang_.stage_names[idx(sig_.stage)]);
    if (name == "scene") return std::string_view(lang_.scene_names[idx(sig_.scene)]);
    return std::nullopt;
  }

  bool fillable(const Phrase& p) const {
    if ((p.slots & kSlotFeel) && sig_.feel.empty()) return false;
    if ((p.slots & kSlotTopic) && sig_.topic.empty()) return false;
    if ((p.slots & kSlotMood) && sig_.emotion == Emotion::kNeutral) return false;
    return true;
  }

  std::string render(std::string_view tpl) const {
    std::string out = fill(tpl, [this](std::string_view name) { return slotValue(name); });
    if (sig_.lang == Lang::kEn) capitalizeFirst(out);
    return out;
  }

  // The best phrase of a list for this message: fitting the emotion (and the
  // stage, for needs), most specific first; among equals, one chosen by the
  // message hash so that different messages read differently.
  const Phrase* pick(const std::vector<Phrase>& list) const {
    int bestSpec = -1;
    std::vector<const Phrase*> best;
    for (const Phrase& p : list) {
      if (!p.fitsEmotion(sig_.emotion) || !p.fitsStage(sig_.stage) ||
          !p.fitsConditions(sig_.conditions) || !fitsAct(p) || !fillable(p)) {
        continue;
      }
      // A line written for the act outranks everything else: what the
      // message does decides what the reader needs.
      const int spec = (p.forAct() ? 4 : 0) + (p.anyStage() ? 0 : 2) +
                       (p.anyEmotion() && p.require == 0 ? 0 : 1);
      if (spec > bestSpec) {
        bestSpec = spec;
        best.clear();
      }
      if (spec == bestSpec) best.push_back(&p);
    }
    if (best.empty()) return nullptr;
    return best[static_cast<size_t>(mix64(sig_.hash) % best.size())];
  }

  // Every usable reply of a strategy, scored, best first. Score, in [0, 1]:
  //   0.60 x strategy fit (emotion, intensity, stage, scene, situation)
  //   0.15 if the reply echoes a term from the message
  //   0.10 x length fit (close to ~1.5x the message length, within bounds)
  //   0.15 x template specificity (Phrase::specificity: targeted emotions,
  //          required situation)
  // plus a jitter below 0.01 from the message hash that only breaks ties, so
  // equally good phrasings rotate between messages. Rounded to 3 decimals.
  const std::vector<Candidate>& candidates(Strategy s, bool loose = false) const {
    std::optional<std::vector<Candidate>>& cached = (loose ? looseCache_ : cache_)[idx(s)];
    if (cached) return *cached;
    cached.emplace();
    const double ideal = sig_.lang == Lang::kZh
                             ? std::clamp(static_cast<double>(sig_.message_units) * 1.5, 14.0, 40.0)
                             : std::clamp(static_cast<double>(sig_.message_units) * 1.5, 8.0, 30.0);
    for (const Phrase& p : lang_.replies[idx(s)]) {
      if (!p.fitsEmotion(sig_.emotion) || !p.fitsConditions(sig_.conditions) ||
          !fitsAct(p) || !fillable(p)) {
        continue;
      }
      // When the bank has replies written for this act, only those are
      // offered (until topUp runs short): a generic reply to "我们还是做朋友吧"
      // comforts the one who is leaving, and one to an invitation never
      // answers it.
      if (actOnly_ && !p.forAct() && !loose) continue;
      Candidate c;
      c.strategy = s;
      c.line = p.line;
      c.text = render(p.text);
      const auto len = static_cast<double>(countUnits(c.text, 0, c.text.size()));
      const double lengthFit = std::max(0.0, 1.0 - std::abs(len - ideal) / ideal);
      const double echo = (p.slots & kEchoSlots) ? 1.0 : 0.0;
      const double specific = p.specificity();
      const double jitter =
          static_cast<double>(mix64(sig_.hash ^ static_cast<uint64_t>(p.line)) % 10) / 1000.0;
      const double raw =
          0.6 * fits_[idx(s)].total + 0.15 * echo + 0.1 * lengthFit + 0.15 * specific + jitter;
      c.score = std::round(std::clamp(raw, 0.0, 1.0) * 1000.0) / 1000.0;
      cached->push_back(std::move(c));
    }
    std::stable_sort(cached->begin(), cached->end(),
                     [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
    return *cached;
  }

  // The sentence naming which fit component made `better` beat `worse`.
  std::string reason(Strategy better, Strategy worse) const {
    const Fit& a = fits_[idx(better)];
    const Fit& b = fits_[idx(worse)];
    int best = -1;
    double bestDiff = 0.02;
    for (size_t c = 0; c < kComponentCount; ++c) {
      const double diff = a.parts[c] - b.parts[c];
      if (diff > bestDiff) {
        bestDiff = diff;
        best = static_cast<int>(c);
      }
    }
    std::string_view frame = frames_.reason_detail;
    switch (best) {
      case kByEmotion:
        frame = sig_.emotion == Emotion::kNeutral ? frames_.reason_calm : frames_.reason_emotion;
        break;
      case kByIntensity:
        frame = frames_.reason_intensity;
        break;
      case kByStage:
        frame = frames_.reason_stage;
        break;
      case kByScene:
        frame = frames_.reason_scene;
        break;
      case kBySituation: {
        // Name the situation that fitStrategies() actually scored, in the
        // same order of precedence.
        const uint8_t cond = sig_.conditions;
        const bool hostile = sig_.emotion == Emotion::kAnger || sig_.emotion == Emotion::kDisgust;
        const bool hurt = sig_.emotion == Emotion::kSadness;
        frame = ((cond & kCondAddressed) && (hostile || hurt)) ? frames_.reason_addressed
                : (cond & kCondInvite)                         ? frames_.reason_invite
                : (cond & kCondNews)                           ? frames_.reason_news
                                                               : frames_.reason_question;
        break;
      }
      case kByAct:
        frame = frames_.reason_act;
        break;
      default:
        break;
    }
    return fill(frame, [this](std::string_view name) { return slotValue(name); });
  }

  std::string lead() const {
    std::string_view frame = frames_.lead_calm;
    if (sig_.emotion != Emotion::kNeutral) {
      frame = sig_.intensity < 0.4    ? frames_.lead_low
              : sig_.intensity < 0.75 ? frames_.lead_mid
                                      : frames_.lead_high;
    }
    return fill(frame, [this](std::string_view name) { return slotValue(name); });
  }

  std::string why(Strategy s) const {
    // A reply written for the act is explained by what it does for the act
    // (a why line with @act, in any strategy's list), not by the emotion.
    if (actOnly_) {
      for (const auto& list : lang_.whys) {
        for (const Phrase& p : list) {
          if (p.forAct() && fitsAct(p) && fillable(p)) return render(p.text);
        }
      }
    }
    const Phrase* p = pick(lang_.whys[idx(s)]);
    return p == nullptr ? std::string() : render(p->text);
  }

  std::string advice(Strategy s) const {
    const Phrase* p = pick(lang_.advice[idx(s)]);
    return p == nullptr ? std::string() : render(p->text);
  }

  std::string need() const {
    const Phrase* p = pick(lang_.needs);
    return p == nullptr ? std::string() : render(p->text);
  }

  const Frames& frames() const { return frames_; }

 private:
  const Signals& sig_;
  const LangTables& lang_;
  const Frames& frames_;
  std::array<Fit, kStrategyCount> fits_;
  std::array<Strategy, kStrategyCount> ranking_;
  // Candidates are built only for strategies a mode asks about; fast mode
  // usually touches one.
  mutable std::array<std::optional<std::vector<Candidate>>, kStrategyCount> cache_;
  mutable std::array<std::optional<std::vector<Candidate>>, kStrategyCount> looseCache_;
  bool actOnly_ = false;  // the bank has replies written for this act
};

// Collects distinct replies up to a count.
class Picker {
 public:
  explicit Picker(size_t want) : want_(want) {}
  bool full() const { return chosen_.size() >= want_; }
  void offer(const Candidate& c) {
    if (full()) return;
    for (const Candidate& have : chosen_) {
      if (have.text == c.text) return;
    }
    chosen_.push_back(c);
  }
  std::vector<Candidate>& chosen() { return chosen_; }

 private:
  size_t want_;
  std::vector<Candidate> chosen_;
};

// Offers candidates of several strategies in rounds: the best of each, then
// the second best of each, and so on; within a round the better score first.
// This keeps the set varied without letting a weak strategy push out a
// strong one's best phrasing.
void offerInRounds(const Composer& composer, const std::vector<Strategy>& strategies,
                   Picker* picker) {
  for (size_t round = 0; !picker->full(); ++round) {
    std::vector<const Candidate*> row;
    for (Strategy s : strategies) {
      const std::vector<Candidate>& list = composer.candidates(s);
      if (round < list.size()) row.push_back(&list[round]);
    }
    if (row.empty()) return;
    std::stable_sort(row.begin(), row.end(),
                     [](const Candidate* a, const Candidate* b) { return a->score > b->score; });
    for (const Candidate* c : row) picker->offer(*c);
  }
}

// When a mode's own strategies run out of distinct phrasings, the count is
// still met: first from the remaining strategies that fit at all, then from
// any strategy, in ranking order.
void topUp(const Composer& composer, Picker* picker) {
  // Passes: fitting strategies, then any strategy, then (only when the act's
  // own replies ran out) generic replies too.
  for (int pass = 0; pass < 3 && !picker->full(); ++pass) {
    for (Strategy s : composer.ranking()) {
      if (pass == 0 && composer.fits()[idx(s)].total <= 0) continue;
      for (const Candidate& c : composer.candidates(s, pass == 2)) picker->offer(c);
      if (picker->full()) return;
    }
  }
}

// The strategies a mode draws from, best fit first: those at or above
// kApplicableFit, at most `most`, and at least `least` (padding from the
// ranking while the fit is above zero).
std::vector<Strategy> strategiesFor(const Composer& composer, size_t least, size_t most) {
  std::vector<Strategy> out;
  for (Strategy s : composer.ranking()) {
    const double fit = composer.fits()[idx(s)].total;
    if (out.size() >= most) break;
    if (fit >= kApplicableFit || (out.size() < least && fit > 0)) out.push_back(s);
  }
  if (out.empty()) out.push_back(composer.ranking()[0]);
  return out;
}

}  // namespace
}  // namespace detail

using detail::Act;
using detail::Candidate;
using detail::capitalizeFirst;
using detail::Composer;
using detail::countTokens;
using detail::fill;
using detail::Frames;
using detail::idx;
using detail::kActNames;
using detail::kApplicableFit;
using detail::kEmotionNames;
using detail::kStageNames;
using detail::kStrategyCount;
using detail::Lang;
using detail::offerInRounds;
using detail::parseExamples;
using detail::parseLexicon;
using detail::parsePhrases;
using detail::Picker;
using detail::readMessage;
using detail::sanitizeUtf8;
using detail::Signals;
using detail::strategiesFor;
using detail::Strategy;
using detail::topUp;

// ---------------------------------------------------------------------------
// BuiltinEngine.

BuiltinEngine::BuiltinEngine(std::unique_ptr<const Tables> tables) : tables_(std::move(tables)) {}
BuiltinEngine::~BuiltinEngine() = default;

eq::Result<std::unique_ptr<BuiltinEngine>> BuiltinEngine::create(std::string_view lexicon_tsv,
                                                                 std::string_view phrases_tsv,
                                                                 std::string_view examples_tsv) {
  auto tables = std::make_unique<Tables>();
  Status st = parseLexicon(lexicon_tsv, tables.get());
  if (!st.isOk()) return st;
  st = parsePhrases(phrases_tsv, tables.get());
  if (!st.isOk()) return st;
  st = parseExamples(examples_tsv, tables.get());
  if (!st.isOk()) return st;
  return std::unique_ptr<BuiltinEngine>(new BuiltinEngine(std::move(tables)));
}

eq::Result<Analysis> BuiltinEngine::analyze(const AnalyzeInput& in) const {
  const std::optional<std::string> fixedMessage = sanitizeUtf8(in.message);
  const std::optional<std::string> fixedContext = sanitizeUtf8(in.context);
  const std::string_view message = fixedMessage ? *fixedMessage : std::string_view(in.message);
  const std::string_view context = fixedContext ? *fixedContext : std::string_view(in.context);
  if (message.empty()) return Status(400, "message is empty");

  const Signals sig = readMessage(*tables_, message, context, in.scene);
  const Composer composer(*tables_, sig);
  Analysis out;
  out.emotion = std::string(kEmotionNames[idx(sig.emotion)]);
  out.intensity = sig.intensity;
  out.relationship_stage = std::string(kStageNames[idx(sig.stage)]);
  out.underlying_need = composer.need();
  // The suggested strategy is the one fast mode would use, so analyze and
  // reply never disagree; the runner-up is named when it also fits.
  const Strategy first = composer.ranking()[0];
  const Strategy second = composer.ranking()[1];
  const std::string actAdvice = composer.actAdvice();
  out.suggested_strategy = actAdvice.empty() ? composer.advice(first) : actAdvice;
  if (composer.fits()[idx(second)].total >= kApplicableFit) {
    out.suggested_strategy += fill(composer.frames().also_consider, [&](std::string_view name) {
      return name == "other" ? std::optional<std::string_view>(composer.strategyName(second))
                             : std::nullopt;
    });
  }
  return out;
}

std::string BuiltinEngine::actOf(const AnalyzeInput& in) const {
  const std::optional<std::string> fixedMessage = sanitizeUtf8(in.message);
  const std::optional<std::string> fixedContext = sanitizeUtf8(in.context);
  const std::string_view message = fixedMessage ? *fixedMessage : std::string_view(in.message);
  const std::string_view context = fixedContext ? *fixedContext : std::string_view(in.context);
  if (message.empty()) return std::string(kActNames[idx(Act::kSmallTalk)]);
  return std::string(kActNames[idx(readMessage(*tables_, message, context, in.scene).act)]);
}

eq::Result<ReplyOutput> BuiltinEngine::reply(const ReplyInput& in) const {
  if (in.reply_count < 1 || in.reply_count > 5) return Status(400, "reply_count must be 1..5");
  const std::optional<std::string> fixedMessage = sanitizeUtf8(in.message);
  const std::optional<std::string> fixedContext = sanitizeUtf8(in.context);
  const std::string_view message = fixedMessage ? *fixedMessage : std::string_view(in.message);
  const std::string_view context = fixedContext ? *fixedContext : std::string_view(in.context);
  if (message.empty()) return Status(400, "message is empty");

  const Signals sig = readMessage(*tables_, message, context, in.scene);
  const Composer composer(*tables_, sig);
  const auto want = static_cast<size_t>(in.reply_count);
  Picker picker(want);

  // The modes differ in how much of the strategy space they look at:
  //   fast     one strategy (the best fit), several phrasings of it;
  //   standard the analysis picks the 2-3 best-fitting strategies, whose
  //            candidates are ranked together;
  //   perfect  every applicable strategy is scored and compared, and each
  //            reply explains how it compares with the others.
  std::vector<Strategy> pool;
  switch (in.mode) {
    case Mode::kFast:
      pool = {composer.ranking()[0]};
      for (const Candidate& c : composer.candidates(pool[0])) picker.offer(c);
      break;
    case Mode::kStandard:
      pool = strategiesFor(composer, 2, 3);
      offerInRounds(composer, pool, &picker);
      break;
    case Mode::kPerfect:
      pool = strategiesFor(composer, 2, kStrategyCount);
      offerInRounds(composer, pool, &picker);
      break;
  }
  topUp(composer, &picker);
  std::vector<Candidate>& chosen = picker.chosen();
  if (chosen.size() < want) return Status(500, "could not compose enough distinct replies");
  std::stable_sort(chosen.begin(), chosen.end(),
                   [](const Candidate& a, const Candidate& b) { return a.score > b.score; });

  // For perfect mode: the winning strategy and the runner-up it is compared
  // with (the best other strategy in the pool, by its best reply).
  const Strategy winner = chosen[0].strategy;
  Strategy runnerUp = winner;
  double runnerScore = -1;
  for (Strategy s : pool) {
    const std::vector<Candidate>& list = composer.candidates(s);
    if (s != winner && !list.empty() && list[0].score > runnerScore) {
      runnerUp = s;
      runnerScore = list[0].score;
    }
  }
  if (runnerUp == winner) {
    for (Strategy s : composer.ranking()) {
      if (s != winner) {
        runnerUp = s;
        break;
      }
    }
  }
  const std::string count = std::to_string(pool.size());
  const Frames& frames = composer.frames();

  // tokens_used estimates what a model would have read and written: the
  // message and context, plus every reply's text and eq_analysis, counted by
  // countTokens (one per CJK character, one per other word).
  ReplyOutput out;
  out.tokens_used = countTokens(message) + countTokens(context);
  for (size_t i = 0; i < chosen.size(); ++i) {
    const Candidate& c = chosen[i];
    Reply r;
    r.text = c.text;
    r.score = c.score;
    std::string analysis;
    if (in.mode != Mode::kFast) analysis = composer.lead();
    analysis += composer.why(c.strategy);
    if (in.mode == Mode::kPerfect) {
      std::string_view frame;
      Strategy self = c.strategy;
      Strategy other = runnerUp;
      std::string why;
      if (c.strategy == winner && i == 0) {
        frame = frames.compare_top;
        why = composer.reason(winner, runnerUp);
      } else if (c.strategy == winner) {
        frame = frames.same_strategy;
      } else {
        frame = frames.compare_below;
        other = winner;
        why = composer.reason(winner, c.strategy);
      }
      const std::string selfName(composer.strategyName(self));
      const std::string otherName(composer.strategyName(other));
      std::string sentence =
          fill(frame, [&](std::string_view name) -> std::optional<std::string_view> {
            if (name == "self") return std::string_view(selfName);
            if (name == "other") return std::string_view(otherName);
            if (name == "reason") return std::string_view(why);
            if (name == "count") return std::string_view(count);
            return std::nullopt;
          });
      if (sig.lang == Lang::kEn) {
        capitalizeFirst(sentence);
        analysis += " ";
      }
      analysis += sentence;
    }
    r.eq_analysis = std::move(analysis);
    out.tokens_used += countTokens(r.text) + countTokens(r.eq_analysis);
    out.replies.push_back(std::move(r));
  }
  return out;
}

}  // namespace eq::engine::builtin
