// Composing replies: the phrases of the bank filled from the signals of a
// message ({echo}, {mood}, ...), scored and ranked per strategy, collected
// into distinct replies across the strategies a mode draws from, and the
// sentences that explain each reply (eq_analysis) and the analysis.
//
// Ownership and threads: analyze() and reply() build one Composer per request
// on the calling thread, over the engine's read-only tables and the
// request's Signals, which it references and must not outlive; it fills its
// candidate caches lazily (mutable) and is used by that thread only. Picker
// is a per-request value too.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "workers/engine/builtin/reading.h"
#include "workers/engine/builtin/strategy.h"
#include "workers/engine/builtin/tables.h"
#include "workers/engine/builtin/vocabulary.h"

namespace eq::engine::builtin::detail {

// Sentence frames the engine itself adds around the data phrases. They stay
// in code because they are tied to the logic that picks them (which reason,
// which intensity band); the data file holds everything else.
struct Frames {
  std::string_view lead_calm, lead_low, lead_mid, lead_high;
  std::string_view compare_top, compare_below, same_strategy, also_consider;
  std::string_view reason_emotion, reason_calm, reason_intensity, reason_stage, reason_scene,
      reason_addressed, reason_question, reason_invite, reason_news, reason_detail, reason_act;
};

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

// Capitalizes an English sentence: the first ASCII letter or digit of s, if
// it is a lower-case letter, becomes upper case.
void capitalizeFirst(std::string& s);

struct Candidate {
  Strategy strategy = Strategy::kEmpathize;
  double score = 0;
  std::string text;
  int line = 0;
  int situation = -1;  // the situation a written reply is for; -1 when composed
};

class Composer {
 public:
  Composer(const Data& tables, const Signals& sig);

  Act act() const { return sig_.act; }

  // Does the phrase fit the message's act? Lines written for small talk
  // answer a greeting ("在吗", "hey") only: small talk is also the act of any
  // message without a cue, which the emotion phrases serve.
  bool fitsAct(const Phrase& p) const;

  // The analysis' suggested_strategy when the bank has advice written for
  // the act (any strategy's list), else empty.
  std::string actAdvice() const;

  const std::array<Fit, kStrategyCount>& fits() const { return fits_; }
  const std::array<Strategy, kStrategyCount>& ranking() const { return ranking_; }

  std::string_view strategyName(Strategy s) const { return lang_.strategy_names[idx(s)]; }

  // The value of a {placeholder} (phrases and frames) for this message, or
  // nullopt for an unknown name.
  std::optional<std::string_view> slotValue(std::string_view name) const;

  // Whether the phrase can be filled for this message: {feel} and {topic}
  // need words to say back, {mood} a feeling other than neutral.
  bool fillable(const Phrase& p) const;

  // tpl with its placeholders filled, capitalized in English.
  std::string render(std::string_view tpl) const;

  // The best phrase of a list for this message: fitting the emotion (and the
  // stage, for needs), most specific first; among equals, one chosen by the
  // message hash so that different messages read differently.
  const Phrase* pick(const std::vector<Phrase>& list) const;

  // Every usable reply of a strategy, scored, best first. Score, in [0, 1]:
  //   0.60 x strategy fit (emotion, intensity, stage, scene, situation)
  //   0.15 if the reply echoes a term from the message
  //   0.10 x length fit (close to ~1.5x the message length, within bounds)
  //   0.15 x template specificity (Phrase::specificity: targeted emotions,
  //          required situation)
  // plus a jitter below 0.01 from the message hash that only breaks ties, so
  // equally good phrasings rotate between messages. Rounded to 3 decimals.
  const std::vector<Candidate>& candidates(Strategy s, bool loose = false) const;

  // The sentence naming which fit component made `better` beat `worse`.
  std::string reason(Strategy better, Strategy worse) const;

  // The opening of eq_analysis in standard and perfect mode: how strongly
  // the sender seems to feel.
  std::string lead() const;
  // Why a reply of strategy s suits the message (for eq_analysis).
  std::string why(Strategy s) const;
  // The analysis' suggested_strategy for strategy s, and its
  // underlying_need.
  std::string advice(Strategy s) const;
  std::string need() const;

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
                   Picker* picker);

// When a mode's own strategies run out of distinct phrasings, the count is
// still met: first from the remaining strategies that fit at all, then from
// any strategy, in ranking order.
void topUp(const Composer& composer, Picker* picker);

// The strategies a mode draws from, best fit first: those at or above
// kApplicableFit, at most `most`, and at least `least` (padding from the
// ranking while the fit is above zero).
std::vector<Strategy> strategiesFor(const Composer& composer, size_t least, size_t most);

}  // namespace eq::engine::builtin::detail
