// Reading a message into Signals (reading.h): scanning, folding the hits,
// scoring the emotions, the stage, and readMessage, which runs the steps.
#include "workers/engine/builtin/reading.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <utility>

#include "workers/engine/builtin/acts.h"
#include "workers/engine/builtin/echo.h"
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

  chooseEcho(message, n, fold, chainBegin, chainEnd, question, &sig);
  return sig;
}

}  // namespace eq::engine::builtin::detail
