// Unit tests of the built-in engine (workers/engine/builtin). The data files
// are read from the directory named by EQ_ENGINE_DATA_DIR (default
// "workers/engine/builtin/data", relative to the working directory), so the
// tests exercise the real lexicon and phrase bank, not a test double.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "workers/engine/builtin/builtin_engine.h"

namespace {

using eq::engine::Analysis;
using eq::engine::AnalyzeInput;
using eq::engine::Mode;
using eq::engine::ReplyInput;
using eq::engine::ReplyOutput;
using eq::engine::builtin::BuiltinEngine;

std::string dataDir() {
  const char* dir = std::getenv("EQ_ENGINE_DATA_DIR");
  return (dir != nullptr && *dir != '\0') ? dir : "workers/engine/builtin/data";
}

std::string readFile(const std::string& name) {
  const std::string path = dataDir() + "/" + name;
  std::ifstream in(path, std::ios::binary);
  BOOST_TEST_REQUIRE(in.good(), "cannot open " << path << " (set EQ_ENGINE_DATA_DIR)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string& lexicon() {
  static const std::string text = readFile("lexicon.tsv");
  return text;
}

const std::string& phrases() {
  static const std::string text = readFile("phrases.tsv");
  return text;
}

const std::string& examples() {
  static const std::string text = readFile("examples.tsv");
  return text;
}

// This suite tests what reads a message's feelings and composes replies from
// them: the composer, which answers every message that no situation reads
// (docs/engine.md, "Situations"). Its engine gets situation data with no cues,
// so no message is read as a situation here; the shipped situations are
// tested in engine_situations_test.cc and measured in engine_eval_test.cc.
const std::string& situations() {
  static const std::string text = [] {
    std::string t = "tier\t*\tneutral_share\t6\t-\n";
    for (const char* lang : {"zh", "en"}) {
      for (int i = 1; i <= 5; ++i) {
        t += std::string("reply\t") + lang + "\tneutral_share\tempathize\treply " +
             std::to_string(i) + ".\n";
      }
      for (const char* kind : {"why", "need", "advice", "guard"}) {
        t += std::string(kind) + "\t" + lang + "\tneutral_share\t*\t" + kind + "\n";
      }
    }
    return t;
  }();
  return text;
}

// One engine for the whole suite: building it is deterministic and the engine
// is immutable, so sharing it cannot couple tests.
const BuiltinEngine& engine() {
  static const std::unique_ptr<BuiltinEngine> e = [] {
    auto r = BuiltinEngine::create(lexicon(), phrases(), examples(), situations());
    BOOST_TEST_REQUIRE(r.isOk(), "create failed: " << r.status().msg());
    return std::move(r).value();
  }();
  return *e;
}

Analysis analyze(const std::string& message, const std::string& context = "") {
  AnalyzeInput in;
  in.message = message;
  in.context = context;
  auto r = engine().analyze(in);
  BOOST_TEST_REQUIRE(r.isOk(), "analyze failed: " << r.status().msg());
  return r.value();
}

ReplyOutput reply(const std::string& message, Mode mode, int count, const std::string& context = "",
                  const std::string& scene = "") {
  ReplyInput in;
  in.mode = mode;
  in.message = message;
  in.context = context;
  in.scene = scene;
  in.reply_count = count;
  auto r = engine().reply(in);
  BOOST_TEST_REQUIRE(r.isOk(), "reply failed: " << r.status().msg());
  return r.value();
}

bool isNegativeEmotion(const std::string& e) {
  return e == "anger" || e == "sadness" || e == "anxiety" || e == "disgust";
}

// True if the UTF-8 text contains a CJK ideograph.
bool hasCjk(const std::string& s) {
  for (size_t i = 0; i + 2 < s.size(); ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b >= 0xE4 && b <= 0xE9) return true;  // U+4E00..U+9FFF lead bytes
  }
  return false;
}

// The code points of a UTF-8 string, each as its own string.
std::vector<std::string> codePoints(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : 4;
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

// True if `text` contains some run of two consecutive CJK characters of
// `message`: the reply echoes something the sender actually wrote.
bool echoesChinese(const std::string& text, const std::string& message) {
  const std::vector<std::string> cps = codePoints(message);
  for (size_t i = 0; i + 1 < cps.size(); ++i) {
    if (cps[i].size() != 3 || cps[i + 1].size() != 3) continue;
    if (text.find(cps[i] + cps[i + 1]) != std::string::npos) return true;
  }
  return false;
}

// True if `text` contains a word (4+ letters) of `message`, ignoring case.
bool echoesEnglish(const std::string& text, const std::string& message) {
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  const std::string t = lower(text);
  std::istringstream words(lower(message));
  std::string w;
  while (words >> w) {
    while (!w.empty() && !std::isalpha(static_cast<unsigned char>(w.back()))) w.pop_back();
    if (w.size() >= 4 && t.find(w) != std::string::npos) return true;
  }
  return false;
}

// The documented token estimate, recomputed independently: one per CJK
// character (3-byte UTF-8 sequences in the BMP ideograph/punctuation ranges),
// one per whitespace-separated run of anything else.
int64_t estimateTokens(const std::string& s) {
  int64_t tokens = 0;
  bool inWord = false;
  for (const std::string& cp : codePoints(s)) {
    const auto b = static_cast<unsigned char>(cp[0]);
    const bool wide = cp.size() == 3 && ((b >= 0xE3 && b <= 0xE9) || b == 0xEF);
    if (wide) {
      ++tokens;
      inWord = false;
    } else if (cp == " " || cp == "\n" || cp == "\t") {
      inWord = false;
    } else if (!inWord) {
      ++tokens;
      inWord = true;
    }
  }
  return tokens;
}

// The label of a suggested strategy: the text before the first colon
// ("真诚道歉：承认问题…" gives "真诚道歉"), i.e. the top strategy only, without the
// runner-up that may follow.
std::string topStrategy(const Analysis& a) {
  const std::string& s = a.suggested_strategy;
  size_t cut = std::min(s.find("："), s.find(':'));
  return cut == std::string::npos ? s : s.substr(0, cut);
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(builtin_engine)

BOOST_AUTO_TEST_CASE(chinese_messages_get_the_right_emotion) {
  BOOST_TEST(analyze("今天升职加薪了，太开心了！").emotion == "joy");
  BOOST_TEST(analyze("你怎么又迟到了，我真的很生气").emotion == "anger");
  BOOST_TEST(analyze("最近好难过，什么都不想做").emotion == "sadness");
  BOOST_TEST(analyze("明天就要面试了，好紧张，怕搞砸").emotion == "anxiety");
  BOOST_TEST(analyze("他那种油腻的样子真恶心").emotion == "disgust");
  BOOST_TEST(analyze("真的假的？你居然要结婚了").emotion == "surprise");
  BOOST_TEST(analyze("好想你啊，宝贝").emotion == "affection");
  BOOST_TEST(analyze("明天下午三点开会").emotion == "neutral");
}

BOOST_AUTO_TEST_CASE(english_messages_get_the_right_emotion) {
  BOOST_TEST(analyze("I got the job, I'm so happy!").emotion == "joy");
  BOOST_TEST(analyze("I'm really angry at you right now").emotion == "anger");
  BOOST_TEST(analyze("I feel so sad and lonely tonight").emotion == "sadness");
  BOOST_TEST(analyze("I'm so nervous about tomorrow's exam").emotion == "anxiety");
  BOOST_TEST(analyze("I MISS YOU SOOO MUCH").emotion == "affection");
  BOOST_TEST(analyze("See you at 3 tomorrow").emotion == "neutral");
}

// Weibo and chat markers the lexicon names: bracket emoticons, kaomoji, slang,
// and the two scoring rules (love said with sorrow, the wave dash).
BOOST_AUTO_TEST_CASE(emoticons_kaomoji_and_slang_are_read) {
  BOOST_TEST(analyze("又加班到十点[泪]").emotion == "sadness");
  BOOST_TEST(analyze("排了半小时队又被人插队[怒]").emotion == "anger");
  BOOST_TEST(analyze("这种演技也能拿奖[吐]").emotion == "disgust");
  BOOST_TEST(analyze("周五啦[哈哈]").emotion == "joy");
  BOOST_TEST(analyze("期末考砸了T_T").emotion == "sadness");
  BOOST_TEST(analyze("下周答辩，压力山大").emotion == "anxiety");
  BOOST_TEST(analyze("这个剧情也是醉了").emotion == "disgust");
  BOOST_TEST(analyze("万万没想到他俩是亲戚").emotion == "surprise");
}

BOOST_AUTO_TEST_CASE(love_said_with_sorrow_is_sadness) {
  // Longing plus sorrow is heartache; longing alone stays affection.
  BOOST_TEST(analyze("我还是爱你，可是心好痛").emotion == "sadness");
  BOOST_TEST(analyze("好想你啊，宝贝").emotion == "affection");
  // A passing sad word next to strong love is no lament.
  BOOST_TEST(analyze("爱死你了，就是有点累").emotion == "affection");
}

BOOST_AUTO_TEST_CASE(a_wave_dash_only_decides_a_message_without_feeling) {
  BOOST_TEST(analyze("明天去海边～").emotion == "joy");
  BOOST_TEST(analyze("明天去海边").emotion == "neutral");
  BOOST_TEST(analyze("我好难过～").emotion == "sadness");
}

BOOST_AUTO_TEST_CASE(a_single_character_speaks_only_when_no_word_does) {
  // 羡 and 馋 are backoff characters: 羡煞 is not listed, yet the post is not
  // left neutral, and its reading stays weak.
  const Analysis envy = analyze("羡煞旁人");
  BOOST_TEST(envy.emotion == "affection");
  BOOST_TEST(envy.intensity < analyze("好羡慕").intensity);
  // With a word that names a feeling, the character is not counted at all.
  BOOST_TEST(analyze("羡煞旁人，好难过").emotion == "sadness");
  BOOST_TEST(analyze("吃不到火锅，馋哭了").emotion == "sadness");
  // Compounds where the character has no feeling are shielded. (Short, so
  // that the examples, which read a longer message, do not speak either.)
  BOOST_TEST(analyze("看乐队演出").emotion == "neutral");
}

BOOST_AUTO_TEST_CASE(unexpectedly_takes_the_feeling_named_with_it) {
  // 居然, 没想到: unexpected, but how the writer feels is said by the rest.
  BOOST_TEST(analyze("他居然当众挖鼻孔，真恶心").emotion == "disgust");
  BOOST_TEST(analyze("没想到考过了，太开心了").emotion == "joy");
  // Alone, or next to another word of surprise, it is surprise.
  BOOST_TEST(analyze("居然下雪了").emotion == "surprise");
  BOOST_TEST(analyze("真的假的？你居然要结婚了").emotion == "surprise");
}

BOOST_AUTO_TEST_CASE(fondness_in_a_happy_message_to_no_one_is_joy) {
  BOOST_TEST(analyze("好喜欢这只猫，开心").emotion == "joy");
  BOOST_TEST(analyze("超喜欢这首歌，开心").emotion == "joy");
  // Said to the reader, it stays affection.
  BOOST_TEST(analyze("好喜欢你，开心").emotion == "affection");
}

BOOST_AUTO_TEST_CASE(a_trailing_ellipsis_sighs) {
  BOOST_TEST(analyze("明天去海边……").emotion == "sadness");
  BOOST_TEST(analyze("他走了...").emotion == "sadness");
  // One full stop is no sigh, and a named feeling outweighs it.
  BOOST_TEST(analyze("明天去海边。").emotion == "neutral");
  BOOST_TEST(analyze("我好开心……").emotion == "joy");
}

BOOST_AUTO_TEST_CASE(double_negation_is_not_negative) {
  const Analysis a = analyze("我不是不喜欢你");
  BOOST_TEST(!isNegativeEmotion(a.emotion), "got " << a.emotion);
  BOOST_TEST(a.emotion == "affection");
  // ...and weaker than the plain statement.
  BOOST_TEST(a.intensity < analyze("我喜欢你").intensity);
  // A single negation of a liking is negative, which is what makes the double
  // negation case meaningful.
  BOOST_TEST(isNegativeEmotion(analyze("我不喜欢你").emotion));
}

BOOST_AUTO_TEST_CASE(negated_anger_is_not_anger) {
  BOOST_TEST(analyze("一点也不生气").emotion != "anger");
  BOOST_TEST(analyze("我一点都不生气，真的").emotion != "anger");
  BOOST_TEST(analyze("I'm not angry at all").emotion != "anger");
  BOOST_TEST(analyze("我很生气").emotion == "anger");
}

BOOST_AUTO_TEST_CASE(negated_joy_turns_sad) {
  BOOST_TEST(analyze("今天不太开心").emotion == "sadness");
  BOOST_TEST(analyze("I'm not happy with this").emotion == "sadness");
}

BOOST_AUTO_TEST_CASE(the_clause_after_a_contrast_weighs_more) {
  BOOST_TEST(analyze("虽然很累，但是很开心").emotion == "joy");
  BOOST_TEST(analyze("本来挺开心的，但是现在有点难过").emotion == "sadness");
  BOOST_TEST(analyze("It was fun, but now I'm sad").emotion == "sadness");
}

BOOST_AUTO_TEST_CASE(intensity_rises_with_degree_words_and_exclamations) {
  const double plain = analyze("我生气").intensity;
  const double very = analyze("我非常生气").intensity;
  const double veryBang = analyze("我非常生气！！！").intensity;
  const double aBit = analyze("我有点生气").intensity;
  BOOST_TEST(aBit < plain);
  BOOST_TEST(plain < very);
  BOOST_TEST(very < veryBang);
  BOOST_TEST(analyze("I'm angry").intensity < analyze("I'm angry!!!").intensity);
  BOOST_TEST(analyze("I'm angry").intensity < analyze("I'm very angry").intensity);
  BOOST_TEST(analyze("好烦").intensity < analyze("好烦烦烦烦").intensity);
  for (const char* m : {"我非常非常非常生气！！！！！！", "好的", "气死我了啊啊啊啊！！！"}) {
    const double i = analyze(m).intensity;
    BOOST_TEST((i >= 0.0 && i <= 1.0), m << " -> " << i);
  }
}

BOOST_AUTO_TEST_CASE(reply_count_gives_exactly_that_many_distinct_sorted_replies) {
  for (Mode mode : {Mode::kFast, Mode::kStandard, Mode::kPerfect}) {
    for (const char* message : {"今天被老板骂了，好生气", "I just got promoted!!", "嗯", "?"}) {
      for (int count = 1; count <= 5; ++count) {
        const ReplyOutput out = reply(message, mode, count);
        BOOST_TEST_REQUIRE(out.replies.size() == static_cast<size_t>(count));
        std::set<std::string> texts;
        for (size_t i = 0; i < out.replies.size(); ++i) {
          const auto& r = out.replies[i];
          texts.insert(r.text);
          BOOST_TEST((r.score >= 0.0 && r.score <= 1.0));
          BOOST_TEST(!r.text.empty());
          BOOST_TEST(!r.eq_analysis.empty());
          if (i > 0) BOOST_TEST(out.replies[i - 1].score >= r.score);
        }
        BOOST_TEST(texts.size() == static_cast<size_t>(count), message << " count " << count);
        BOOST_TEST(out.tokens_used > 0);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(replies_depend_on_the_message_and_echo_it) {
  const std::string a = "今天被老板骂了，好生气";
  const std::string b = "明天要面试了，好紧张";
  const ReplyOutput ra = reply(a, Mode::kStandard, 3);
  const ReplyOutput rb = reply(b, Mode::kStandard, 3);
  std::set<std::string> ta;
  std::set<std::string> tb;
  for (const auto& r : ra.replies) {
    ta.insert(r.text);
    BOOST_TEST(echoesChinese(r.text, a), r.text);
  }
  for (const auto& r : rb.replies) {
    tb.insert(r.text);
    BOOST_TEST(echoesChinese(r.text, b), r.text);
  }
  for (const std::string& t : ta) BOOST_TEST(tb.count(t) == 0u, t);
  // The echo is the salient clause, not only the bare emotion word.
  BOOST_TEST(contains(reply(a, Mode::kFast, 1).replies[0].text, "老板"));
  BOOST_TEST(contains(reply(b, Mode::kFast, 1).replies[0].text, "面试"));

  const std::string c = "My boss yelled at me again today, I'm furious";
  const std::string d = "My sister is getting married next month!";
  for (const auto& r : reply(c, Mode::kFast, 3).replies)
    BOOST_TEST(echoesEnglish(r.text, c), r.text);
  for (const auto& r : reply(d, Mode::kFast, 3).replies)
    BOOST_TEST(echoesEnglish(r.text, d), r.text);
  BOOST_TEST(reply(c, Mode::kFast, 1).replies[0].text != reply(d, Mode::kFast, 1).replies[0].text);
}

BOOST_AUTO_TEST_CASE(same_input_gives_identical_output) {
  ReplyInput in;
  in.mode = Mode::kPerfect;
  in.message = "你为什么总是不回我消息？我真的很失望";
  in.context = "我们在一起两年了";
  in.scene = "conflict";
  in.reply_count = 5;
  const auto first = engine().reply(in);
  // A second, independently built engine must agree too: nothing depends on
  // addresses, time or process state.
  auto other = BuiltinEngine::create(lexicon(), phrases(), examples(), situations());
  BOOST_TEST_REQUIRE(other.isOk());
  const auto second = other.value()->reply(in);
  BOOST_TEST_REQUIRE(first.isOk());
  BOOST_TEST_REQUIRE(second.isOk());
  const auto& x = first.value();
  const auto& y = second.value();
  BOOST_TEST(x.tokens_used == y.tokens_used);
  BOOST_TEST_REQUIRE(x.replies.size() == y.replies.size());
  for (size_t i = 0; i < x.replies.size(); ++i) {
    BOOST_TEST(x.replies[i].text == y.replies[i].text);
    BOOST_TEST(x.replies[i].score == y.replies[i].score);
    BOOST_TEST(x.replies[i].eq_analysis == y.replies[i].eq_analysis);
  }
  const Analysis a1 = analyze(in.message, in.context);
  const Analysis a2 = analyze(in.message, in.context);
  BOOST_TEST(a1.emotion == a2.emotion);
  BOOST_TEST(a1.intensity == a2.intensity);
  BOOST_TEST(a1.underlying_need == a2.underlying_need);
  BOOST_TEST(a1.suggested_strategy == a2.suggested_strategy);
}

BOOST_AUTO_TEST_CASE(replies_and_analysis_follow_the_message_language) {
  for (Mode mode : {Mode::kFast, Mode::kStandard, Mode::kPerfect}) {
    for (const auto& r : reply("我今天好累啊", mode, 5).replies) {
      BOOST_TEST(hasCjk(r.text), r.text);
      BOOST_TEST(hasCjk(r.eq_analysis), r.eq_analysis);
    }
    for (const auto& r : reply("I'm so tired today", mode, 5).replies) {
      BOOST_TEST(!hasCjk(r.text), r.text);
      BOOST_TEST(!hasCjk(r.eq_analysis), r.eq_analysis);
    }
  }
  const Analysis zh = analyze("我今天好累啊");
  BOOST_TEST(hasCjk(zh.underlying_need));
  BOOST_TEST(hasCjk(zh.suggested_strategy));
  const Analysis en = analyze("I'm so tired today", "我们是同事");
  BOOST_TEST(!hasCjk(en.underlying_need));
  BOOST_TEST(!hasCjk(en.suggested_strategy));
  BOOST_TEST(en.relationship_stage == "colleague");
}

// Replies weave the sender's clause in from the reader's side instead of
// pasting it back in quotes.
BOOST_AUTO_TEST_CASE(replies_say_the_message_back_in_the_readers_words) {
  const std::string promoted = reply("我升职了！！！", Mode::kFast, 1).replies[0].text;
  BOOST_TEST(contains(promoted, "你升职了"), promoted);
  BOOST_TEST(!contains(promoted, "我升职了"), promoted);
  BOOST_TEST(!contains(promoted, "「"), promoted);

  for (const auto& r : reply("今天被老板骂了，好难过", Mode::kPerfect, 5).replies) {
    BOOST_TEST(contains(r.text, "被老板骂了"), r.text);
    BOOST_TEST(!contains(r.text, "「"), r.text);
    // eq_analysis talks about the message, so it quotes the sender's words.
    BOOST_TEST(!contains(r.eq_analysis, "你今天被老板骂了"), r.eq_analysis);
  }

  // Anger at the reader: the question adverb goes, the reader owns the deed.
  bool owned = false;
  for (const auto& r : reply("你怎么又迟到了，我真的很生气", Mode::kStandard, 3).replies) {
    owned = owned || contains(r.text, "我又迟到了");
    BOOST_TEST(!contains(r.text, "你怎么又迟到了"), r.text);
  }
  BOOST_TEST(owned);

  // The feeling word is not cut off when what follows is bound to it.
  for (const auto& r : reply("分手后我每天都在想你，是不是很傻", Mode::kStandard, 3).replies) {
    BOOST_TEST(contains(r.text, "分手后你每天都在想我"), r.text);
  }

  // A complaint about the reader is owned, not treated as news to console.
  for (const auto& r : reply("你从来都不在乎我的感受", Mode::kStandard, 3, "男朋友").replies) {
    BOOST_TEST(!contains(r.text, "不管我从来"), r.text);
    BOOST_TEST(!contains(r.text, "的感受，你现在感觉怎么样"), r.text);
  }

  // English "you" is "I" as a subject and "me" after a verb or preposition.
  const std::string meme =
      reply("lol that meme you sent killed me", Mode::kFast, 1).replies[0].text;
  BOOST_TEST(contains(meme, "That meme I sent killed you"), meme);
  const std::string busy = reply("I told you I was busy", Mode::kFast, 1).replies[0].text;
  BOOST_TEST(contains(busy, "told me you were busy"), busy);

  const std::string job = reply("I got the job!!!", Mode::kFast, 1).replies[0].text;
  BOOST_TEST(contains(job, "You got the job"), job);
  BOOST_TEST(!contains(job, "\""), job);
}

BOOST_AUTO_TEST_CASE(a_yes_no_question_is_said_back_as_reported_speech) {
  // A yes/no question that is not an invitation or a test of the reader.
  const std::string cold = reply("你冷吗", Mode::kStandard, 3).replies[0].text;
  BOOST_TEST(!contains(cold, "我冷吗这件事"), cold);
  // "你今晚有空吗" is an invitation (act invite): it is answered, not echoed.
  for (const auto& r : reply("你今晚有空吗", Mode::kStandard, 3).replies) {
    BOOST_TEST(!contains(r.text, "你今晚有空吗"), r.text);
  }
  // "你爱我吗" tests the reader (act test_reader): the answer is given.
  for (const auto& r : reply("你爱我吗", Mode::kStandard, 3).replies) {
    BOOST_TEST(!contains(r.text, "我爱你吗这件事"), r.text);
    BOOST_TEST((contains(r.text, "在乎") || contains(r.text, "选你")), r.text);
  }
  // A final 么 of 什么 is no yes/no question.
  for (const auto& r : reply("哇，你居然记得我喜欢吃什么！", Mode::kStandard, 3).replies) {
    BOOST_TEST(!contains(r.text, "你问"), r.text);
  }
}

BOOST_AUTO_TEST_CASE(an_interjection_is_quoted_not_turned_round) {
  for (const auto& r : reply("笑死我了", Mode::kStandard, 3).replies) {
    BOOST_TEST(!contains(r.text, "笑死你了"), r.text);
  }
  BOOST_TEST(contains(reply("笑死我了", Mode::kFast, 1).replies[0].text, "「笑死我了」"));
  BOOST_TEST(contains(reply("呵呵", Mode::kFast, 1).replies[0].text, "「呵呵」"));
}

BOOST_AUTO_TEST_CASE(punctuation_only_is_answered_in_chinese) {
  for (const auto& r : reply("？？？", Mode::kStandard, 3).replies) {
    BOOST_TEST(hasCjk(r.text), r.text);
  }
  BOOST_TEST(hasCjk(analyze("😭😭😭").underlying_need));
}

BOOST_AUTO_TEST_CASE(modes_differ) {
  const std::string m = "你怎么又迟到了，我真的很生气";
  const ReplyOutput fast = reply(m, Mode::kFast, 3, "男朋友");
  const ReplyOutput standard = reply(m, Mode::kStandard, 3, "男朋友");
  const ReplyOutput perfect = reply(m, Mode::kPerfect, 3, "男朋友");
  // Perfect explains the comparison; the other modes do not.
  BOOST_TEST(perfect.replies[0].eq_analysis.find("比起") != std::string::npos,
             perfect.replies[0].eq_analysis);
  for (const auto& r : fast.replies) BOOST_TEST(r.eq_analysis.find("比起") == std::string::npos);
  for (const auto& r : standard.replies) {
    BOOST_TEST(r.eq_analysis.find("比起") == std::string::npos);
  }
  // Standard leads with a sentence on the sender's feeling; fast does not.
  const std::string& lead = standard.replies[0].eq_analysis;
  const std::string leadSentence = lead.substr(0, lead.find("。") + std::string("。").size());
  BOOST_TEST(contains(leadSentence, "生气"), leadSentence);
  for (const auto& r : standard.replies) BOOST_TEST(r.eq_analysis.find(leadSentence) == 0u);
  for (const auto& r : fast.replies) BOOST_TEST(!contains(r.eq_analysis, leadSentence));
  // Fast stays with one strategy: its eq_analysis core is the same sentence.
  std::set<std::string> fastWhys;
  for (const auto& r : fast.replies) fastWhys.insert(r.eq_analysis);
  BOOST_TEST(fastWhys.size() == 1u);
  // Standard and perfect draw from more than one strategy.
  std::set<std::string> standardWhys;
  for (const auto& r : standard.replies) standardWhys.insert(r.eq_analysis);
  BOOST_TEST(standardWhys.size() > 1u);

  const ReplyOutput en = reply("Why are you late again? I'm really mad at you", Mode::kPerfect, 2);
  BOOST_TEST(en.replies[0].eq_analysis.find("beats") != std::string::npos,
             en.replies[0].eq_analysis);
}

BOOST_AUTO_TEST_CASE(relationship_stage_comes_from_context_then_scene) {
  BOOST_TEST(analyze("在干嘛", "他是我男朋友").relationship_stage == "dating");
  BOOST_TEST(analyze("在干嘛", "我老婆发来的").relationship_stage == "committed");
  BOOST_TEST(analyze("在干嘛", "我们最近在暧昧").relationship_stage == "ambiguous");
  BOOST_TEST(analyze("在干嘛", "公司同事").relationship_stage == "colleague");
  BOOST_TEST(analyze("在干嘛", "我妈").relationship_stage == "family");
  BOOST_TEST(analyze("在干嘛", "前任突然找我").relationship_stage == "post_breakup");
  BOOST_TEST(analyze("在干嘛", "昨天和老公吵架了").relationship_stage == "strained");
  BOOST_TEST(analyze("在干嘛", "刚认识的人").relationship_stage == "acquaintance");
  BOOST_TEST(analyze("what's up", "my boss").relationship_stage == "colleague");
  BOOST_TEST(analyze("what's up", "my crush texted me").relationship_stage == "ambiguous");
  BOOST_TEST(analyze("what's up", "my ex").relationship_stage == "post_breakup");
  BOOST_TEST(analyze("在干嘛").relationship_stage == "unknown");
  AnalyzeInput in;
  in.message = "在干嘛";
  in.scene = "work";
  BOOST_TEST(engine().analyze(in).value().relationship_stage == "colleague");
  in.scene = "breakup";
  BOOST_TEST(engine().analyze(in).value().relationship_stage == "post_breakup");
  in.context = "男朋友";  // the context wins over the scene
  BOOST_TEST(engine().analyze(in).value().relationship_stage == "dating");
}

BOOST_AUTO_TEST_CASE(scene_and_stage_change_the_strategy) {
  // A happy message in a flirty scene suggests flirting; with a colleague
  // flirting is ruled out whatever the message says.
  AnalyzeInput in;
  in.message = "今天好开心";
  in.scene = "ambiguous";
  const Analysis flirty = engine().analyze(in).value();
  BOOST_TEST(contains(topStrategy(flirty), "调情"), flirty.suggested_strategy);
  in.scene = "";
  in.context = "我的老板";
  const Analysis boss = engine().analyze(in).value();
  BOOST_TEST(!contains(boss.suggested_strategy, "调情"), boss.suggested_strategy);
  BOOST_TEST(boss.relationship_stage == "colleague");
}

BOOST_AUTO_TEST_CASE(anger_at_the_reader_calls_for_an_apology) {
  const Analysis atYou = analyze("你这个人真的很自私，我受够了", "我们在冷战");
  BOOST_TEST(atYou.emotion == "anger");
  BOOST_TEST(atYou.relationship_stage == "strained");
  BOOST_TEST(contains(topStrategy(atYou), "道歉"), atYou.suggested_strategy);
  // Anger at a third party is met with empathy, not an apology.
  const Analysis atBoss = analyze("今天被老板骂了，好生气");
  BOOST_TEST(atBoss.emotion == "anger");
  BOOST_TEST(!contains(topStrategy(atBoss), "道歉"), atBoss.suggested_strategy);
  const Analysis en = analyze("Why are you always late? I'm so mad at you", "my girlfriend");
  BOOST_TEST(contains(topStrategy(en), "Apologize"), en.suggested_strategy);
}

BOOST_AUTO_TEST_CASE(questions_are_read_as_questions) {
  // "X不X" asks; it does not negate.
  BOOST_TEST(analyze("你到底爱不爱我").emotion == "affection");
  // A feeling asked about the reader is the sender's concern, not anger.
  const Analysis a = analyze("你是不是生气了？");
  BOOST_TEST(a.emotion == "anxiety", a.emotion);
  BOOST_TEST(analyze("are you mad at me?").emotion == "anxiety");
  // "I don't want to talk" is no invitation.
  const ReplyOutput out = reply("I don't want to talk to you anymore", Mode::kPerfect, 3, "my ex");
  for (const auto& r : out.replies) {
    BOOST_TEST(r.eq_analysis.find("invitation") == std::string::npos, r.eq_analysis);
  }
}

BOOST_AUTO_TEST_CASE(only_news_is_congratulated) {
  BOOST_TEST(contains(topStrategy(analyze("我升职了！！")), "祝贺"));
  BOOST_TEST(contains(topStrategy(analyze("I got promoted today!")), "Congratulate"));
  BOOST_TEST(!contains(topStrategy(analyze("哈哈哈哈笑死我了")), "祝贺"));
  BOOST_TEST(!contains(topStrategy(analyze("haha that was so fun")), "Congratulate"));
}

BOOST_AUTO_TEST_CASE(tokens_used_counts_message_context_and_output) {
  const std::string message = "今天被老板骂了，好生气";
  const std::string context = "my boss at work";
  const ReplyOutput out = reply(message, Mode::kStandard, 2, context);
  int64_t expected = estimateTokens(message) + estimateTokens(context);
  for (const auto& r : out.replies)
    expected += estimateTokens(r.text) + estimateTokens(r.eq_analysis);
  BOOST_TEST(out.tokens_used == expected);
  BOOST_TEST(estimateTokens("hello world 你好") == 4);
}

BOOST_AUTO_TEST_CASE(invalid_input_is_an_error_not_a_crash) {
  ReplyInput in;
  in.message = "你好";
  in.reply_count = 0;
  BOOST_TEST(engine().reply(in).status().code() == 400);
  in.reply_count = 6;
  BOOST_TEST(engine().reply(in).status().code() == 400);
  in.reply_count = 1;
  in.message = "";
  BOOST_TEST(!engine().reply(in).isOk());
  // Broken UTF-8 is repaired, never echoed raw.
  in.message = "\xff\xfe好开心\xc3";
  const auto r = engine().reply(in);
  BOOST_TEST_REQUIRE(r.isOk());
  BOOST_TEST(r.value().replies[0].text.find('\xff') == std::string::npos);
}

BOOST_AUTO_TEST_CASE(malformed_lexicon_line_is_reported_with_its_number) {
  const std::string good = "开心\temotion\tjoy\t5\n";
  struct Case {
    std::string text;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"# header\n" + good + "生气\temotion\tanger\t4\n", "line 3"},
      {good + "\n生气\temotoin\tanger\t5\n", "line 3"},
      {good + "生气\temotion\trage\t5\n", "line 2"},
      {good + "非常\tdegree\tlots\n", "line 2"},
      {good + "不\tnegation\textra\n", "line 2"},
      {good + "开心\temotion\tjoy\t5\n", "line 2"},
      {good + "男朋友\tstage\tlover\n", "line 2"},
      {good + "生气\temotion\tanger\n", "line 2"},
      {good + "升职\temotion\tjoy\t7\tnewz\n", "line 2"},
      // A backoff term must be a single Chinese character.
      {good + "羡慕\temotion\taffection\t3\tbackoff\n", "line 2"},
      {good + "w\temotion\tjoy\t3\tbackoff\n", "line 2"},
  };
  for (const Case& c : cases) {
    const auto r = BuiltinEngine::create(c.text, phrases(), examples(), situations());
    BOOST_TEST_REQUIRE(!r.isOk(), c.text);
    BOOST_TEST(r.status().code() == 500);
    BOOST_TEST(r.status().msg().find("lexicon.tsv " + c.expect) != std::string::npos,
               r.status().msg());
  }
  BOOST_TEST(BuiltinEngine::create(good, phrases(), examples(), situations()).isOk());
}

BOOST_AUTO_TEST_CASE(malformed_phrase_line_is_reported_with_its_number) {
  const std::string base = phrases();
  const int lines = static_cast<int>(std::count(base.begin(), base.end(), '\n'));
  const std::vector<std::string> bad = {
      "reply\tzh\tempathize\t*\t你说的「{ehco}」\n",
      "reply\tzh\tsulk\t*\t「{echo}」\n",
      "reply\tfr\tempathize\t*\t«{echo}»\n",
      "reply\tzh\tempathize\tjoy,rage\t「{echo}」\n",
      "reply\tzh\tempathize\t*\n",
      "reply\tzh\tempathize\t*\t「{echo」\n",
  };
  for (const std::string& line : bad) {
    const auto r = BuiltinEngine::create(lexicon(), base + line, examples(), situations());
    BOOST_TEST_REQUIRE(!r.isOk(), line);
    BOOST_TEST(r.status().code() == 500);
    BOOST_TEST(
        r.status().msg().find("phrases.tsv line " + std::to_string(lines + 1)) != std::string::npos,
        r.status().msg());
  }
  // A bank missing a whole strategy is refused too.
  const auto r =
      BuiltinEngine::create(lexicon(), "name\tzh\tstrategy.empathize\t*\t共情\n", examples(), situations());
  BOOST_TEST(!r.isOk());
  BOOST_TEST(r.status().code() == 500);
}

// The budget is for the optimized build that production runs. Unoptimized
// and sanitizer builds (cmake -DEQ_SANITIZE=ON) run the same code several
// times slower, so they get a proportionally larger budget instead of a
// flaky failure.
// A 200-character message, analyzed and answered over and over: the engine
// keeps no state between calls that could make the n-th call differ. Its
// speed (under 1 ms a call, issue 14) is a benchmark, not an assertion here:
// `build/engine_speed` and docs/benchmarks.md. A timed check failed CI on a
// loaded machine under ASan (1.11 ms against a 1 ms budget).
BOOST_AUTO_TEST_CASE(a_long_message_is_answered_the_same_every_time) {
  std::string message;
  while (message.size() < 600)
    message += "今天被老板当着全组的面骂了，真的非常生气，但是又不敢说什么，";
  message.resize(600);  // 200 CJK characters of 3 bytes
  AnalyzeInput ai;
  ai.message = message;
  ai.context = "公司同事";
  ReplyInput ri;
  ri.mode = Mode::kFast;
  ri.message = message;
  ri.context = "公司同事";
  ri.reply_count = 1;
  eq::Result<ReplyOutput> first = engine().reply(ri);
  BOOST_TEST_REQUIRE(first.isOk());
  eq::Result<Analysis> first_analysis = engine().analyze(ai);
  BOOST_TEST_REQUIRE(first_analysis.isOk());
  for (int i = 0; i < 200; ++i) {
    eq::Result<Analysis> a = engine().analyze(ai);
    BOOST_TEST_REQUIRE(a.isOk());
    BOOST_TEST(a.value().emotion == first_analysis.value().emotion);
    eq::Result<ReplyOutput> r = engine().reply(ri);
    BOOST_TEST_REQUIRE(r.isOk());
    BOOST_TEST(r.value().replies.front().text == first.value().replies.front().text);
  }
}

// Reading by example (example_reader.h; docs/engine.md, "Reading by
// example"), with a few examples written here so each rule shows in the test
// and none depends on the shipped examples.tsv.
namespace {

const char* const kFewExamples =
    "# a comment\n"
    "joy\t周末去海边晒太阳吃烧烤\n"
    "affection\t我家猫咪每天在门口等我回家\n"
    "anger\t外卖又送错了客服还挂我电话\n"
    "anger\t等了一个小时的车司机直接开走了\n"
    "sadness\t外婆的老房子下个月就要拆了\n"
    "anxiety\t明天就要体检了结果还不知道\n"
    "disgust\t楼道里又有人乱扔垃圾\n"
    "surprise\t十年没见的同学竟在地铁上碰到\n"
    "neutral\t明天上午九点在三楼开会\n"
    "neutral\t文件我已经发到你邮箱了\n";

const BuiltinEngine& fewExamplesEngine() {
  static const std::unique_ptr<BuiltinEngine> e = [] {
    auto r = BuiltinEngine::create(lexicon(), phrases(), kFewExamples, situations());
    BOOST_TEST_REQUIRE(r.isOk(), "create failed: " << r.status().msg());
    return std::move(r).value();
  }();
  return *e;
}

Analysis analyzeByFew(const std::string& message) {
  AnalyzeInput in;
  in.message = message;
  auto r = fewExamplesEngine().analyze(in);
  BOOST_TEST_REQUIRE(r.isOk(), r.status().msg());
  return r.value();
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_message_that_names_no_feeling_is_read_by_example) {
  // No word of the lexicon names a feeling here; the examples do the reading.
  const Analysis a = analyzeByFew("外卖送错了，客服也不接电话");
  BOOST_TEST(a.emotion == "anger");
  // Never strongly: no word said it.
  BOOST_TEST(a.intensity > 0.0);
  BOOST_TEST(a.intensity <= 0.5);
  // Below six Chinese characters there is not enough to go on.
  BOOST_TEST(analyzeByFew("客服挂电话").emotion == "neutral");
  // Chat logistics read as the neutral examples they resemble.
  BOOST_TEST(analyzeByFew("下午三点在三楼开会").emotion == "neutral");
}

BOOST_AUTO_TEST_CASE(words_decide_before_the_examples) {
  // One word that names a feeling outweighs any resemblance.
  BOOST_TEST(analyzeByFew("外卖送错了，但是好开心").emotion == "joy");
  // A feeling the message denies is not read back in by example.
  BOOST_TEST(analyzeByFew("外卖送错了，我一点也不生气").emotion == "neutral");
  // A question that names no feeling asks for an answer.
  AnalyzeInput in;
  in.message = "你为什么把外卖送错了";
  BOOST_TEST(fewExamplesEngine().analyze(in).value().emotion == "neutral");
  BOOST_TEST(fewExamplesEngine().actOf(in) == "ask");
  // English is read by words alone: the examples are Chinese.
  BOOST_TEST(analyzeByFew("the delivery was wrong and support hung up on me").emotion == "neutral");
}

BOOST_AUTO_TEST_CASE(the_sources_of_an_emotion_are_reported_apart) {
  const auto sourcesOf = [](const std::string& message) {
    AnalyzeInput in;
    in.message = message;
    return fewExamplesEngine().emotionSourcesOf(in);
  };
  // Read by example: the words say nothing, the examples decide.
  auto s = sourcesOf("外卖送错了，客服也不接电话");
  BOOST_TEST(s.words == "neutral");
  BOOST_TEST(s.examples == "anger");
  BOOST_TEST(s.emotion == "anger");
  // The words decide although the examples read the situation otherwise.
  s = sourcesOf("外卖送错了，但是好开心");
  BOOST_TEST(s.words == "joy");
  BOOST_TEST(s.examples == "anger");
  BOOST_TEST(s.emotion == "joy");
  // The examples are asked about every message here, even where analyze()
  // does not ask them (a denied feeling, a short message)...
  s = sourcesOf("外卖送错了，我一点也不生气");
  BOOST_TEST(s.words == "neutral");
  BOOST_TEST(s.examples == "anger");
  BOOST_TEST(s.emotion == "neutral");
  BOOST_TEST(sourcesOf("客服挂电话").examples == "anger");
  // ...and say neutral when no character of the message occurs in them.
  s = sourcesOf("hello there");
  BOOST_TEST(s.examples == "neutral");
  // The reported emotion is analyze()'s, also for repaired UTF-8.
  const std::string broken = "今天好开心\xff";
  BOOST_TEST(sourcesOf(broken).emotion == analyzeByFew(broken).emotion);
  BOOST_TEST(sourcesOf("").emotion == "neutral");
}

BOOST_AUTO_TEST_CASE(malformed_example_line_is_reported_with_its_number) {
  const std::string good = kFewExamples;
  struct Case {
    std::string text;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {good + "rage\t气死了\n", "examples.tsv line 12: unknown emotion 'rage'"},
      {good + "joy 开心\n", "examples.tsv line 12: expected 2 TAB-separated fields"},
      {good + "joy\t \n", "examples.tsv line 12: empty example"},
      {good + "joy\t\xff\xfe\n", "examples.tsv line 12: not UTF-8"},
      // Every emotion needs examples, or it could never be read.
      {"joy\t开心\nneutral\t好的\n", "examples.tsv: no example for affection"},
  };
  for (const Case& c : cases) {
    const auto r = BuiltinEngine::create(lexicon(), phrases(), c.text, situations());
    BOOST_TEST_REQUIRE(!r.isOk(), c.text);
    BOOST_TEST(r.status().code() == 500);
    BOOST_TEST(r.status().msg().find(c.expect) != std::string::npos, r.status().msg());
  }
}

BOOST_AUTO_TEST_SUITE_END()
