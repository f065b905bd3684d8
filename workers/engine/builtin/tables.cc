// Parsing the engine's data files into its tables (tables.h).
#include "workers/engine/builtin/tables.h"

#include <charconv>
#include <optional>
#include <system_error>
#include <utility>

#include "workers/engine/builtin/text.h"

namespace eq::engine::builtin::detail {
namespace {

// Parsing helpers. The data files are line-oriented TSV; errors name the
// file and the 1-based line.

std::string_view trimBlank(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> splitOn(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    if (at == std::string_view::npos) {
      out.push_back(trimBlank(s.substr(start)));
      return out;
    }
    out.push_back(trimBlank(s.substr(start, at - start)));
    start = at + 1;
  }
}

Status lineError(std::string_view file, int line, std::string_view what) {
  std::string msg(file);
  msg += " line ";
  msg += std::to_string(line);
  msg += ": ";
  msg += what;
  return Status(500, std::move(msg));
}

// Calls f(lineNumber, fields) for every line that is not blank or a comment;
// stops at the first error f returns.
template <typename F>
Status forEachRecord(std::string_view text, F f) {
  int lineNo = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    ++lineNo;
    const std::string_view line = trimBlank(text.substr(start, end - start));
    start = end + 1;
    if (line.empty() || line.front() == '#') continue;
    Status st = f(lineNo, splitOn(line, '\t'));
    if (!st.isOk()) return st;
  }
  return Status::ok();
}

std::optional<double> parseNumber(std::string_view s) {
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string quoted(std::string_view s) {
  std::string out = "'";
  out += s;
  out += "'";
  return out;
}

}  // namespace

Status parseLexicon(std::string_view text, Data* tables) {
  constexpr std::string_view kFile = "lexicon.tsv";
  size_t emotionTerms = 0;
  Status st = forEachRecord(text, [&](int line, const std::vector<std::string_view>& f) {
    if (f.size() < 2) return lineError(kFile, line, "expected term<TAB>kind[<TAB>value...]");
    if (f[0].empty()) return lineError(kFile, line, "empty term");
    const int kind = indexOf(kTermKindNames, f[1]);
    if (kind < 0) {
      return lineError(kFile, line,
                       "unknown kind " + quoted(f[1]) +
                           " (emotion, degree, postdegree, negation, contrast, skip, stage)");
    }
    const std::string key = normalize(f[0]).text;
    if (f[1] == "stage") {
      if (f.size() != 3) return lineError(kFile, line, "stage needs term<TAB>stage<TAB>name");
      int stage = indexOf(kStageNames, f[2]);
      if (f[2] == "none") stage = static_cast<int>(kStageCount);
      if (stage < 0 || stage == static_cast<int>(Stage::kUnknown)) {
        return lineError(kFile, line, "unknown relationship stage " + quoted(f[2]));
      }
      if (!tables->stages.insert(key, stage)) {
        return lineError(kFile, line, "duplicate stage term " + quoted(f[0]));
      }
      return Status::ok();
    }
    Term term;
    term.kind = static_cast<TermKind>(kind);
    switch (term.kind) {
      case TermKind::kEmotion: {
        if (f.size() != 4 && f.size() != 5) {
          return lineError(kFile, line,
                           "emotion needs term<TAB>emotion<TAB>category<TAB>intensity[<TAB>tags]");
        }
        if (f.size() == 5) {
          for (std::string_view tag : splitOn(f[4], ',')) {
            const int t = indexOf(kTermTagNames, tag);
            if (t < 0) {
              return lineError(
                  kFile, line,
                  "unknown tag " + quoted(tag) +
                      " (news, not_joy, not_affection, rhetorical, backoff, mirative)");
            }
            term.tags |= static_cast<uint8_t>(1u << t);
          }
        }
        const int emotion = indexOf(kEmotionNames, f[2]);
        if (emotion < 0 || emotion == static_cast<int>(Emotion::kNeutral)) {
          return lineError(kFile, line, "unknown emotion category " + quoted(f[2]));
        }
        const std::optional<double> level = parseNumber(f[3]);
        if (!level || (*level != 1 && *level != 3 && *level != 5 && *level != 7 && *level != 9)) {
          return lineError(kFile, line,
                           "emotion intensity must be 1, 3, 5, 7 or 9, got " + quoted(f[3]));
        }
        if ((term.tags & kTagBackoff) != 0) {
          char32_t cp = 0;
          const std::string k = normalize(f[0]).text;
          if (decodeUtf8(k, 0, &cp) != k.size() || !isCjkIdeograph(cp)) {
            return lineError(kFile, line,
                             "a backoff term is one Chinese character, got " + quoted(f[0]));
          }
        }
        term.emotion = static_cast<Emotion>(emotion);
        // Levels 1..9 map to strengths 0.2..1.0: even the mildest term counts.
        term.value = (*level + 1.0) / 10.0;
        ++emotionTerms;
        break;
      }
      case TermKind::kDegree:
      case TermKind::kPostDegree: {
        if (f.size() != 3)
          return lineError(kFile, line, "degree needs term<TAB>kind<TAB>multiplier");
        const std::optional<double> m = parseNumber(f[2]);
        if (!m || *m <= 0.0 || *m > 5.0) {
          return lineError(kFile, line,
                           "multiplier must be a number in (0, 5], got " + quoted(f[2]));
        }
        term.value = *m;
        break;
      }
      case TermKind::kNegation:
      case TermKind::kContrast:
      case TermKind::kSkip:
        if (f.size() != 2) {
          return lineError(kFile, line, std::string(f[1]) + " takes no value (term<TAB>kind)");
        }
        break;
    }
    if (!tables->terms.insert(key, static_cast<int32_t>(tables->term_info.size()))) {
      return lineError(kFile, line, "duplicate term " + quoted(f[0]));
    }
    tables->term_info.push_back(term);
    return Status::ok();
  });
  if (!st.isOk()) return st;
  if (emotionTerms == 0) return Status(500, "lexicon.tsv: no emotion terms");
  return Status::ok();
}

namespace {

enum class PhraseKind : uint8_t { kReply, kWhy, kAdvice, kNeed, kName };
constexpr std::array<std::string_view, 5> kPhraseKindNames = {"reply", "why", "advice", "need",
                                                              "name"};

// Parses the emotions field: "*" or a comma list of emotion names and
// conditions ("addressed", "!question"). Without any emotion name the phrase
// fits every emotion.
bool parseEmotionField(std::string_view field, Phrase* p, std::string* bad) {
  uint32_t emotions = 0;
  for (std::string_view item : splitOn(field, ',')) {
    if (item == "*") {
      emotions = kAllEmotions;
      continue;
    }
    if (!item.empty() && item.front() == '@') {
      const int act = indexOf(kActNames, item.substr(1));
      if (act < 0) {
        *bad = std::string(item);
        return false;
      }
      p->acts = static_cast<uint16_t>(p->acts | (1u << act));
      continue;
    }
    const bool negated = !item.empty() && item.front() == '!';
    const int cond = indexOf(kConditionNames, negated ? item.substr(1) : item);
    if (cond >= 0) {
      (negated ? p->forbid : p->require) |= static_cast<uint8_t>(1u << cond);
      continue;
    }
    const int e = indexOf(kEmotionNames, item);
    if (e < 0) {
      *bad = std::string(item);
      return false;
    }
    emotions |= 1u << e;
  }
  p->emotions = emotions == 0 ? kAllEmotions : emotions;
  return true;
}

// Parses a comma list of names (or "*") into a bit mask.
template <size_t N>
std::optional<uint32_t> parseMask(const std::array<std::string_view, N>& names,
                                  std::string_view list, std::string* bad) {
  if (list == "*") return (1u << N) - 1;
  uint32_t mask = 0;
  for (std::string_view item : splitOn(list, ',')) {
    const int i = indexOf(names, item);
    if (i < 0) {
      *bad = std::string(item);
      return std::nullopt;
    }
    mask |= 1u << i;
  }
  return mask;
}

// Checks the {placeholders} of a phrase and returns the slots it uses.
std::optional<uint8_t> parseSlots(std::string_view text, std::string* bad) {
  uint8_t slots = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t open = text.find_first_of("{}", pos);
    if (open == std::string_view::npos) break;
    if (text[open] == '}') {
      *bad = "unbalanced '}'";
      return std::nullopt;
    }
    const size_t close = text.find('}', open);
    if (close == std::string_view::npos) {
      *bad = "unbalanced '{'";
      return std::nullopt;
    }
    const std::string_view name = text.substr(open + 1, close - open - 1);
    const int slot = indexOf(kSlotNames, name);
    if (slot < 0) {
      *bad = "unknown placeholder {" + std::string(name) + "}";
      return std::nullopt;
    }
    slots |= static_cast<uint8_t>(1u << slot);
    pos = close + 1;
  }
  return slots;
}

}  // namespace

Status parsePhrases(std::string_view text, Data* tables) {
  constexpr std::string_view kFile = "phrases.tsv";
  Status st = forEachRecord(text, [&](int line, const std::vector<std::string_view>& f) {
    if (f.size() != 5) {
      return lineError(kFile, line,
                       "expected 5 fields kind<TAB>lang<TAB>key<TAB>emotions<TAB>text, got " +
                           std::to_string(f.size()));
    }
    const int kind = indexOf(kPhraseKindNames, f[0]);
    if (kind < 0) return lineError(kFile, line, "unknown kind " + quoted(f[0]));
    const int lang = indexOf(kLangNames, f[1]);
    if (lang < 0) return lineError(kFile, line, "unknown language " + quoted(f[1]) + " (zh, en)");
    if (f[4].empty()) return lineError(kFile, line, "empty text");
    LangTables& lt = tables->lang[static_cast<size_t>(lang)];

    if (static_cast<PhraseKind>(kind) == PhraseKind::kName) {
      const size_t dot = f[2].find('.');
      const std::string_view group = f[2].substr(0, dot);
      const std::string_view name = dot == std::string_view::npos ? "" : f[2].substr(dot + 1);
      std::string* slot = nullptr;
      if (group == "strategy" && indexOf(kStrategyNames, name) >= 0) {
        slot = &lt.strategy_names[static_cast<size_t>(indexOf(kStrategyNames, name))];
      } else if (group == "stage" && indexOf(kStageNames, name) >= 0) {
        slot = &lt.stage_names[static_cast<size_t>(indexOf(kStageNames, name))];
      } else if (group == "scene" && !name.empty() && indexOf(kSceneNames, name) > 0) {
        slot = &lt.scene_names[static_cast<size_t>(indexOf(kSceneNames, name))];
      } else if (group == "emotion" && indexOf(kEmotionNames, name) >= 0) {
        slot = &lt.emotion_names[static_cast<size_t>(indexOf(kEmotionNames, name))];
      }
      if (slot == nullptr) {
        return lineError(
            kFile, line,
            "unknown name key " + quoted(f[2]) + " (strategy.X, stage.X, scene.X or emotion.X)");
      }
      if (!slot->empty()) return lineError(kFile, line, "duplicate name " + quoted(f[2]));
      *slot = std::string(f[4]);
      return Status::ok();
    }

    Phrase p;
    p.line = line;
    p.text = std::string(f[4]);
    std::string bad;
    if (!parseEmotionField(f[3], &p, &bad)) {
      return lineError(kFile, line, "unknown emotion or condition " + quoted(bad));
    }
    const std::optional<uint8_t> slots = parseSlots(p.text, &bad);
    if (!slots) return lineError(kFile, line, bad);
    p.slots = *slots;

    if (static_cast<PhraseKind>(kind) == PhraseKind::kNeed) {
      const std::optional<uint32_t> stages = parseMask(kStageNames, f[2], &bad);
      if (!stages) return lineError(kFile, line, "unknown relationship stage " + quoted(bad));
      p.stages = *stages;
      lt.needs.push_back(std::move(p));
      return Status::ok();
    }
    const int strategy = indexOf(kStrategyNames, f[2]);
    if (strategy < 0) return lineError(kFile, line, "unknown strategy " + quoted(f[2]));
    const auto s = static_cast<size_t>(strategy);
    switch (static_cast<PhraseKind>(kind)) {
      case PhraseKind::kReply:
        for (const auto& list : lt.replies) {
          for (const Phrase& other : list) {
            if (other.text == p.text) {
              return lineError(
                  kFile, line,
                  "duplicate reply (same text on line " + std::to_string(other.line) + ")");
            }
          }
        }
        lt.replies[s].push_back(std::move(p));
        break;
      case PhraseKind::kWhy:
        lt.whys[s].push_back(std::move(p));
        break;
      case PhraseKind::kAdvice:
        lt.advice[s].push_back(std::move(p));
        break;
      case PhraseKind::kNeed:
      case PhraseKind::kName:
        break;  // handled above
    }
    return Status::ok();
  });
  if (!st.isOk()) return st;

  // Every message must find something to say in either language. A phrase
  // that needs only {echo} and {stage} can always be filled, so each list
  // needs one such phrase that fits every emotion.
  auto hasFallback = [](const std::vector<Phrase>& list, bool needAnyStage) {
    for (const Phrase& p : list) {
      if (p.anyEmotion() && p.unconditional() && !p.forAct() && (!needAnyStage || p.anyStage()) &&
          (p.slots & ~(kSlotEcho | kSlotStage | kSlotSaid)) == 0) {
        return true;
      }
    }
    return false;
  };
  for (size_t l = 0; l < kLangCount; ++l) {
    const LangTables& lt = tables->lang[l];
    const std::string lang(kLangNames[l]);
    auto missing = [&](std::string_view what) {
      return Status(500, "phrases.tsv: missing " + std::string(what) + " for " + lang);
    };
    for (size_t s = 0; s < kStrategyCount; ++s) {
      const std::string name(kStrategyNames[s]);
      if (lt.strategy_names[s].empty()) return missing("name strategy." + name);
      if (!hasFallback(lt.replies[s], false)) {
        return missing("a reply for every emotion with only {echo} (strategy " + name + ")");
      }
      if (!hasFallback(lt.whys[s], false)) return missing("a fallback why (strategy " + name + ")");
      if (!hasFallback(lt.advice[s], false)) {
        return missing("a fallback advice (strategy " + name + ")");
      }
    }
    for (size_t s = 0; s < kStageCount; ++s) {
      if (lt.stage_names[s].empty()) return missing("name stage." + std::string(kStageNames[s]));
    }
    for (size_t s = 1; s < kSceneCount; ++s) {
      if (lt.scene_names[s].empty()) return missing("name scene." + std::string(kSceneNames[s]));
    }
    for (size_t e = 0; e < kEmotionCount; ++e) {
      if (lt.emotion_names[e].empty()) {
        return missing("name emotion." + std::string(kEmotionNames[e]));
      }
    }
    if (!hasFallback(lt.needs, true)) return missing("a need line for * stages and * emotions");
  }
  return Status::ok();
}

std::u32string exampleText(std::string_view normalized) {
  std::u32string out;
  out.reserve(normalized.size());
  for (size_t pos = 0; pos < normalized.size();) {
    char32_t cp = 0;
    pos += decodeUtf8(normalized, pos, &cp);
    if (!isSpace(cp)) out.push_back(cp);
  }
  return out;
}

Status parseExamples(std::string_view text, Data* tables) {
  constexpr std::string_view kFile = "examples.tsv";
  std::array<size_t, kEmotionCount> per{};
  Status st = forEachRecord(text, [&](int line, const std::vector<std::string_view>& f) {
    if (f.size() != 2) return lineError(kFile, line, "expected 2 TAB-separated fields");
    const int e = indexOf(kEmotionNames, f[0]);
    if (e < 0) return lineError(kFile, line, "unknown emotion " + quoted(f[0]));
    if (trimBlank(f[1]).empty()) return lineError(kFile, line, "empty example");
    if (sanitizeUtf8(f[1])) return lineError(kFile, line, "not UTF-8");
    tables->examples.add(static_cast<size_t>(e), exampleText(normalize(f[1]).text));
    ++per[static_cast<size_t>(e)];
    return Status::ok();
  });
  if (!st.isOk()) return st;
  for (size_t e = 0; e < kEmotionCount; ++e) {
    if (per[e] == 0) {
      return Status(500, "examples.tsv: no example for " + std::string(kEmotionNames[e]));
    }
  }
  tables->examples.finish();
  return Status::ok();
}

}  // namespace eq::engine::builtin::detail
