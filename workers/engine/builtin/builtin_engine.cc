// The built-in engine's entry points: create() parses the data files into the
// engine's read-only tables, and analyze(), reply() and actOf() read the
// message and compose from what was read. The parts, in the order a request
// flows through them (namespace detail, one concept per file):
//
//   text.h            UTF-8, character classes, normalization, counts, hashes
//   trie.h            the byte trie the lexicon is matched with
//   vocabulary.h      emotions, stages, strategies, scenes, acts, their names
//   tables.h          the parsed lexicon, phrase bank and example posts
//   example_reader.h  what the example posts say about a message
//   reading.h         reading a message into Signals; acts.h says what the
//                     message does, echo.h what a reply says back
//   strategy.h        how well each strategy fits the signals
//   composer.h        filling, scoring and picking replies, and explaining them
//   situations.h      the everyday situation a message is in, and the replies
//                     written for it: a message in a known situation is
//                     answered from those (replyInSituation below);
//                     situation_model.h reads it by its likeness to examples
//
// Everything is a pure function of the parsed tables and the input: no
// clock, no randomness, no mutable state after create(). Where the output needs
// variety between messages, it comes from a hash of the input.
#include "workers/engine/builtin/builtin_engine.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "workers/engine/builtin/composer.h"
#include "workers/engine/builtin/reading.h"
#include "workers/engine/builtin/situations.h"
#include "workers/engine/builtin/strategy.h"
#include "workers/engine/builtin/tables.h"
#include "workers/engine/builtin/text.h"
#include "workers/engine/builtin/vocabulary.h"

namespace eq::engine::builtin {

struct BuiltinEngine::Tables : detail::Data {};

using detail::Act;
using detail::Candidate;
using detail::capitalizeFirst;
using detail::Composer;
using detail::countTokens;
using detail::Emotion;
using detail::exampleText;
using detail::fill;
using detail::Frames;
using detail::idx;
using detail::kActNames;
using detail::kApplicableFit;
using detail::kEmotionNames;
using detail::kStageNames;
using detail::kStrategyCount;
using detail::Lang;
using detail::normalize;
using detail::offerInRounds;
using detail::parseExamples;
using detail::parseLexicon;
using detail::parsePhrases;
using detail::Picker;
using detail::readMessage;
using detail::sanitizeUtf8;
using detail::Signals;
using detail::SituationReading;
using detail::SituationReply;
using detail::Situations;
using detail::strategiesFor;
using detail::Strategy;
using detail::topUp;

BuiltinEngine::BuiltinEngine(std::unique_ptr<const Tables> tables) : tables_(std::move(tables)) {}
BuiltinEngine::~BuiltinEngine() = default;

eq::Result<std::unique_ptr<BuiltinEngine>> BuiltinEngine::create(std::string_view lexicon_tsv,
                                                                 std::string_view phrases_tsv,
                                                                 std::string_view examples_tsv,
                                                                 std::string_view situations_tsv,
                                                                 std::string_view situation_examples_tsv) {
  auto tables = std::make_unique<Tables>();
  Status st = parseLexicon(lexicon_tsv, tables.get());
  if (!st.isOk()) return st;
  st = parsePhrases(phrases_tsv, tables.get());
  if (!st.isOk()) return st;
  st = parseExamples(examples_tsv, tables.get());
  if (!st.isOk()) return st;
  st = parseSituations(situations_tsv, &tables->situations);
  if (!st.isOk()) return st;
  const Tables& read = *tables;
  st = parseSituationExamples(
      situation_examples_tsv,
      [&read](std::string_view message, std::string_view context, std::string_view scene) {
        return readMessage(read, message, context, scene).act;
      },
      &tables->situations);
  if (!st.isOk()) return st;
  return std::unique_ptr<BuiltinEngine>(new BuiltinEngine(std::move(tables)));
}

namespace {

// A request's text as valid UTF-8: a view of the original, or of a repaired
// copy when it held invalid bytes (sanitizeUtf8). Neither copied nor moved,
// so the view never outlives the copy it may point into.
class CleanText {
 public:
  explicit CleanText(std::string_view raw)
      : fixed_(sanitizeUtf8(raw)), view_(fixed_ ? std::string_view(*fixed_) : raw) {}
  CleanText(const CleanText&) = delete;
  CleanText& operator=(const CleanText&) = delete;

  std::string_view view() const { return view_; }

 private:
  std::optional<std::string> fixed_;
  std::string_view view_;
};

// Appends a sentence to an explanation: Chinese runs sentences together,
// English puts a space between them.
void appendSentence(Lang lang, std::string_view sentence, std::string* out) {
  if (sentence.empty()) return;
  if (lang == Lang::kEn && !out->empty() && out->back() != ' ') out->push_back(' ');
  out->append(sentence);
}

// Perfect mode's comparison of a reply's strategy with another, from one of
// the composer's frames ("Of the {count} approaches that fit here, {self}
// beats {other}: it {reason}."), capitalized in English.
std::string compareSentence(const Composer& composer, std::string_view frame, Strategy self,
                            Strategy other, std::string_view reason, std::string_view count,
                            Lang lang) {
  const std::string selfName(composer.strategyName(self));
  const std::string otherName(composer.strategyName(other));
  std::string sentence = fill(frame, [&](std::string_view name) -> std::optional<std::string_view> {
    if (name == "self") return std::string_view(selfName);
    if (name == "other") return std::string_view(otherName);
    if (name == "reason") return reason;
    if (name == "count") return count;
    return std::nullopt;
  });
  if (lang == Lang::kEn) capitalizeFirst(sentence);
  return sentence;
}

// The picked replies, best first; an error when the strategies could not
// give as many distinct replies as asked for.
Status sortChosen(std::vector<Candidate>& chosen, size_t want) {
  if (chosen.size() < want) return Status(500, "could not compose enough distinct replies");
  std::stable_sort(chosen.begin(), chosen.end(),
                   [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
  return Status::ok();
}

// The strategies a situation's replies take, in the order the data lists
// them: the first is the situation's main one.
std::vector<Strategy> strategiesOf(const std::vector<SituationReply>& replies) {
  std::vector<Strategy> out;
  for (const SituationReply& r : replies) {
    if (std::find(out.begin(), out.end(), r.strategy) == out.end()) out.push_back(r.strategy);
  }
  return out;
}

// One strategy's replies in a situation as candidates, best first. The
// score falls with the strategy's rank in the situation and with each
// further phrasing; the phrasings are rotated by a hash of the message, so
// that two messages of one situation do not always get the same first reply.
// Replies that fail `keep` are left out.
template <typename Keep>
std::vector<Candidate> situationCandidates(const std::vector<SituationReply>& replies,
                                           Strategy strategy, size_t rank, uint64_t hash,
                                           const Keep& keep) {
  std::vector<const SituationReply*> mine;
  for (const SituationReply& r : replies) {
    if (r.strategy == strategy && keep(r)) mine.push_back(&r);
  }
  std::vector<Candidate> out;
  for (size_t j = 0; j < mine.size(); ++j) {
    const SituationReply& r = *mine[(j + hash) % mine.size()];
    Candidate c;
    c.strategy = strategy;
    c.score = std::max(0.05, 0.94 - 0.08 * static_cast<double>(rank) - 0.03 * static_cast<double>(j));
    c.text = r.text;
    out.push_back(std::move(c));
  }
  return out;
}

// The replies written for a situation the message came close to (near)
// that are also right in the situation it was read as: they break neither
// the reading's guard nor the guard of another near situation
// (safeNearby(reply, near)). The ones that break the fewest guards anywhere
// come first; they rank below the reading's own safe replies and above
// its unsafe ones. Only the cues' reading lends its replies: a situation
// that is merely close ("谢谢你" to sarcasm, "what books do you like?" to
// flirting) would lend replies that are wrong for the message.
template <typename SafeNearby>
std::vector<Candidate> sharedGround(const Situations& situations, Lang lang, int reading,
                                    int near, const SafeNearby& safeNearby) {
  std::vector<const SituationReply*> fits;
  for (const SituationReply& r : situations.replies(lang, near)) {
    if (!situations.breaksGuard(lang, reading, r.text) && safeNearby(r, near)) fits.push_back(&r);
  }
  std::stable_sort(fits.begin(), fits.end(), [](const SituationReply* a, const SituationReply* b) {
    return a->guardsBroken < b->guardsBroken;
  });
  std::vector<Candidate> out;
  for (size_t j = 0; j < fits.size(); ++j) {
    Candidate c;
    c.strategy = fits[j]->strategy;
    c.score = std::max(0.02, 0.45 - 0.03 * static_cast<double>(j));
    c.text = fits[j]->text;
    c.situation = near;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

eq::Result<Analysis> BuiltinEngine::analyze(const AnalyzeInput& in) const {
  const CleanText message(in.message);
  const CleanText context(in.context);
  if (message.view().empty()) return Status(400, "message is empty");

  const Signals sig = readMessage(*tables_, message.view(), context.view(), in.scene);
  const Composer composer(*tables_, sig);
  const Situations& situations = tables_->situations;
  const SituationReading sit = situations.read(sig.lang, message.view(), context.view(), in.scene, sig.act);
  Analysis out;
  out.emotion = std::string(kEmotionNames[idx(sig.emotion)]);
  // A loss is sadness though its words name no feeling ("我的猫昨天走了" read
  // as surprise). Only a reading that cannot fit a loss is replaced (anger or
  // anxiety about a death is the sender's own, and stays).
  const bool unfitForLoss = sig.emotion == Emotion::kNeutral || sig.emotion == Emotion::kSurprise ||
                            sig.emotion == Emotion::kJoy || sig.emotion == Emotion::kAffection;
  // The loss must be in the message's words (the cues read it), not only
  // likely from the examples, and the whole must still read as a loss: the
  // same situation, or another of the first tier (an illness, a job lost).
  // "happy holidays from me and the cat" has a pet in it and is a wish.
  const bool lossRead = sit.cues >= 0 && situations.emotion(sit.cues) && sit.found() &&
                        (sit.cues == sit.situation || situations.tier(sit.situation) == 1);
  if (lossRead && unfitForLoss) {
    out.emotion = std::string(kEmotionNames[idx(*situations.emotion(sit.cues))]);
  }
  out.intensity = sig.intensity;
  out.relationship_stage = std::string(kStageNames[idx(sig.stage)]);
  out.underlying_need =
      sit.found() ? situations.need(sig.lang, sit.situation) : composer.need();
  // The suggested strategy is the one fast mode would use, so analyze and
  // reply never disagree; the runner-up is named when it also fits.
  const Strategy first = composer.ranking()[0];
  const Strategy second = composer.ranking()[1];
  const std::string actAdvice = composer.actAdvice();
  out.suggested_strategy = actAdvice.empty() ? composer.advice(first) : actAdvice;
  if (sit.found()) {
    out.suggested_strategy = situations.advice(sig.lang, sit.situation);
  } else if (composer.fits()[idx(second)].total >= kApplicableFit) {
    out.suggested_strategy += fill(composer.frames().also_consider, [&](std::string_view name) {
      return name == "other" ? std::optional<std::string_view>(composer.strategyName(second))
                             : std::nullopt;
    });
  }
  return out;
}

std::string BuiltinEngine::actOf(const AnalyzeInput& in) const {
  const CleanText message(in.message);
  const CleanText context(in.context);
  if (message.view().empty()) return std::string(kActNames[idx(Act::kSmallTalk)]);
  return std::string(
      kActNames[idx(readMessage(*tables_, message.view(), context.view(), in.scene).act)]);
}

std::string BuiltinEngine::situationOf(const AnalyzeInput& in) const {
  const CleanText message(in.message);
  const CleanText context(in.context);
  if (message.view().empty()) return "";
  const Signals sig = readMessage(*tables_, message.view(), context.view(), in.scene);
  const SituationReading sit =
      tables_->situations.read(sig.lang, message.view(), context.view(), in.scene, sig.act);
  return sit.found() ? tables_->situations.ids()[static_cast<size_t>(sit.situation)] : "";
}

bool BuiltinEngine::breaksSituationGuard(std::string_view situation,
                                         std::string_view reply) const {
  const int s = tables_->situations.indexOf(situation);
  if (s < 0) return false;
  bool cjk = false;
  for (size_t pos = 0; pos < reply.size() && !cjk;) {
    char32_t cp = 0;
    pos += detail::decodeUtf8(reply, pos, &cp);
    cjk = detail::isCjkIdeograph(cp);
  }
  return tables_->situations.breaksGuard(cjk ? Lang::kZh : Lang::kEn, s, reply);
}

BuiltinEngine::EmotionSources BuiltinEngine::emotionSourcesOf(const AnalyzeInput& in) const {
  const CleanText message(in.message);
  const CleanText context(in.context);
  EmotionSources out;
  out.words = out.examples = out.emotion = std::string(kEmotionNames[idx(Emotion::kNeutral)]);
  if (message.view().empty()) return out;
  const Signals sig = readMessage(*tables_, message.view(), context.view(), in.scene);
  out.words = std::string(kEmotionNames[idx(sig.worded_emotion)]);
  out.emotion = std::string(kEmotionNames[idx(sig.emotion)]);
  const std::optional<ExampleReader::Posterior> p =
      tables_->examples.read(exampleText(normalize(message.view()).text));
  if (p) {
    out.examples = std::string(
        kEmotionNames[static_cast<size_t>(std::max_element(p->begin(), p->end()) - p->begin())]);
  }
  return out;
}

eq::Result<ReplyOutput> BuiltinEngine::reply(const ReplyInput& in) const {
  if (in.reply_count < 1 || in.reply_count > 5) return Status(400, "reply_count must be 1..5");
  const CleanText cleanMessage(in.message);
  const CleanText cleanContext(in.context);
  const std::string_view message = cleanMessage.view();
  const std::string_view context = cleanContext.view();
  if (message.empty()) return Status(400, "message is empty");

  const Signals sig = readMessage(*tables_, message, context, in.scene);
  const Composer composer(*tables_, sig);
  const SituationReading sit = tables_->situations.read(sig.lang, message, context, in.scene, sig.act);
  if (sit.found()) return replyInSituation(in, sig, composer, sit);
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
  if (Status s = sortChosen(chosen, want); !s.isOk()) return s;

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
      if (sig.lang == Lang::kEn) analysis += " ";
      analysis += compareSentence(composer, frame, self, other, why, count, sig.lang);
    }
    r.eq_analysis = std::move(analysis);
    out.tokens_used += countTokens(r.text) + countTokens(r.eq_analysis);
    out.replies.push_back(std::move(r));
  }
  return out;
}

// A message in a known situation is answered from the sentences written
// for it, by the strategies it allows (docs/engine.md, "Situations"). The
// modes differ as they do elsewhere:
//   fast     the situation's main strategy, several phrasings of it;
//   standard its two or three first strategies, ranked together;
//   perfect  every strategy it allows, each reply compared with the best
//            reply of another.
// Any mode tops up from the situation's other strategies when its own run
// out. When the message came close to other situations
// (SituationReading::near), a reply must be right whichever of them it is
// in: first the situation's replies that break none of their guards; then,
// when the words alone read one of those situations (the cues: "soz" is
// an apology, though the examples read a reproach), the replies written for
// it that break neither the reading's guard nor another near one's (an
// apology is met with "no worries", not with "sorry"); only then the
// reading's own replies that break one. Every reply is checked against the
// situation's guard (what no reply in it may contain) once more here: data
// that broke it would have been refused at create(), so a reply that breaks
// it is a bug. Each reply's
// eq_analysis is the why of the situation it was written for, and in
// perfect mode the comparison.
eq::Result<ReplyOutput> BuiltinEngine::replyInSituation(const ReplyInput& in, const Signals& sig,
                                                        const Composer& composer,
                                                        const SituationReading& sit) const {
  const Situations& situations = tables_->situations;
  const int situation = sit.situation;
  const std::vector<SituationReply>& replies = situations.replies(sig.lang, situation);
  const std::vector<Strategy> strategies = strategiesOf(replies);
  const uint64_t hash = detail::fnv1a(in.message);
  const auto want = static_cast<size_t>(in.reply_count);
  // The replies that would also be right were the message in one of the
  // situations it came close to come first; the others only when too few
  // are, ranked below them. Each reply's guards are checked once.
  const auto safeNearby = [&](const SituationReply& r, int except) {
    return std::none_of(sit.near.begin(), sit.near.end(), [&](const SituationReading::Near& n) {
      return n.situation != except && situations.breaksGuard(sig.lang, n.situation, r.text);
    });
  };
  std::vector<bool> safe(replies.size());
  for (size_t i = 0; i < replies.size(); ++i) safe[i] = safeNearby(replies[i], -1);
  const auto isSafe = [&](const SituationReply& r) {
    return safe[static_cast<size_t>(&r - replies.data())];
  };
  const auto isUnsafe = [&](const SituationReply& r) { return !isSafe(r); };
  std::vector<std::vector<Candidate>> safeOwn, unsafeOwn;
  for (size_t r = 0; r < strategies.size(); ++r) {
    safeOwn.push_back(situationCandidates(replies, strategies[r], r, hash, isSafe));
    unsafeOwn.push_back(situationCandidates(replies, strategies[r], r, hash, isUnsafe));
    for (Candidate& c : safeOwn.back()) c.situation = situation;
    for (Candidate& c : unsafeOwn.back()) {
      c.situation = situation;
      c.score = std::max(0.01, c.score - 0.5);
    }
  }
  size_t poolSize = 1;
  if (in.mode == Mode::kStandard) poolSize = std::min<size_t>(3, strategies.size());
  if (in.mode == Mode::kPerfect) poolSize = strategies.size();

  Picker picker(want);
  // Rounds over the pool: each strategy's best, then each one's second best.
  auto offerRounds = [&](const std::vector<std::vector<Candidate>>& byStrategy, size_t from,
                         size_t to) {
    for (size_t round = 0; !picker.full(); ++round) {
      bool any = false;
      for (size_t r = from; r < to; ++r) {
        if (round < byStrategy[r].size()) {
          picker.offer(byStrategy[r][round]);
          any = true;
        }
      }
      if (!any) break;
    }
  };
  offerRounds(safeOwn, 0, poolSize);
  offerRounds(safeOwn, poolSize, strategies.size());
  const bool cuesNear =
      std::any_of(sit.near.begin(), sit.near.end(),
                  [&](const SituationReading::Near& n) { return n.situation == sit.cues; });
  if (cuesNear) {
    for (const Candidate& c : sharedGround(situations, sig.lang, situation, sit.cues, safeNearby)) {
      picker.offer(c);
    }
  }
  offerRounds(unsafeOwn, 0, strategies.size());
  std::vector<Candidate>& chosen = picker.chosen();
  if (Status s = sortChosen(chosen, want); !s.isOk()) return s;

  const Strategy winner = chosen[0].strategy;
  Strategy runnerUp = winner;
  for (size_t r = 0; r < poolSize; ++r) {
    if (strategies[r] != winner) {
      runnerUp = strategies[r];
      break;
    }
  }
  const std::string count = std::to_string(poolSize);
  const std::string reason(sig.lang == Lang::kZh ? "更贴合这个情境" : "fits this situation better");
  const Frames& frames = composer.frames();

  ReplyOutput out;
  out.tokens_used = countTokens(in.message) + countTokens(in.context);
  for (size_t i = 0; i < chosen.size(); ++i) {
    const Candidate& c = chosen[i];
    if (situations.breaksGuard(sig.lang, situation, c.text)) {
      return Status(500, "a situation reply breaks its guard: " + c.text);
    }
    Reply r;
    r.text = c.text;
    r.score = c.score;
    // The situation says why; the composer's own explanation of a strategy
    // is written for the feelings it read and may not fit the situation
    // (the joy of sharing, on a death).
    std::string analysis = situations.why(sig.lang, c.situation);
    if (in.mode == Mode::kPerfect && runnerUp != winner) {
      std::string_view frame = frames.compare_below;
      Strategy other = winner;
      if (c.strategy == winner) {
        frame = i == 0 ? frames.compare_top : frames.same_strategy;
        other = runnerUp;
      }
      appendSentence(sig.lang,
                     compareSentence(composer, frame, c.strategy, other, reason, count, sig.lang),
                     &analysis);
    }
    r.eq_analysis = std::move(analysis);
    out.tokens_used += countTokens(r.text) + countTokens(r.eq_analysis);
    out.replies.push_back(std::move(r));
  }
  return out;
}

}  // namespace eq::engine::builtin
