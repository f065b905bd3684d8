// Reading a message by example: what the team's example posts
// (data/examples.tsv) say about the feeling of a message that the lexicon
// reads weakly or not at all.
//
// The lexicon knows the words that name a feeling. Many messages name none
// and carry their feeling in what happened ("下班前五分钟又被拉去开会", "外婆
// 的老房子下个月就要拆了"): such a message fell to neutral, or to the one weak
// word it happened to contain. The team wrote example posts for every emotion
// (and neutral chat lines) about everyday situations; this reader counts, for
// each emotion, in how many of its examples each character and each pair of
// adjacent characters occurs, and reads a message as a naive Bayes classifier
// over those counts (add-half smoothing, equal priors): the probability of
// each emotion given the characters and character pairs of the message.
// Nothing here is learned from evaluation data; the counts are the examples'.
//
// Ownership and threads: the engine builds one reader at create() (add()
// for every example, then finish()), owns it inside its read-only tables and
// only calls read() afterwards, which is const and safe on any number of
// threads. It holds no thread, file or socket.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace eq::engine::builtin {

class ExampleReader {
 public:
  // The engine's emotions, neutral included, in its own order.
  static constexpr size_t kClasses = 8;
  using Posterior = std::array<double, kClasses>;

  // Building: one call per example, `label` < kClasses, `text` the example
  // as the engine normalizes messages, as code points without white space.
  void add(size_t label, std::u32string_view text);
  // Turns the counts into log-probabilities; add() may not be called after.
  void finish();

  // P(emotion | text) for the code points of a normalized message (white
  // space removed), or nullopt when none of its characters or pairs occurs in
  // any example (nothing to go on) or before finish().
  std::optional<Posterior> read(std::u32string_view text) const;

  size_t examples() const { return examples_; }
  // Distinct characters and pairs seen in the examples.
  size_t grams() const { return keys_.size(); }

 private:
  // A character is keyed by its code point (< 2^21); a pair by the first
  // code point plus one, shifted, and the second, so the two never collide.
  static uint64_t unigram(char32_t a) { return a; }
  static uint64_t bigram(char32_t a, char32_t b) {
    return ((static_cast<uint64_t>(a) + 1) << 21) | b;
  }
  template <typename F>
  static void forEachGram(std::u32string_view text, F f);

  // While building: per gram, in how many examples of each class it occurs.
  std::unordered_map<uint64_t, std::array<uint32_t, kClasses>> counts_;
  std::array<uint32_t, kClasses> per_class_{};
  size_t examples_ = 0;

  // After finish(): sorted keys and, per key, log P(gram | class).
  std::vector<uint64_t> keys_;
  std::vector<std::array<float, kClasses>> log_p_;
  bool finished_ = false;
};

}  // namespace eq::engine::builtin
