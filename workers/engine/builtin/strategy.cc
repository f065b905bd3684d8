// Strategy fit (strategy.h): the fit tables and how they combine.
#include "workers/engine/builtin/strategy.h"

#include <algorithm>
#include <cstddef>

namespace eq::engine::builtin::detail {
namespace {

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

}  // namespace

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

}  // namespace eq::engine::builtin::detail
