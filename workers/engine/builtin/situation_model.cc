#include "workers/engine/builtin/situation_model.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "workers/engine/builtin/situations.h"
#include "workers/engine/builtin/text.h"

namespace eq::engine::builtin::detail {
namespace {

// A piece's key: the hash of its kind ('m' message, 'x' context, 's' scene,
// 'a' speech act) and its text, the parts of a pair of words separated by
// a space. 64 bits: two of a few hundred thousand pieces sharing one is
// about one chance in 10^9.
uint64_t keyOf(char kind, std::string_view text) {
  return fnv1a(text, fnv1a(std::string_view(&kind, 1)));
}
uint64_t keyOf(char kind, std::string_view a, std::string_view b) {
  return fnv1a(b, fnv1a(" ", keyOf(kind, a)));
}

// The byte offsets of text's code points, and text's size after them.
std::vector<size_t> codePointStarts(std::string_view text) {
  std::vector<size_t> out;
  size_t pos = 0;
  while (pos < text.size()) {
    out.push_back(pos);
    char32_t cp = 0;
    pos += decodeUtf8(text, pos, &cp);
  }
  out.push_back(text.size());
  return out;
}

// The words of English cue text (" a b ? "), without the spaces.
std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find(' ', pos);
    const size_t stop = end == std::string_view::npos ? text.size() : end;
    if (stop > pos) out.push_back(text.substr(pos, stop - pos));
    pos = stop + 1;
  }
  return out;
}

// Chinese: every run of one to `longest` code points, a lone space left out.
void addRuns(std::string_view text, char kind, size_t longest, double weight,
             std::vector<SituationModel::Piece>* out) {
  const std::vector<size_t> at = codePointStarts(text);
  const size_t n = at.size() - 1;
  for (size_t i = 0; i < n; ++i) {
    for (size_t len = 1; len <= longest && i + len <= n; ++len) {
      const std::string_view run = text.substr(at[i], at[i + len] - at[i]);
      if (run == " ") continue;
      out->push_back({keyOf(kind, run), weight, kind == 'm'});
    }
  }
}

}  // namespace

SituationModel::Pieces SituationModel::piecesOf(Lang lang, std::string_view message,
                                                std::string_view context, std::string_view scene,
                                                Act act) {
  Pieces out;
  if (lang == Lang::kZh) {
    addRuns(cueText(lang, message, true), 'm', 3, 1.0, &out);
    if (!context.empty()) addRuns(cueText(lang, context, true), 'x', 2, kContextWeight, &out);
  } else {
    // Words and pairs of adjacent words, the message's start and end
    // counted as words ("^ thanks", "you ?", "? $").
    const std::string text = cueText(lang, message, false);
    std::vector<std::string_view> w = words(text);
    w.insert(w.begin(), "^");
    w.push_back("$");
    for (size_t i = 0; i < w.size(); ++i) {
      const bool sentinel = i == 0 || i + 1 == w.size();
      out.push_back({keyOf('m', w[i]), 1.0, !sentinel});
      if (i + 1 < w.size()) out.push_back({keyOf('m', w[i], w[i + 1]), 1.0, true});
    }
    if (!context.empty()) {
      const std::string c = cueText(lang, context, false);
      for (std::string_view x : words(c)) out.push_back({keyOf('x', x), kContextWeight, false});
    }
  }
  out.push_back({keyOf('s', scene.empty() ? std::string_view("-") : scene), 1.0, false});
  out.push_back({keyOf('a', kActNames[idx(act)]), kActWeight, false});
  // Presence, not counts: a piece said twice counts once.
  std::sort(out.begin(), out.end(), [](const Piece& a, const Piece& b) { return a.key < b.key; });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const Piece& a, const Piece& b) { return a.key == b.key; }),
            out.end());
  return out;
}

void SituationModel::add(Lang lang, int situation, std::string_view message,
                         std::string_view context, std::string_view scene, Act act) {
  assert(situation >= 0);
  LangModel& m = lang_[idx(lang)];
  if (m.examples.size() <= static_cast<size_t>(situation)) {
    m.examples.resize(static_cast<size_t>(situation) + 1, 0);
  }
  ++m.examples[static_cast<size_t>(situation)];
  for (const Piece& piece : piecesOf(lang, message, context, scene, act)) {
    const auto [it, added] = m.ids.try_emplace(piece.key, static_cast<int32_t>(m.ids.size()));
    m.seen.push_back({it->second, situation});
  }
}

void SituationModel::finish(int situations) {
  for (LangModel& m : lang_) {
    if (m.seen.empty()) continue;
    assert(m.examples.size() <= static_cast<size_t>(situations));  // add() saw no larger index
    m.examples.resize(static_cast<size_t>(situations), 0);
    std::sort(m.seen.begin(), m.seen.end());
    std::vector<double> total(static_cast<size_t>(situations), 0);
    for (const auto& [piece, s] : m.seen) total[static_cast<size_t>(s)] += 1;
    const double vocabulary = static_cast<double>(m.ids.size());
    m.base.assign(static_cast<size_t>(situations), kUnseen);
    for (size_t s = 0; s < m.base.size(); ++s) {
      if (m.examples[s] == 0) continue;
      m.base[s] = std::log(kSmoothing / (total[s] + kSmoothing * vocabulary));
    }
    m.lift.assign(m.ids.size(), {});
    for (size_t i = 0; i < m.seen.size();) {
      size_t j = i;
      while (j < m.seen.size() && m.seen[j] == m.seen[i]) ++j;
      const auto [piece, s] = m.seen[i];
      const double n = static_cast<double>(j - i);
      m.lift[static_cast<size_t>(piece)].push_back(
          {s, static_cast<float>(std::log((n + kSmoothing) / kSmoothing))});
      i = j;
    }
    m.seen.clear();
    m.seen.shrink_to_fit();
  }
}

size_t SituationModel::examples(Lang lang, int situation) const {
  const LangModel& m = lang_[idx(lang)];
  return static_cast<size_t>(situation) < m.examples.size()
             ? m.examples[static_cast<size_t>(situation)]
             : 0;
}

std::vector<double> SituationModel::scores(Lang lang, std::string_view message,
                                           std::string_view context,
                                           std::string_view scene, Act act,
                                           int* evidence) const {
  const LangModel& m = lang_[idx(lang)];
  if (m.base.empty()) return {};
  std::vector<double> out(m.base.size(), 0);
  double known = 0;  // the total weight of the pieces the examples have
  int known_evidence = 0;
  for (const Piece& piece : piecesOf(lang, message, context, scene, act)) {
    const auto it = m.ids.find(piece.key);
    if (it == m.ids.end()) continue;
    known += piece.weight;
    known_evidence += piece.evidence ? 1 : 0;
    for (const auto& [s, lift] : m.lift[static_cast<size_t>(it->second)]) {
      out[static_cast<size_t>(s)] += piece.weight * lift;
    }
  }
  if (evidence != nullptr) *evidence = known_evidence;
  for (size_t s = 0; s < out.size(); ++s) {
    out[s] = m.base[s] == kUnseen ? kUnseen : out[s] + known * m.base[s];
  }
  return out;
}

}  // namespace eq::engine::builtin::detail
