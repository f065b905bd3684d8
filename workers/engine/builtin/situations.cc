#include "workers/engine/builtin/situations.h"

#include <algorithm>
#include <charconv>
#include <unordered_map>
#include <vector>

#include "workers/engine/builtin/text.h"

namespace eq::engine::builtin::detail {
namespace {

// A gap cue's parts may stand this far apart: code points in Chinese, words
// in English ("猫…走了" matches "我家猫昨天早上走了").
constexpr size_t kMaxGapZh = 8;
constexpr size_t kMaxGapEn = 5;
// The single character that joins a gap cue's parts in the data file.
constexpr std::string_view kGapMark = "\xE2\x80\xA6";  // U+2026 …

bool isContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Appends one English word of text[a, b), its letter runs kept twice
// (stretch) or once.
void appendWord(std::string_view text, size_t a, size_t b, bool stretch, std::string* out) {
  size_t i = a;
  while (i < b) {
    const char c = detail::lowerAscii(text[i]);
    size_t run = 1;
    while (i + run < b && detail::lowerAscii(text[i + run]) == c) ++run;
    const bool letter = isAsciiAlpha(static_cast<unsigned char>(c));
    const size_t keep = (!letter || run < 3) ? run : (stretch ? 2 : 1);
    out->append(keep, c);
    i += run;
  }
}

std::string cueTextZh(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  bool space = false;
  while (pos < s.size()) {
    char32_t cp = 0;
    const size_t len = decodeUtf8(s, pos, &cp);
    if (isSpace(cp)) {
      space = true;
      pos += len;
      continue;
    }
    if (space && !out.empty()) out.push_back(' ');
    space = false;
    if (cp < 0x80) {
      out.push_back(detail::lowerAscii(static_cast<char>(cp)));
    } else if (cp >= 0xFF01 && cp <= 0xFF5E) {
      out.push_back(detail::lowerAscii(static_cast<char>(cp - 0xFEE0)));  // full-width ASCII
    } else if (cp == 0x2018 || cp == 0x2019) {
      out.push_back('\'');
    } else {
      out.append(s.substr(pos, len));
    }
    pos += len;
  }
  return out;
}

// Written Cantonese in the Mandarin a cue or an example would use, so that
// "阿妈入咗院" reads like "阿妈入了院" and "我钟意你" like "我喜欢你" (the
// writers of the examples and of the blind batches use both): the forms a
// Cantonese chat message is written in that Mandarin text does not use, or
// uses rarely; where one form begins another, the longer comes first (a
// form that could swallow the start of another, as "你系" would "系咪" in
// "你系咪", is left out).
// Characters also common in Mandarin words (系 in 关系, 食 in 食物, 晒 in
// 晒太阳) are folded only inside the phrases listed.
struct Fold {
  std::string_view from, to;
};
constexpr Fold kCantonese[] = {
    {"系咪", "是不是"}, {"係咪", "是不是"}, {"唔系", "不是"},   {"唔係", "不是"},
    {"真系", "真是"},   {"唔该", "谢谢"},   {"多谢晒", "谢谢"},
    {"钟意", "喜欢"},   {"鍾意", "喜欢"},   {"点解", "为什么"}, {"點解", "为什么"},
    {"乜嘢", "什么"},   {"咩事", "什么事"}, {"屋企", "家里"},   {"琴日", "昨天"},
    {"寻日", "昨天"},   {"听日", "明天"},   {"聽日", "明天"},   {"而家", "现在"},
    {"宜家", "现在"},   {"边个", "谁"},     {"边度", "哪里"},   {"点样", "怎么样"},
    {"拍拖", "谈恋爱"}, {"早唞", "晚安"},   {"搞掂", "搞定"},   {"唔使", "不用"},
    {"今次", "这次"},   {"攰", "累"},       {"唔", "不"},       {"咗", "了"},
    {"嘅", "的"},       {"冇", "没"},       {"佢", "他"},       {"嚟", "来"},
    {"啲", "些"},       {"哋", "们"},       {"喺", "在"},       {"揾", "找"},
    {"睇", "看"},       {"瞓", "睡"},       {"嘢", "东西"},     {"咁", "这么"},
    {"畀", "给"},       {"俾", "给"},       {"攞", "拿"},       {"仲", "还"},
    {"係", "是"},       {"啱", "对"},       {"嬲", "生气"},
};

std::string foldCantonese(std::string s) {
  // The forms by their first code point, in the table's order.
  static const std::unordered_map<char32_t, std::vector<const Fold*>> byLead = [] {
    std::unordered_map<char32_t, std::vector<const Fold*>> index;
    for (const Fold& f : kCantonese) {
      char32_t cp = 0;
      decodeUtf8(f.from, 0, &cp);
      index[cp].push_back(&f);
    }
    return index;
  }();
  std::string out;
  size_t copied = 0;  // s[0, copied) is in out already
  for (size_t pos = 0; pos < s.size();) {
    char32_t cp = 0;
    const size_t len = decodeUtf8(s, pos, &cp);
    const Fold* hit = nullptr;
    if (auto it = byLead.find(cp); it != byLead.end()) {
      for (const Fold* f : it->second) {
        if (s.compare(pos, f->from.size(), f->from) == 0) {
          hit = f;
          break;
        }
      }
    }
    if (hit == nullptr) {
      pos += len;
      continue;
    }
    out.append(s, copied, pos - copied);
    out.append(hit->to);
    pos += hit->from.size();
    copied = pos;
  }
  if (copied == 0) return s;  // nothing folded: most messages
  out.append(s, copied, std::string::npos);
  return out;
}

std::string cueTextEn(std::string_view s, bool stretch) {
  std::string out = " ";
  std::string folded = cueTextZh(s);  // lower case, full width and quotes folded
  const std::string_view t = folded;
  size_t pos = 0;
  while (pos < t.size()) {
    const auto b = static_cast<unsigned char>(t[pos]);
    if (isWordByte(b)) {
      size_t end = pos;
      while (end < t.size() && isWordByte(static_cast<unsigned char>(t[end]))) ++end;
      appendWord(t, pos, end, stretch, &out);
      out.push_back(' ');
      pos = end;
      continue;
    }
    if (b == '?' || b == '!') {  // kept as words: "you there ?" is a cue
      out.push_back(static_cast<char>(b));
      out.push_back(' ');
      ++pos;
      continue;
    }
    if (b < 0x80) {  // other punctuation and spaces separate words
      ++pos;
      continue;
    }
    // Any other character (an emoji, a CJK character) is a word of its own;
    // variation selectors and joiners are dropped so 😭 and 😭️ match alike.
    char32_t cp = 0;
    const size_t len = decodeUtf8(t, pos, &cp);
    if (cp != 0xFE0F && cp != 0x200D) {
      out.append(t.substr(pos, len));
      out.push_back(' ');
    }
    pos += len;
  }
  return out;
}

int parseInt(std::string_view s, int lo, int hi, bool* ok) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  *ok = ec == std::errc() && end == s.data() + s.size() && v >= lo && v <= hi;
  return v;
}

std::vector<std::string> splitBars(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    const size_t bar = s.find('|');
    std::string part = lowerAscii(s.substr(0, bar));
    if (!part.empty()) out.push_back(std::move(part));
    if (bar == std::string_view::npos) break;
    s.remove_prefix(bar + 1);
  }
  return out;
}

// The records of a data file: lines of five TAB-separated fields (the
// fifth is the rest of the line, TABs included), empty lines and # comments
// skipped. Errors name the file and the line.
class Records {
 public:
  Records(std::string_view text, std::string_view file) : text_(text), file_(file) {}

  // The next record into *f; false at the end, or at a line without five
  // fields (then failed() is its error).
  bool next(std::array<std::string_view, 5>* f) {
    while (!text_.empty()) {
      ++number_;
      const size_t nl = text_.find('\n');
      std::string_view line = text_.substr(0, nl);
      text_.remove_prefix(nl == std::string_view::npos ? text_.size() : nl + 1);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty() || line.front() == '#') continue;
      for (size_t n = 0; n < 5; ++n) {
        const size_t tab = n < 4 ? line.find('\t') : std::string_view::npos;
        (*f)[n] = line.substr(0, tab);
        if (tab == std::string_view::npos) {
          if (n == 4) return true;
          failed_ = bad("want five TAB-separated fields");
          return false;
        }
        line.remove_prefix(tab + 1);
      }
    }
    return false;
  }
  // An error about the current line.
  Status bad(const std::string& what) const {
    return Status(500, std::string(file_) + ":" + std::to_string(number_) + ": " + what);
  }
  const Status& failed() const { return failed_; }

 private:
  std::string_view text_;
  std::string_view file_;
  int number_ = 0;
  Status failed_ = Status::ok();
};

}  // namespace

std::string cueText(Lang lang, std::string_view text, bool stretch) {
  return lang == Lang::kZh ? foldCantonese(cueTextZh(text)) : cueTextEn(text, stretch);
}

int32_t Situations::CueSet::pattern(std::string_view text) {
  const auto id = static_cast<int32_t>(plain.size());
  if (trie.insert(text, id)) {
    plain.emplace_back();
    return id;
  }
  // Already a pattern: find its id (the trie answers the longest key, which
  // at position 0 of the key itself is the key).
  return trie.longest(text, 0, [&](size_t end) { return end == text.size(); }).second;
}

void Situations::CueSet::score(Lang lang, std::string_view text, std::vector<int>* scores) const {
  struct Match {
    int32_t pattern;
    uint32_t start, end;
  };
  std::vector<Match> matches;
  std::vector<bool> seen(plain.size(), false);
  for (size_t pos = 0; pos < text.size(); ++pos) {
    // English patterns start with the space before a word; Chinese ones at
    // any character.
    if (lang == Lang::kEn ? text[pos] != ' ' : isContinuationByte(text[pos])) continue;
    trie.forEachAt(text, pos, [&](size_t end, int32_t id) {
      matches.push_back({id, static_cast<uint32_t>(pos), static_cast<uint32_t>(end)});
      if (seen[static_cast<size_t>(id)]) return;
      seen[static_cast<size_t>(id)] = true;
      for (const CueRef& c : plain[static_cast<size_t>(id)]) {
        (*scores)[static_cast<size_t>(c.situation)] += c.weight;
      }
    });
  }
  if (gaps.empty()) return;
  // A gap cue's parts must be near: for each match of the first part, only
  // the next match of the second part after it can be (later ones are
  // further). Matches sorted by pattern and start, and the units before
  // each byte counted once (code points in Chinese, spaces between words in
  // English), make that a binary search, so that a message repeating a part
  // a thousand times costs no more than it should.
  std::sort(matches.begin(), matches.end(), [](const Match& a, const Match& b) {
    return a.pattern != b.pattern ? a.pattern < b.pattern : a.start < b.start;
  });
  std::vector<uint32_t> unitsBefore(text.size() + 1, 0);
  for (size_t i = 0; i < text.size(); ++i) {
    const bool unit = lang == Lang::kZh ? !isContinuationByte(text[i]) : text[i] == ' ';
    unitsBefore[i + 1] = unitsBefore[i] + (unit ? 1 : 0);
  }
  const auto ofPattern = [&](int32_t pattern) {
    return std::equal_range(matches.begin(), matches.end(), Match{pattern, 0, 0},
                            [](const Match& a, const Match& b) { return a.pattern < b.pattern; });
  };
  for (const GapCue& g : gaps) {
    if (!seen[static_cast<size_t>(g.first)] || !seen[static_cast<size_t>(g.second)]) continue;
    const auto [aFrom, aTo] = ofPattern(g.first);
    const auto [bFrom, bTo] = ofPattern(g.second);
    bool near = false;
    for (auto a = aFrom; a != aTo && !near; ++a) {
      // English: " a " and " b " share the space between adjacent words,
      // so the second may start one byte before the first ends.
      const uint32_t earliest = lang == Lang::kZh ? a->end : a->end - 1;
      const auto b = std::lower_bound(bFrom, bTo, earliest, [](const Match& m, uint32_t start) {
        return m.start < start;
      });
      if (b == bTo) break;  // no second part after this first part, nor after later ones
      if (lang == Lang::kZh) {
        near = unitsBefore[b->start] - unitsBefore[a->end] <= kMaxGapZh;
      } else {
        // The words between them are one more than the spaces.
        const size_t words =
            b->start < a->end ? 0 : unitsBefore[b->start] - unitsBefore[a->end] + 1;
        near = words <= kMaxGapEn;
      }
    }
    if (near) (*scores)[static_cast<size_t>(g.ref.situation)] += g.ref.weight;
  }
}

SituationReading Situations::read(Lang lang, std::string_view message, std::string_view context,
                                  std::string_view scene, Act act) const {
  const SituationReading cues = readCues(lang, message, context, scene, act);
  // Without examples (of the language, or of the situation the cues read)
  // the cues decide.
  if (cues.found() && model_.examples(lang, cues.situation) == 0) return cues;
  int evidence = 0;
  std::vector<double> likelihood = model_.scores(lang, message, context, scene, act, &evidence);
  if (likelihood.empty() || (!cues.found() && evidence < kMinEvidence)) return cues;
  if (cues.found()) likelihood[static_cast<size_t>(cues.situation)] += kCueBonus;
  const auto best = std::max_element(likelihood.begin(), likelihood.end());
  if (*best == SituationModel::kUnseen) return cues;
  const int s = static_cast<int>(best - likelihood.begin());
  SituationReading out{s, s == cues.situation ? cues.score : 0, cues.situation, {}};
  for (size_t i = 0; i < likelihood.size(); ++i) {
    if (static_cast<int>(i) != s && likelihood[i] >= *best - kNearMargin) {
      out.near.push_back({static_cast<int>(i), *best - likelihood[i]});
    }
  }
  std::stable_sort(out.near.begin(), out.near.end(),
                   [](const SituationReading::Near& a, const SituationReading::Near& b) {
                     return a.gap < b.gap;
                   });
  return out;
}

SituationReading Situations::readCues(Lang lang, std::string_view message,
                                      std::string_view context, std::string_view scene,
                                      Act act) const {
  const LangData& d = lang_[idx(lang)];
  std::vector<int> scores(ids_.size(), 0);
  if (lang == Lang::kZh) {
    d.message.score(lang, cueText(lang, message, true), &scores);
  } else {
    // Both spellings of stretched words ("soo", "so"); a cue found in
    // either counts once.
    std::vector<int> stretched(ids_.size(), 0), folded(ids_.size(), 0);
    d.message.score(lang, cueText(lang, message, true), &stretched);
    d.message.score(lang, cueText(lang, message, false), &folded);
    for (size_t s = 0; s < scores.size(); ++s) scores[s] = std::max(stretched[s], folded[s]);
  }
  if (!context.empty()) d.context.score(lang, cueText(lang, context, true), &scores);
  for (size_t s = 0; s < scores.size(); ++s) scores[s] += act_[s][idx(act)];
  const int sceneIndex = detail::indexOf(kSceneNames, scene);
  if (sceneIndex > 0) {
    for (size_t s = 0; s < scores.size(); ++s) {
      scores[s] += d.info[s].scene[static_cast<size_t>(sceneIndex)];
    }
  }
  // The strongest reading wins, with the map's precedence as a bonus: a
  // death outranks a greeting in the same message, a request a neutral share.
  SituationReading best;
  int bestKey = 0;
  for (size_t s = 0; s < scores.size(); ++s) {
    if (scores[s] < kMinScore) continue;
    const int key = scores[s] * 4 + (6 - tier_[s]) * 3;
    if (!best.found() || key > bestKey) {
      best = {static_cast<int>(s), scores[s], static_cast<int>(s), {}};
      bestKey = key;
    }
  }
  return best;
}

int Situations::indexOf(std::string_view id) const {
  for (size_t i = 0; i < ids_.size(); ++i) {
    if (ids_[i] == id) return static_cast<int>(i);
  }
  return -1;
}

bool Situations::breaksGuard(Lang lang, int situation, std::string_view text) const {
  const std::string lower = lowerAscii(text);
  for (const std::string& g : guard(lang, situation)) {
    if (lower.find(g) != std::string::npos) return true;
  }
  return false;
}

int Situations::add(std::string_view id) {
  const int have = indexOf(id);
  if (have >= 0) return have;
  ids_.emplace_back(id);
  tier_.push_back(0);
  act_.emplace_back();
  emotion_.emplace_back();
  for (LangData& d : lang_) d.info.emplace_back();
  return static_cast<int>(ids_.size()) - 1;
}

Status parseSituations(std::string_view text, Situations* out) {
  Records records(text, "situations.tsv");
  auto bad = [&](const std::string& what) { return records.bad(what); };
  std::array<std::string_view, 5> f;
  while (records.next(&f)) {
    const auto [kind, langName, id, key, body] = f;
    if (id.empty() || body.empty()) return bad("empty situation or text");
    const int s = out->add(id);
    bool ok = true;
    if (kind == "tier") {
      out->tier_[static_cast<size_t>(s)] = parseInt(key, 1, 6, &ok);
      if (!ok) return bad("a tier is 1 to 6");
      continue;
    }
    if (kind == "act") {
      const int weight = parseInt(key, -9, 9, &ok);
      const int a = detail::indexOf(kActNames, body);
      if (!ok || a < 0) return bad("want a weight and a speech act name");
      out->act_[static_cast<size_t>(s)][static_cast<size_t>(a)] += weight;
      continue;
    }
    if (kind == "emotion") {
      const int e = detail::indexOf(kEmotionNames, key);
      if (e < 0) return bad("unknown emotion '" + std::string(key) + "'");
      out->emotion_[static_cast<size_t>(s)] = static_cast<Emotion>(e);
      continue;
    }
    const int langIndex = detail::indexOf(kLangNames, langName);
    if (langIndex < 0) return bad("lang must be zh or en");
    const auto lang = static_cast<Lang>(langIndex);
    Situations::LangData& d = out->lang_[static_cast<size_t>(langIndex)];
    Situations::Info& info = d.info[static_cast<size_t>(s)];
    if (kind == "cue" || kind == "ctx") {
      const int weight = parseInt(key, -9, 9, &ok);
      if (!ok || weight == 0) return bad("a cue's weight is -9 to 9, not 0");
      Situations::CueSet& set = kind == "cue" ? d.message : d.context;
      const Situations::CueRef ref{s, weight};
      // English cues are words: " cue " (a trailing * makes the last word a
      // prefix: " congrat"). Chinese cues are plain substrings.
      auto patternOf = [&](std::string_view part) {
        const bool prefix = lang == Lang::kEn && part.size() > 1 && part.back() == '*';
        if (prefix) part.remove_suffix(1);
        std::string t = cueText(lang, part, true);
        if (prefix && !t.empty() && t.back() == ' ') t.pop_back();
        return t;
      };
      const size_t gap = body.find(kGapMark);
      if (gap == std::string_view::npos) {
        const std::string t = patternOf(body);
        if (t.empty() || t == " ") return bad("a cue with no text");
        set.plain[static_cast<size_t>(set.pattern(t))].push_back(ref);
      } else {
        const std::string a = patternOf(body.substr(0, gap));
        const std::string b = patternOf(body.substr(gap + kGapMark.size()));
        if (a.size() < 2 || b.size() < 2) return bad("a gap cue needs text on both sides");
        const int32_t first = set.pattern(a);
        const int32_t second = set.pattern(b);
        set.gaps.push_back({first, second, ref});
      }
    } else if (kind == "scene") {
      const int weight = parseInt(key, -9, 9, &ok);
      const int scene = detail::indexOf(kSceneNames, body);
      if (!ok || scene <= 0) return bad("want a weight and a scene name");
      info.scene[static_cast<size_t>(scene)] += weight;
    } else if (kind == "reply") {
      const int strategy = detail::indexOf(kStrategyNames, key);
      if (strategy < 0) return bad("unknown strategy '" + std::string(key) + "'");
      info.replies.push_back({static_cast<Strategy>(strategy), std::string(body)});
    } else if (kind == "why") {
      info.why = body;
    } else if (kind == "need") {
      info.need = body;
    } else if (kind == "advice") {
      info.advice = body;
    } else if (kind == "guard") {
      info.guard = splitBars(body);

    } else {
      return bad("unknown kind '" + std::string(kind) + "'");
    }
  }
  if (!records.failed().isOk()) return records.failed();
  // Every situation must be answerable in both languages, within its guard.
  for (size_t s = 0; s < out->ids_.size(); ++s) {
    const std::string& id = out->ids_[s];
    if (out->tier_[s] == 0) return Status(500, "situations.tsv: " + id + " has no tier");
    for (size_t l = 0; l < kLangCount; ++l) {
      const Situations::Info& info = out->lang_[l].info[s];
      const std::string where = "situations.tsv: " + id + " (" + std::string(kLangNames[l]) + ")";
      if (info.replies.size() < 5) return Status(500, where + " has fewer than five replies");
      if (info.why.empty() || info.need.empty() || info.advice.empty() || info.guard.empty()) {
        return Status(500, where + " needs a why, a need, an advice and a guard");
      }
      for (const SituationReply& r : info.replies) {
        if (out->breaksGuard(static_cast<Lang>(l), static_cast<int>(s), r.text)) {
          return Status(500, where + ": a reply breaks its own guard: " + r.text);
        }
      }
    }
  }
  for (size_t l = 0; l < kLangCount; ++l) {
    for (Situations::Info& info : out->lang_[l].info) {
      for (SituationReply& r : info.replies) {
        for (size_t other = 0; other < out->ids_.size(); ++other) {
          r.guardsBroken += out->breaksGuard(static_cast<Lang>(l), static_cast<int>(other), r.text);
        }
      }
    }
  }
  if (out->ids_.empty()) return Status(500, "situations.tsv: no situation");
  return Status::ok();
}

Status parseSituationExamples(std::string_view text, const ActOf& actOf, Situations* out) {
  Records records(text, "situation_examples.tsv");
  auto bad = [&](const std::string& what) { return records.bad(what); };
  std::array<std::string_view, 5> f;
  while (records.next(&f)) {
    auto [langName, id, scene, context, message] = f;
    const int lang = detail::indexOf(kLangNames, langName);
    if (lang < 0) return bad("lang must be zh or en");
    const int s = out->indexOf(id);
    if (s < 0) return bad("unknown situation '" + std::string(id) + "'");
    if (scene == "-") scene = {};
    if (!scene.empty() && detail::indexOf(kSceneNames, scene) <= 0) {
      return bad("unknown scene '" + std::string(scene) + "'");
    }
    if (context == "-") context = {};
    if (message.empty()) return bad("empty message");
    out->model_.add(static_cast<Lang>(lang), s, message, context, scene,
                    actOf(message, context, scene));
  }
  if (!records.failed().isOk()) return records.failed();
  out->model_.finish(static_cast<int>(out->ids_.size()));
  return Status::ok();
}

}  // namespace eq::engine::builtin::detail
