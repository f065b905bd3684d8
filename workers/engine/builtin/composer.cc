// Composing replies (composer.h): the sentence frames, the Composer's
// scoring and explanations, and how the modes draw their replies.
#include "workers/engine/builtin/composer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "workers/engine/builtin/text.h"

namespace eq::engine::builtin::detail {
namespace {

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

}  // namespace

void capitalizeFirst(std::string& s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') {
      c = static_cast<char>(c - 'a' + 'A');
      return;
    }
    if (isAsciiAlnum(static_cast<unsigned char>(c))) return;
  }
}

Composer::Composer(const Data& tables, const Signals& sig)
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

bool Composer::fitsAct(const Phrase& p) const {
  if (!p.fitsAct(sig_.act)) return false;
  return !(p.forAct() && sig_.act == Act::kSmallTalk && !sig_.greeting);
}

std::string Composer::actAdvice() const {
  for (const auto& list : lang_.advice) {
    for (const Phrase& p : list) {
      if (p.forAct() && fitsAct(p)) return render(p.text);
    }
  }
  return {};
}

std::optional<std::string_view> Composer::slotValue(std::string_view name) const {
  if (name == "echo") return std::string_view(sig_.echo);
  if (name == "said") return std::string_view(sig_.said);
  if (name == "feel") return std::string_view(sig_.feel);
  if (name == "topic") return std::string_view(sig_.topic);
  if (name == "mood") return std::string_view(lang_.emotion_names[idx(sig_.emotion)]);
  if (name == "stage") return std::string_view(lang_.stage_names[idx(sig_.stage)]);
  if (name == "scene") return std::string_view(lang_.scene_names[idx(sig_.scene)]);
  return std::nullopt;
}

bool Composer::fillable(const Phrase& p) const {
  if ((p.slots & kSlotFeel) && sig_.feel.empty()) return false;
  if ((p.slots & kSlotTopic) && sig_.topic.empty()) return false;
  if ((p.slots & kSlotMood) && sig_.emotion == Emotion::kNeutral) return false;
  return true;
}

std::string Composer::render(std::string_view tpl) const {
  std::string out = fill(tpl, [this](std::string_view name) { return slotValue(name); });
  if (sig_.lang == Lang::kEn) capitalizeFirst(out);
  return out;
}

const Phrase* Composer::pick(const std::vector<Phrase>& list) const {
  int bestSpec = -1;
  std::vector<const Phrase*> best;
  for (const Phrase& p : list) {
    if (!p.fitsEmotion(sig_.emotion) || !p.fitsStage(sig_.stage) ||
        !p.fitsConditions(sig_.conditions) || !fitsAct(p) || !fillable(p)) {
      continue;
    }
    // A line written for the act outranks everything else: what the
    // message does decides what the reader needs.
    const int spec =
        (p.forAct() ? 4 : 0) + (p.anyStage() ? 0 : 2) + (p.anyEmotion() && p.require == 0 ? 0 : 1);
    if (spec > bestSpec) {
      bestSpec = spec;
      best.clear();
    }
    if (spec == bestSpec) best.push_back(&p);
  }
  if (best.empty()) return nullptr;
  return best[static_cast<size_t>(mix64(sig_.hash) % best.size())];
}

const std::vector<Candidate>& Composer::candidates(Strategy s, bool loose) const {
  std::optional<std::vector<Candidate>>& cached = (loose ? looseCache_ : cache_)[idx(s)];
  if (cached) return *cached;
  cached.emplace();
  const double ideal = sig_.lang == Lang::kZh
                           ? std::clamp(static_cast<double>(sig_.message_units) * 1.5, 14.0, 40.0)
                           : std::clamp(static_cast<double>(sig_.message_units) * 1.5, 8.0, 30.0);
  for (const Phrase& p : lang_.replies[idx(s)]) {
    if (!p.fitsEmotion(sig_.emotion) || !p.fitsConditions(sig_.conditions) || !fitsAct(p) ||
        !fillable(p)) {
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

std::string Composer::reason(Strategy better, Strategy worse) const {
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

std::string Composer::lead() const {
  std::string_view frame = frames_.lead_calm;
  if (sig_.emotion != Emotion::kNeutral) {
    frame = sig_.intensity < 0.4    ? frames_.lead_low
            : sig_.intensity < 0.75 ? frames_.lead_mid
                                    : frames_.lead_high;
  }
  return fill(frame, [this](std::string_view name) { return slotValue(name); });
}

std::string Composer::why(Strategy s) const {
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

std::string Composer::advice(Strategy s) const {
  const Phrase* p = pick(lang_.advice[idx(s)]);
  return p == nullptr ? std::string() : render(p->text);
}

std::string Composer::need() const {
  const Phrase* p = pick(lang_.needs);
  return p == nullptr ? std::string() : render(p->text);
}

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

}  // namespace eq::engine::builtin::detail
