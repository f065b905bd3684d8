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
#include "workers/engine/builtin/reading.h"
#include "workers/engine/builtin/strategy.h"
#include "workers/engine/builtin/tables.h"
#include "workers/engine/builtin/text.h"
#include "workers/engine/builtin/trie.h"
#include "workers/engine/builtin/vocabulary.h"

namespace eq::engine::builtin {

struct BuiltinEngine::Tables : detail::Data {};

namespace detail {
namespace {

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
