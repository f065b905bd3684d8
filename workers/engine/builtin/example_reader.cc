#include "workers/engine/builtin/example_reader.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>
#include <unordered_set>

namespace eq::engine::builtin {

namespace {

// Add-half smoothing: a gram an emotion's examples never contain still has a
// small probability for it, so one unseen pair cannot veto a reading.
constexpr double kSmoothing = 0.5;

}  // namespace

template <typename F>
void ExampleReader::forEachGram(std::u32string_view text, F f) {
  for (size_t i = 0; i < text.size(); ++i) {
    f(unigram(text[i]));
    if (i + 1 < text.size()) f(bigram(text[i], text[i + 1]));
  }
}

void ExampleReader::add(size_t label, std::u32string_view text) {
  assert(!finished_ && label < kClasses);
  // Each gram counts once per example however often it repeats there
  // ("哈哈哈哈" is one example of 哈 and of 哈哈), so a long or repetitive
  // example cannot outweigh the others.
  std::unordered_set<uint64_t> seen;
  forEachGram(text, [&](uint64_t g) {
    if (seen.insert(g).second) {
      ++counts_[g][label];
      ++per_class_[label];
    }
  });
  ++examples_;
}

void ExampleReader::finish() {
  assert(!finished_);
  keys_.reserve(counts_.size());
  for (const auto& [key, counts] : counts_) keys_.push_back(key);
  std::sort(keys_.begin(), keys_.end());
  const auto vocabulary = static_cast<double>(keys_.size());
  std::array<double, kClasses> denominator{};
  for (size_t c = 0; c < kClasses; ++c) {
    denominator[c] = static_cast<double>(per_class_[c]) + kSmoothing * vocabulary;
  }
  log_p_.resize(keys_.size());
  for (size_t i = 0; i < keys_.size(); ++i) {
    const std::array<uint32_t, kClasses>& counts = counts_.at(keys_[i]);
    for (size_t c = 0; c < kClasses; ++c) {
      log_p_[i][c] = static_cast<float>(std::log((counts[c] + kSmoothing) / denominator[c]));
    }
  }
  counts_.clear();
  counts_.rehash(0);
  finished_ = true;
}

std::optional<ExampleReader::Posterior> ExampleReader::read(std::u32string_view text) const {
  if (!finished_) return std::nullopt;
  // Equal priors: the examples are about as many per emotion, and a message
  // is not more likely to be sad because more sad examples were written.
  std::array<double, kClasses> log_score{};
  bool any = false;
  forEachGram(text, [&](uint64_t g) {
    const auto it = std::lower_bound(keys_.begin(), keys_.end(), g);
    if (it == keys_.end() || *it != g) return;  // seen in no example: says nothing
    const std::array<float, kClasses>& lp = log_p_[static_cast<size_t>(it - keys_.begin())];
    for (size_t c = 0; c < kClasses; ++c) log_score[c] += lp[c];
    any = true;
  });
  if (!any) return std::nullopt;
  const double top = *std::max_element(log_score.begin(), log_score.end());
  Posterior p{};
  double sum = 0;
  for (size_t c = 0; c < kClasses; ++c) {
    p[c] = std::exp(log_score[c] - top);
    sum += p[c];
  }
  for (double& v : p) v /= sum;
  return p;
}

}  // namespace eq::engine::builtin
