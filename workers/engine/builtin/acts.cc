// What a message does (acts.h): who it speaks to, whether it asks or invites,
// and its speech act.
#include "workers/engine/builtin/acts.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <string>

#include "workers/engine/builtin/text.h"

namespace eq::engine::builtin::detail {
namespace {

// English words of normalized text in [a, b), in order.
template <typename F>
void forEachWord(std::string_view t, size_t a, size_t b, F f) {
  size_t pos = a;
  while (pos < b) {
    if (!isWordByte(static_cast<unsigned char>(t[pos]))) {
      ++pos;
      continue;
    }
    size_t end = pos;
    while (end < b && isWordByte(static_cast<unsigned char>(t[end]))) ++end;
    f(t.substr(pos, end - pos), pos);
    pos = end;
  }
}

bool isYouWord(std::string_view w) {
  return w == "you" || w == "your" || w == "you're" || w == "u" || w == "ur" || w == "yourself" ||
         w == "you've" || w == "you'll";
}

bool isMeWord(std::string_view w) {
  return w == "i" || w == "me" || w == "my" || w == "i'm" || w == "myself" || w == "i've";
}

}  // namespace

bool mentionsYou(std::string_view t) {
  static constexpr std::array<std::string_view, 8> kFillers = {
      "你知道吗", "你知道", "跟你说", "告诉你", "你说", "你看", "you know", "guess what"};
  std::string text(t);
  for (std::string_view filler : kFillers) {
    for (size_t at = text.find(filler); at != std::string::npos; at = text.find(filler, at)) {
      text.replace(at, filler.size(), filler.size(), ' ');
    }
  }
  if (text.find("你") != std::string::npos || text.find("您") != std::string::npos) return true;
  bool found = false;
  forEachWord(text, 0, text.size(),
              [&](std::string_view w, size_t) { found = found || isYouWord(w); });
  return found;
}

bool readerNamedLast(std::string_view t, size_t a, size_t b) {
  bool you = false;
  size_t pos = a;
  while (pos < b) {
    const auto c = static_cast<unsigned char>(t[pos]);
    if (isWordByte(c)) {
      size_t end = pos;
      while (end < b && isWordByte(static_cast<unsigned char>(t[end]))) ++end;
      const std::string_view w = t.substr(pos, end - pos);
      if (isYouWord(w)) you = true;
      if (isMeWord(w)) you = false;
      pos = end;
      continue;
    }
    char32_t cp = 0;
    const size_t len = decodeUtf8(t, pos, &cp);
    if (cp == U'你' || cp == U'您') you = true;
    if (cp == U'我') you = false;
    pos += len;
  }
  return you;
}

bool isQuestion(std::string_view t) {
  size_t end = contentEnd(t, 0, t.size());
  if (end == 0) return false;
  if (t[end - 1] == '?') return true;
  // A message that ends on "!" (and no "?") exclaims: "你居然记得我喜欢吃什么！"
  // names 什么 without asking anything.
  size_t last = t.size();
  while (last > 0 && (t[last - 1] == ' ' || t[last - 1] == '!')) --last;
  if (last < t.size() && t.substr(last).find('!') != std::string_view::npos &&
      (last == 0 || t[last - 1] != '?')) {
    return false;
  }
  if (endsWithAny(t, end, {"吗", "么"})) return true;
  while (endsWithAny(t, end, {"呢", "啊", "呀"})) end -= std::string_view("呢").size();
  if (endsWithAny(t, end,
                  {"干嘛", "什么", "啥", "咋办", "哪", "哪儿", "哪里", "谁", "为什么", "多少",
                   "几点", "好不好", "行不行", "要不要", "可以吗"})) {
    return true;
  }
  size_t wordEnd = 0;
  while (wordEnd < t.size() && isWordByte(static_cast<unsigned char>(t[wordEnd]))) ++wordEnd;
  static constexpr std::array<std::string_view, 18> kOpeners = {
      "what", "how", "why", "when",  "where", "who",  "which", "are",    "do",
      "does", "did", "can", "could", "would", "will", "is",    "should", "wanna"};
  const std::string_view first = t.substr(0, wordEnd);
  return std::find(kOpeners.begin(), kOpeners.end(), first) != kOpeners.end();
}

bool hasQuestionWord(std::string_view t) {
  static constexpr std::array<std::string_view, 12> kZhAsk = {"怎么", "为什么", "哪",     "几点",
                                                              "什么", "该不该", "多少",   "吗",
                                                              "谁",   "能不能", "是不是", "如何"};
  if (t.find('!') != std::string_view::npos) return false;
  return std::any_of(kZhAsk.begin(), kZhAsk.end(),
                     [&](std::string_view w) { return t.find(w) != std::string_view::npos; });
}

bool isInvite(std::string_view t, bool question) {
  static constexpr std::array<std::string_view, 8> kZh = {"一起",   "要不要", "约你",     "出来玩",
                                                          "出去玩", "有空吗", "有时间吗", "见个面"};
  // English phrases that propose on their own, and weaker ones that only do
  // in a question ("I don't want to talk" is no invitation).
  static constexpr std::array<std::string_view, 8> kEnStrong = {
      "let's",          "lets",         "shall we",    "would you like to",
      "do you want to", "are you free", "grab dinner", "grab coffee"};
  static constexpr std::array<std::string_view, 5> kEnWeak = {"wanna", "how about", "want to",
                                                              "down to", "you free"};
  const size_t end = contentEnd(t, 0, t.size());
  const bool proposing = question || endsWithAny(t, end, {"吧", "呗"});
  for (std::string_view w : kZh) {
    if (proposing && t.find(w) != std::string_view::npos) return true;
  }
  auto hasPhrase = [t](std::string_view w) {
    for (size_t at = t.find(w); at != std::string_view::npos; at = t.find(w, at + 1)) {
      const bool startOk = at == 0 || !isWordByte(static_cast<unsigned char>(t[at - 1]));
      const bool endOk =
          at + w.size() >= t.size() || !isWordByte(static_cast<unsigned char>(t[at + w.size()]));
      if (startOk && endOk) return true;
    }
    return false;
  };
  for (std::string_view w : kEnStrong) {
    if (hasPhrase(w)) return true;
  }
  for (std::string_view w : kEnWeak) {
    if (question && hasPhrase(w)) return true;
  }
  return false;
}

namespace {

// Speech acts. Each act has cue lists, Chinese (found anywhere) and English
// (whole words only); the first act in kActOrder whose cue is in the message
// wins, so the act that changes the reply most is tried first: "对不起，我不能
// 接受你" turns the reader down before it apologizes, and "你怎么又迟到了" is a
// complaint before it is a question. When no cue speaks, the signals already
// read decide: good news, a trouble told, a question, else small talk.

struct ActCues {
  Act act;
  std::initializer_list<std::string_view> zh;
  std::initializer_list<std::string_view> en;
};

// clang-format off
const std::array<ActCues, 12> kActOrder = {{
    {Act::kRejectOrBreakup,
     {"分手吧", "我们分手", "要分手", "想分手", "提分手", "做朋友吧", "还是做朋友", "分开吧", "不合适", "到此为止", "不能接受你", "没有那种感觉",
      "别再联系", "不要再联系", "别联系我", "我们结束吧", "我们结束了", "不想再继续", "不喜欢你了"},
     {"break up", "breaking up", "broke up", "just be friends", "stay friends", "it's over",
      "not interested", "stop texting", "stop calling", "leave me alone", "don't feel the same",
      "don't see us", "we're done", "not working out", "need to end this", "see other people"}},
    {Act::kApologize,
     {"对不起", "抱歉", "我错了", "不好意思", "原谅我", "是我不对", "是我的错", "怪我"},
     {"sorry", "apologize", "apologise", "my bad", "forgive me", "my fault"}},
    {Act::kThank,
     {"谢谢", "感谢", "谢啦", "多谢", "谢了", "辛苦你了", "感激"},
     {"thank", "thanks", "thx", "appreciate", "appreciated", "grateful"}},
    {Act::kTestReader,
     {"不在乎我", "在不在乎我", "爱不爱我", "还爱我吗", "还喜欢我吗", "有别人了", "心里还有我",
      "嫌我", "先救谁", "你爱我吗", "你还要我吗", "不爱我了", "是不是烦我", "厌倦我", "还要我吗", "重要还是我"},
     {"care about me", "still love me", "love me anymore", "tired of me", "someone else",
      "choose me", "still want me", "bored of me", "sick of me", "still like me", "love me more"}},
    {Act::kConfessFeelings,
     {"我喜欢你", "我爱你", "爱上你", "暗恋", "有好感", "在意你", "做你女朋友", "做你男朋友",
      "对你心动", "喜欢上你", "我好喜欢你", "我真的喜欢你"},
     {"i like you", "i love you", "falling for you", "fell for you", "feelings for you",
      "crush on you", "in love with you", "liked you", "i really like you"}},
    {Act::kComplainAboutReader,
     {"你怎么又", "你又", "你从来不", "你总是", "你老是", "你每次", "你能不能别", "你太过分",
      "你一点都不", "你答应我", "说话不算数", "你根本不", "你怎么老", "你凭什么"},
     {"you never", "you always", "you forgot", "you promised", "you said you'd", "you didn't even",
      "you were so rude", "you keep", "you ignored", "you ignore", "you don't even"}},
    {Act::kFlirt,
     {"你今天好可爱", "你好可爱", "好看", "想我了没", "想我没", "想我吗", "撩我", "犯规", "小笨蛋",
      "坏蛋", "在想我", "想你了", "小傻瓜", "你真帅", "你好帅", "你真美"},
     {"cute", "charming", "thinking about me", "thinking of me", "miss me", "look good",
      "looking good", "handsome", "gorgeous", "you're trouble", "you're hot"}},
    {Act::kInvite,
     {"一起去", "一起吃", "一起看", "一起玩", "一起逛", "一起喝", "约你", "带你去", "出来玩",
      "见个面", "来不来", "去不去", "喝一杯", "有空吗", "有时间吗", "出去玩", "来我家"},
     {"let's", "lets", "shall we", "wanna", "would you like to", "do you want to", "are you free",
      "you free", "how about", "grab dinner", "grab lunch", "grab coffee", "grab a drink",
      "want to grab", "come over", "come to my", "join me", "hang out"}},
    {Act::kRequestFavour,
     {"帮我", "帮个忙", "帮忙", "麻烦你", "拜托", "借我", "能不能帮", "可以帮", "替我"},
     {"help me", "a favor", "a favour", "could you", "can you", "would you mind", "would you",
      "please", "lend me", "pick me up", "cover for me"}},
    {Act::kShareGoodNews,
     {"好消息", "考上", "升职", "通过了", "拿到", "中奖", "订婚", "录取", "加薪", "怀孕了", "赢了",
      "终于", "通过"},
     {"good news", "great news", "guess what", "got the job", "promoted", "passed", "got into",
      "engaged", "we won", "i won", "having a baby", "got accepted", "got in", "finally"}},
    {Act::kConfideTrouble,
     {"压力", "睡不着", "失眠", "住院", "生病", "搞砸", "没用", "闹翻", "骂", "没过", "难过",
      "害怕", "好累", "崩溃", "失业", "心里很乱", "想哭"},
     {"hospital", "scared", "stressed", "lost my", "lost his", "lost her", "failed", "useless",
      "can't sleep", "rough", "terrible", "crushing", "depressed", "anxious", "sick", "worried",
      "stopped talking", "falling apart"}},
    {Act::kSmallTalk,
     {"在吗", "在干嘛", "干嘛呢", "吃了吗", "吃饭了吗", "早上好", "晚上好", "早安", "晚安", "天气",
      "好热", "好冷", "你好", "嗨", "最近怎么样"},
     {"hey", "hi", "hello", "what's up", "whats up", "how's it going", "how was your day",
      "how are you", "up to", "good morning", "good night", "weather", "so hot", "so cold"}},
}};
// clang-format on

// Does the normalized text hold the cue? English cues must sit on word
// boundaries ("hi" is not in "this").
bool hasCue(std::string_view t, std::string_view cue, bool word) {
  for (size_t at = t.find(cue); at != std::string_view::npos; at = t.find(cue, at + 1)) {
    if (!word) return true;
    const bool startOk = at == 0 || !isWordByte(static_cast<unsigned char>(t[at - 1]));
    const bool endOk =
        at + cue.size() >= t.size() || !isWordByte(static_cast<unsigned char>(t[at + cue.size()]));
    if (startOk && endOk) return true;
  }
  return false;
}

}  // namespace

Act readAct(std::string_view t, Lang lang, bool question, bool invite, bool news, Emotion emotion,
            Emotion worded, bool addressed, bool* greeting) {
  for (const ActCues& cues : kActOrder) {
    // Small talk cues only speak for a short message: "hey, can you help me
    // move" is a request that opens with a greeting.
    if (cues.act == Act::kSmallTalk && countUnits(t, 0, t.size()) > 12) continue;
    for (std::string_view cue : lang == Lang::kZh ? cues.zh : cues.en) {
      if (hasCue(t, cue, lang == Lang::kEn)) {
        // A remark about the weather is small talk but no greeting: "在呢！"
        // answers "在吗", not "今天天气不错".
        static constexpr std::array<std::string_view, 6> kRemarks = {
            "天气", "好热", "好冷", "weather", "so hot", "so cold"};
        *greeting = cues.act == Act::kSmallTalk &&
                    std::find(kRemarks.begin(), kRemarks.end(), cue) == kRemarks.end();
        return cues.act;
      }
    }
  }
  // No cue: what the analyzer read decides.
  if (invite) return Act::kInvite;
  if (news) return Act::kShareGoodNews;
  const bool negative = emotion == Emotion::kSadness || emotion == Emotion::kAnxiety ||
                        emotion == Emotion::kAnger || emotion == Emotion::kDisgust;
  // A bad feeling spoken to the reader is about the reader ("你这个人真的很
  // 自私"); told about anything else, it is a trouble confided. Only words
  // accuse the reader: anger read from the examples alone ("你为什么选这个专
  // 业" resembles angry questions) leaves a question a question.
  if (addressed && (worded == Emotion::kAnger || worded == Emotion::kDisgust)) {
    return Act::kComplainAboutReader;
  }
  if (negative && !question) return Act::kConfideTrouble;
  if (question || (lang == Lang::kZh && hasQuestionWord(t))) return Act::kAsk;
  return Act::kSmallTalk;
}

}  // namespace eq::engine::builtin::detail
