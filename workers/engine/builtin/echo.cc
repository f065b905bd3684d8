// Saying the message back (echo.h): trimming clauses to their content, noun
// chunks, the topic, turning the sender's words into the reader's, the
// fragment rule and the quoted fallback.
#include "workers/engine/builtin/echo.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

namespace eq::engine::builtin::detail {
namespace {

// Function characters and fillers that never make a good echo chunk on their
// own; used to trim the echoed clause and to cut over-long clauses.
// Question particles (吗, 么, 嘛) and 吧 stay: dropping them changes the
// meaning ("你爱我吗", "我们分手吧", "在干嘛").
constexpr std::array<std::string_view, 9> kZhEdgeParticles = {"啊", "呀", "呢", "哦", "噢",
                                                              "啦", "呗", "咯", "喔"};
constexpr std::array<std::string_view, 10> kZhLeadFillers = {"然后", "而且", "所以", "就是", "其实",
                                                             "反正", "因为", "那个", "话说", "嗯"};
constexpr std::array<std::string_view, 12> kEnLeadFillers = {
    "and", "so", "but", "because", "well", "um", "uh", "oh", "like", "just", "also", "anyway"};
constexpr std::string_view kZhChunkBreakers =
    "的了在和跟与把被给是我你他她它们吧呢吗啊就都也还又很太这那个要会说着过得地";
constexpr std::array<std::string_view, 40> kEnStopwords = {
    "i",   "me",   "my",   "you",  "your", "he",     "she",  "it",  "we",   "they",
    "the", "a",    "an",   "and",  "or",   "but",    "so",   "to",  "of",   "in",
    "on",  "at",   "for",  "with", "is",   "am",     "are",  "was", "were", "be",
    "i'm", "it's", "that", "this", "just", "really", "have", "has", "had",  "again"};

bool startsWithAt(std::string_view t, size_t pos, std::string_view word) {
  return t.substr(pos, word.size()) == word;
}

// Whether the text at pos continues the word before it ("后" in "分手后",
// "的" in "开心的事"), so a cut there would leave a fragment.
bool boundAfter(std::string_view t, size_t pos) {
  for (std::string_view m :
       {"后", "之后", "以后", "前", "时", "的", "了", "着", "过", "得", "地"}) {
    if (startsWithAt(t, pos, m)) return true;
  }
  return false;
}

// Cuts [s, e) of the normalized text down to its content: spaces, quotes,
// leading fillers, sentence-final particles and the feeling chain itself (so
// that "今天被老板骂了好生气" echoes "今天被老板骂了").
// The feeling chain is only cut off when at least minRemainder units are
// left: "最近心好累" stays whole instead of shrinking to "最近心".
std::pair<size_t, size_t> trimChunk(std::string_view t, size_t s, size_t e, size_t chainBegin,
                                    size_t chainEnd, size_t minRemainder) {
  bool changed = true;
  while (changed && s < e) {
    changed = false;
    char32_t cp = 0;
    const size_t len = decodeUtf8(t, s, &cp);
    if (isSpace(cp) || cp == '\'' || cp == '"') {
      s += len;
      changed = true;
      continue;
    }
    // The trailing side: walk back to the start of the last code point.
    size_t last = e - 1;
    while (last > s && (static_cast<unsigned char>(t[last]) & 0xC0) == 0x80) --last;
    char32_t lastCp = 0;
    decodeUtf8(t, last, &lastCp);
    if (isSpace(lastCp) || lastCp == '\'' || lastCp == '"') {
      e = last;
      changed = true;
      continue;
    }
    // ...unless what follows is bound to it: "分手后我每天都在想你" must not
    // shrink to "后我每天都在想你".
    if (s >= chainBegin && s < chainEnd && chainEnd < e &&
        countUnits(t, chainEnd, e) >= minRemainder && !boundAfter(t, chainEnd)) {
      s = chainEnd;
      changed = true;
      continue;
    }
    if (e > chainBegin && e <= chainEnd && chainBegin > s &&
        countUnits(t, s, chainBegin) >= minRemainder) {
      e = chainBegin;
      changed = true;
      continue;
    }
    for (std::string_view p : kZhEdgeParticles) {
      if (e - s > p.size() && t.substr(e - p.size(), p.size()) == p) {
        e -= p.size();
        changed = true;
        break;
      }
    }
    if (changed) continue;
    for (std::string_view p : kZhLeadFillers) {
      if (e - s > p.size() && startsWithAt(t, s, p)) {
        s += p.size();
        changed = true;
        break;
      }
    }
    if (changed) continue;
    for (std::string_view w : kEnLeadFillers) {
      if (e - s > w.size() + 1 && startsWithAt(t, s, w) && t[s + w.size()] == ' ') {
        s += w.size();
        changed = true;
        break;
      }
    }
  }
  return {s, e};
}

// For a clause too long to quote whole: the longest run of content characters
// (Chinese) or content words (English), the nearest thing to a noun phrase
// that a rule can find without a segmenter.
std::pair<size_t, size_t> nounChunk(std::string_view t, size_t s, size_t e, Lang lang) {
  std::pair<size_t, size_t> best{s, s};
  size_t bestUnits = 0;
  if (lang == Lang::kZh) {
    constexpr size_t kMaxChunk = 8;
    size_t runStart = s;
    size_t runUnits = 0;
    auto close = [&](size_t at) {
      if (runUnits >= 2 && runUnits <= kMaxChunk && runUnits > bestUnits) {
        best = {runStart, at};
        bestUnits = runUnits;
      }
    };
    for (size_t pos = s; pos < e;) {
      char32_t cp = 0;
      const size_t len = decodeUtf8(t, pos, &cp);
      const bool breaker = !isCjkIdeograph(cp) ||
                           kZhChunkBreakers.find(t.substr(pos, len)) != std::string_view::npos;
      if (breaker) {
        close(pos);
        runStart = pos + len;
        runUnits = 0;
      } else {
        ++runUnits;
      }
      pos += len;
    }
    close(e);
    return best;
  }
  constexpr size_t kMaxWords = 4;
  size_t runStart = s;
  size_t runWords = 0;
  size_t pos = s;
  while (pos < e) {
    if (!isWordByte(static_cast<unsigned char>(t[pos]))) {
      ++pos;
      continue;
    }
    size_t end = pos;
    while (end < e && isWordByte(static_cast<unsigned char>(t[end]))) ++end;
    const std::string_view word = t.substr(pos, end - pos);
    const bool stop =
        std::find(kEnStopwords.begin(), kEnStopwords.end(), word) != kEnStopwords.end();
    if (stop) {
      runWords = 0;
    } else {
      if (runWords == 0) runStart = pos;
      ++runWords;
      if (runWords <= kMaxWords && runWords > bestUnits) {
        best = {runStart, end};
        bestUnits = runWords;
      }
    }
    pos = end;
  }
  return best;
}

// The topic: the clause with the most content besides the feeling words (the
// echoed feeling counts for nothing, other emotion terms for half: "I got the
// job" beats "I'm so happy"), preferring a clause that carries the dominant
// feeling, what follows a contrast and, on ties, the later clause. A clause
// that is nothing but the feeling ("好想你啊") still qualifies, so a short
// message is quoted whole rather than reduced to a bare word. Returns a span
// of the normalized text, empty when no clause qualifies.
std::pair<size_t, size_t> pickTopic(std::string_view t, const Fold& fold, Emotion emotion,
                                    Lang lang, size_t chainBegin, size_t chainEnd) {
  const size_t limit = lang == Lang::kZh ? 16 : 10;
  const size_t minRemainder = lang == Lang::kZh ? 6 : 4;
  int bestClause = -1;
  double bestScore = 0;
  std::pair<size_t, size_t> best{0, 0};
  for (size_t c = 0; c < fold.clauses.size(); ++c) {
    const Clause& clause = fold.clauses[c];
    auto [s, e] = trimChunk(t, clause.begin, clause.end, chainBegin, chainEnd, minRemainder);
    if (s >= e) continue;
    const size_t units = countUnits(t, s, e);
    if (units < 2) continue;
    double feeling = 0;
    bool carriesFeeling = false;
    for (const EmotionHit& h : fold.found) {
      carriesFeeling = carriesFeeling || (h.clause == c && h.emotion == emotion);
      const size_t a = std::max(h.chain_begin, s);
      const size_t b = std::min(h.chain_end, e);
      if (a >= b) continue;
      const bool echoed = h.chain_begin == chainBegin && h.chain_end == chainEnd;
      feeling += static_cast<double>(countUnits(t, a, b)) * (echoed ? 1.0 : 0.5);
    }
    const double content = std::max(0.0, static_cast<double>(units) - feeling);
    const double score = std::min(content, static_cast<double>(limit)) +
                         (clause.after_contrast ? 3.0 : 0.0) + (carriesFeeling ? 2.0 : 0.0);
    if (bestClause < 0 || score >= bestScore) {
      bestClause = static_cast<int>(c);
      bestScore = score;
      best = {s, e};
    }
  }
  if (bestClause < 0) return {0, 0};
  if (countUnits(t, best.first, best.second) > limit) {
    best = nounChunk(t, best.first, best.second, lang);
  }
  return best;
}

// When nothing in the message is recognizable ("？？？", "ok", an emoji): the
// message itself, cut to a quotable length.
std::string fallbackEcho(std::string_view original, const Normalized& n, Lang lang) {
  const std::string_view t = n.text;
  const size_t cap = lang == Lang::kZh ? 12 : 8;
  auto [s, e] = trimChunk(t, 0, t.size(), std::string_view::npos, std::string_view::npos, 0);
  if (s >= e) {
    s = 0;
    e = t.size();
  }
  size_t units = 0;
  size_t cut = s;
  bool truncated = false;
  bool inWord = false;
  while (cut < e) {
    char32_t cp = 0;
    const size_t len = decodeUtf8(t, cut, &cp);
    const bool word = cp < 0x80 && isWordByte(static_cast<unsigned char>(cp));
    if (!(word && inWord) && !isSpace(cp)) {
      if (units == cap) {
        truncated = true;
        break;
      }
      ++units;
    }
    inWord = word;
    cut += len;
  }
  std::string echo = cutOriginal(original, n, s, cut);
  while (!echo.empty() && echo.back() == ' ') echo.pop_back();
  if (truncated) echo += "…";
  return echo;
}

// A yes/no question said back inside a sentence takes the A-not-A form
// ("我今晚有空吗" -> "我今晚有没有空", so "你问我今晚有没有空"), built on the
// first modal or verb that has one; without such a verb the 吗 stays.
std::string embedQuestion(std::string s) {
  constexpr std::string_view kMa = "吗";
  if (s.size() <= kMa.size() || s.compare(s.size() - kMa.size(), kMa.size(), kMa) != 0) return s;
  const std::string body = s.substr(0, s.size() - kMa.size());
  struct Form {
    std::string_view verb;
    std::string_view asked;
  };
  static constexpr std::array<Form, 14> kForms = {{{"喜欢", "喜不喜欢"},
                                                   {"可以", "可不可以"},
                                                   {"愿意", "愿不愿意"},
                                                   {"知道", "知不知道"},
                                                   {"有", "有没有"},
                                                   {"是", "是不是"},
                                                   {"会", "会不会"},
                                                   {"能", "能不能"},
                                                   {"要", "要不要"},
                                                   {"想", "想不想"},
                                                   {"爱", "爱不爱"},
                                                   {"在", "在不在"},
                                                   {"去", "去不去"},
                                                   {"来", "来不来"}}};
  size_t bestPos = std::string::npos;
  const Form* best = nullptr;
  for (const Form& f : kForms) {
    const size_t at = body.find(f.verb);
    if (at != std::string::npos && (best == nullptr || at < bestPos)) {
      bestPos = at;
      best = &f;
    }
  }
  if (best == nullptr) return s;
  return body.substr(0, bestPos) + std::string(best->asked) +
         body.substr(bestPos + best->verb.size());
}

// Whether a clause said back by speakBack is a yes/no question: it ended in
// 吗, or it asks in the A-not-A form ("你是不是生气了").
bool askedForm(std::string_view said, std::string_view back) {
  // Only 吗: a final 么 is as often the end of 什么 or 怎么 ("你居然记得我喜欢吃什么").
  constexpr std::string_view kMa = "吗";
  if (said.size() > kMa.size() && said.substr(said.size() - kMa.size()) == kMa) return true;
  for (std::string_view form :
       {"是不是", "有没有", "会不会", "能不能", "要不要", "想不想", "爱不爱", "可不可以", "在不在",
        "去不去", "来不来", "喜不喜欢", "愿不愿意", "知不知道"}) {
    if (back.find(form) != std::string_view::npos) return true;
  }
  return false;
}

// Whether the span [s, e) holds nothing besides the feeling chain
// [chainBegin, chainEnd) but particles and pronouns after it ("笑死我了", "爱死
// 你了").
bool interjectionOnly(std::string_view t, size_t s, size_t e, size_t chainBegin, size_t chainEnd) {
  constexpr std::string_view kLight = "我你了啊呀啦吧呢哦的哈";
  for (size_t pos = s; pos < e;) {
    char32_t cp = 0;
    const size_t len = decodeUtf8(t, pos, &cp);
    // A subject before the feeling makes a statement to say back ("我升职了",
    // "我不是不喜欢你"), not an exclamation.
    if (pos < chainBegin && (t.substr(pos, len) == "我" || t.substr(pos, len) == "你")) {
      return false;
    }
    const bool inChain = pos >= chainBegin && pos < chainEnd;
    const bool light = isSpace(cp) || isClauseBreak(cp) || cp == '!' ||
                       kLight.find(t.substr(pos, len)) != std::string_view::npos;
    if (!inChain && !light) return false;
    pos += len;
  }
  return true;
}

// Words after which "you" is an object ("I miss you", "with you"): common
// prepositions and verbs, and any past tense in -ed ("texted you").
bool takesObject(std::string_view w) {
  static constexpr std::array<std::string_view, 44> kWords = {
      "to",   "for",  "with", "at",   "about", "from", "of",    "like",   "love",
      "miss", "hate", "tell", "told", "call",  "see",  "saw",   "meet",   "met",
      "ask",  "help", "need", "want", "give",  "gave", "thank", "trust",  "know",
      "knew", "hear", "text", "hug",  "kiss",  "than", "on",    "in",     "without",
      "by",   "let",  "make", "made", "get",   "got",  "blame", "believe"};
  if (std::find(kWords.begin(), kWords.end(), w) != kWords.end()) return true;
  return w.size() > 3 && w.substr(w.size() - 2) == "ed";
}

// Turns the sender's words into the reader's: a reply says "你升职了", not
// "「我升职了」". In Chinese, 我 and 你 (您) swap and 你们 becomes 我们; a
// question adverb right after the opening pronoun is dropped ("你怎么又迟到了"
// -> "我又迟到了") and so are sentence-final particles other than the
// question's own (吗, 嘛 stay: "你问我爱你吗"), so that the clause can sit
// inside a reply's own sentence. In English, first and second person swap
// ("I got the job" -> "you got the job"; "you" is "I" at the start of a clause
// and "me" elsewhere) and the verb "am/are/was/were" follows its new subject.
// Returns the text unchanged when it holds nothing to turn.
std::string speakBack(std::string_view s, Lang lang) {
  std::string out;
  out.reserve(s.size() + 8);
  if (lang == Lang::kZh) {
    bool openedWithPronoun = false;
    for (size_t pos = 0; pos < s.size();) {
      const bool first = pos == 0;
      if (startsWithAt(s, pos, "我们") || startsWithAt(s, pos, "咱们")) {
        out += s.substr(pos, 6);
        pos += 6;
      } else if (startsWithAt(s, pos, "你们")) {
        out += "我们";
        pos += 6;
      } else if (startsWithAt(s, pos, "我")) {
        out += "你";
        pos += 3;
        openedWithPronoun = openedWithPronoun || first;
      } else if (startsWithAt(s, pos, "你") || startsWithAt(s, pos, "您")) {
        out += "我";
        pos += 3;
        openedWithPronoun = openedWithPronoun || first;
      } else {
        char32_t cp = 0;
        const size_t len = decodeUtf8(s, pos, &cp);
        out += s.substr(pos, len);
        pos += len;
      }
      if (openedWithPronoun && out.size() == 3 && pos < s.size()) {
        for (std::string_view q : {"怎么", "为什么", "为啥", "干嘛", "凭什么"}) {
          if (startsWithAt(s, pos, q) && s.size() > pos + q.size()) {
            pos += q.size();
            break;
          }
        }
      }
    }
    bool trimmed = true;
    while (trimmed) {
      trimmed = false;
      for (std::string_view p : {"吧", "呢", "啊", "呀", "啦", "哦", "哈", "呗"}) {
        if (out.size() > p.size() + 3 && out.compare(out.size() - p.size(), p.size(), p) == 0) {
          out.resize(out.size() - p.size());
          trimmed = true;
        }
      }
    }
    return embedQuestion(out);
  }
  // English: word by word, keeping everything between words as written. A
  // proposal's opener goes first ("let's grab dinner" -> "grab dinner"), so
  // that the rest reads as the plan itself ("Grab dinner? I'd love to!").
  for (std::string_view opener : {"let's ", "lets ", "wanna ", "shall we ", "how about "}) {
    if (s.size() > opener.size() + 2 && lowerAscii(s.substr(0, opener.size())) == opener) {
      s.remove_prefix(opener.size());
      break;
    }
  }
  bool clauseStart = true;
  bool subjectI = false;    // the previous word became "I"
  bool subjectYou = false;  // the previous word became "you" as a subject
  std::string prevLower;
  for (size_t pos = 0; pos < s.size();) {
    if (!isWordByte(static_cast<unsigned char>(s[pos]))) {
      if (s[pos] == ',' || s[pos] == ';') clauseStart = true;
      out += s[pos++];
      continue;
    }
    size_t end = pos;
    while (end < s.size() && isWordByte(static_cast<unsigned char>(s[end]))) ++end;
    const std::string_view word = s.substr(pos, end - pos);
    const std::string lower = lowerAscii(word);
    std::string repl;
    bool nowI = false;
    bool nowYou = false;
    if (lower == "i") {
      repl = "you";
      nowYou = true;
    } else if (lower == "me") {
      repl = "you";
    } else if (lower == "my") {
      repl = "your";
    } else if (lower == "mine") {
      repl = "yours";
    } else if (lower == "myself") {
      repl = "yourself";
    } else if (lower == "i'm") {
      repl = "you're";
    } else if (lower == "i've") {
      repl = "you've";
    } else if (lower == "i'll") {
      repl = "you'll";
    } else if (lower == "i'd") {
      repl = "you'd";
    } else if (lower == "you") {
      // Object after a verb or preposition ("told you", "with you"), else
      // subject ("you sent", "that meme you sent").
      const bool object = !clauseStart && takesObject(prevLower);
      repl = object ? "me" : "I";
      nowI = !object;
    } else if (lower == "your") {
      repl = "my";
    } else if (lower == "yours") {
      repl = "mine";
    } else if (lower == "yourself") {
      repl = "myself";
    } else if (lower == "you're") {
      repl = "I'm";
    } else if (lower == "you've") {
      repl = "I've";
    } else if (lower == "you'll") {
      repl = "I'll";
    } else if (lower == "you'd") {
      repl = "I'd";
    } else if (subjectYou && lower == "am") {
      repl = "are";
    } else if (subjectYou && lower == "was") {
      repl = "were";
    } else if (subjectI && lower == "are") {
      repl = "am";
    } else if (subjectI && lower == "were") {
      repl = "was";
    } else {
      repl = std::string(word);
    }
    out += repl;
    prevLower = lower;
    subjectI = nowI;
    subjectYou = nowYou;
    clauseStart = false;
    for (std::string_view c : {"and", "but", "if", "when", "that", "because", "so"}) {
      if (lower == c) clauseStart = true;
    }
    pos = end;
  }
  return out;
}

// Does the clause t[a, b) stop mid-sentence? A cut that ends on a word that
// needs something after it ("my mom is in the hospital and i am", "我觉得很")
// is a fragment: said back it reads as a broken question ("...and you are?").
bool endsDangling(std::string_view t, size_t a, size_t b, Lang lang) {
  b = contentEnd(t, a, b);
  if (b <= a) return true;
  if (lang == Lang::kEn) {
    size_t w = b;
    while (w > a && isWordByte(static_cast<unsigned char>(t[w - 1]))) --w;
    static constexpr std::array<std::string_view, 40> kNeedsMore = {
        "am",  "are",  "is",   "was",  "were", "be",    "been",  "being", "and",    "or",
        "but", "to",   "the",  "a",    "an",   "of",    "so",    "very",  "really", "i",
        "my",  "your", "feel", "felt", "too",  "get",   "got",   "with",  "for",    "in",
        "at",  "on",   "just", "than", "that", "about", "quite", "kinda", "gonna",  "because"};
    const std::string_view last = t.substr(w, b - w);
    return std::find(kNeedsMore.begin(), kNeedsMore.end(), last) != kNeedsMore.end();
  }
  return endsWithAny(t, b, {"很", "太",   "和",   "跟", "把", "被",   "的",   "得",  "地", "是",
                            "就", "都",   "也",   "又", "还", "在",   "让",   "给",  "对", "更",
                            "最", "非常", "特别", "真", "好", "有点", "因为", "觉得"});
}

// Where the clause holding t[pos] ends: the next clause break, or the end.
size_t clauseEndFrom(std::string_view t, size_t pos) {
  while (pos < t.size()) {
    char32_t cp = 0;
    const size_t len = decodeUtf8(t, pos, &cp);
    if (isClauseBreak(cp)) break;
    pos += len;
  }
  return pos;
}

}  // namespace

void chooseEcho(std::string_view message, const Normalized& n, const Fold& fold, size_t chainBegin,
                size_t chainEnd, bool question, Signals* sig) {
  const std::string_view t = n.text;
  auto [s, e] = pickTopic(t, fold, sig->emotion, sig->lang, chainBegin, chainEnd);
  // No fragment is ever said back: a cut that stops mid-sentence is carried
  // to the end of its clause ("...and i am" -> "...and i am scared"), and if
  // that still does not read as a whole clause, the reply does without it.
  if (s < e && endsDangling(t, s, e, sig->lang)) {
    const size_t whole = clauseEndFrom(t, e);
    if (whole > e && !endsDangling(t, s, whole, sig->lang) &&
        countUnits(t, s, whole) <= (sig->lang == Lang::kZh ? 24u : 16u)) {
      e = whole;
    } else {
      s = e = 0;
    }
  }
  if (s < e) sig->topic = cutOriginal(message, n, s, e);

  // The echo prefers the sender's own clause over a bare emotion word:
  // 「今天被老板骂了」 says more than 「生气」.
  // A clause is said back in the reader's words and woven into the reply's
  // own sentence; a bare feeling word or a message with nothing to take hold
  // of ("？？？", "ok") is quoted instead, the way people quote a word back.
  std::string interjection;
  // A topic that is nothing but the feeling ("呵呵", "笑死我了") is an
  // interjection, not a clause to weave in: turned round it would read "笑死你
  // 了". It is quoted like a bare word instead.
  if (s < e && chainBegin != std::string_view::npos &&
      interjectionOnly(t, s, e, chainBegin, chainEnd)) {
    interjection = std::move(sig->topic);
    sig->topic.clear();
  }
  if (!sig->topic.empty()) {
    sig->said = sig->topic;
    sig->topic = speakBack(sig->topic, sig->lang);
    sig->echo = sig->topic;
    // A yes/no question only reads right as reported speech ("你问我今晚有没有
    // 空"): phrases that weave {echo} into a statement quote it instead.
    // In English any question is asked back in quotes; an invitation that is
    // not phrased as a question ("let's grab dinner") is woven in like a statement.
    const bool asked = sig->lang == Lang::kZh ? askedForm(sig->said, sig->topic) : question;
    if (asked) {
      sig->conditions |= kCondAsked;
      sig->echo = sig->lang == Lang::kZh ? "「" + sig->said + "」" : "\"" + sig->said + "\"";
    }
  } else {
    const std::string bare = !interjection.empty() ? interjection
                             : sig->feel.empty()   ? fallbackEcho(message, n, sig->lang)
                                                   : sig->feel;
    sig->said = bare;
    sig->echo = sig->lang == Lang::kZh ? "「" + bare + "」" : "\"" + bare + "\"";
  }
}

}  // namespace eq::engine::builtin::detail
