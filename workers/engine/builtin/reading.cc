// Reading a message into Signals (reading.h): scanning, folding the hits,
// scoring the emotions, the stage, what to say back, and readMessage,
// which runs the steps.
#include "workers/engine/builtin/reading.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <utility>

#include "workers/engine/builtin/acts.h"
#include "workers/engine/builtin/example_reader.h"
#include "workers/engine/builtin/text.h"
#include "workers/engine/builtin/trie.h"

namespace eq::engine::builtin::detail {
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
  return endsWithAny(t, b, {"很", "太",   "和",   "跟", "把", "被",   "的",   "得",  "地", "是",
                            "就", "都",   "也",   "又", "还", "在",   "让",   "给",  "对", "更",
                            "最", "非常", "特别", "真", "好", "有点", "因为", "觉得"});
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

}  // namespace

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

}  // namespace eq::engine::builtin::detail
