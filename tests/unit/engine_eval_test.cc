// Accuracy of the built-in engine's emotion analyzer on the project's own
// evaluation sets (tests/data/eval_{zh,en}.tsv, read from EQ_TEST_DATA_DIR),
// plus individually pinned tricky messages. The floors sit a little below the
// accuracy measured when they were set (docs/engine.md): a lexicon or rule
// change that costs more than a couple of messages fails here and has to be
// looked at with tools/engine_eval --misses.
//
// When the CLUE validation split is present (../shared/data/ next to the
// source tree, or EQ_CLUE_JSONL), it is measured and printed too, asserting
// that the analyzer stays above the majority class by the margin it reached;
// it is never required.
#include <algorithm>
#include <array>
#include <cctype>
#include <initializer_list>
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "workers/engine/builtin/builtin_engine.h"
#include "workers/engine/builtin/evaluation.h"
#include "workers/engine/builtin/situation_evaluation.h"

namespace {

namespace eval = eq::engine::builtin::eval;
using eq::engine::AnalyzeInput;
using eq::engine::Mode;
using eq::engine::ReplyInput;
using eq::engine::builtin::BuiltinEngine;

// Accuracy floors, in percent, a little below what was measured when they
// were set (docs/engine.md has the measured values and the date). The eval
// sets were used for tuning, so their floors guard against regressions; the
// held-out sets were not, so theirs are the honest ones.
constexpr double kZhFloor = 90.5;         // measured 92.0 (438 messages)
constexpr double kEnFloor = 96.5;         // measured 97.4 (154 messages)
constexpr double kZhHoldoutFloor = 90.0;  // measured 92.5 (80 messages)
constexpr double kEnHoldoutFloor = 77.5;  // measured 80.0 (40 messages)
// CLUE (Weibo posts, no neutral label): the majority class is 35.1% of the
// validation split and a fine-tuned BERT-base reaches 60.7% on the test split.
// The engine reaches 43.6% (the lexicon alone 40.4%): above the majority
// class, far from the model. It commits on 95% of the posts (the lexicon
// alone on 85%: the examples read most posts that name no feeling) and is
// right on 45.8% of those. On the class-balanced sample (60 posts per
// label, eval::balancedSample) its macro-F1 is 0.397 (the lexicon alone
// 0.367; issue 14 asked for 0.45). All three are asserted. docs/engine.md.
// Speech acts (tests/data/acts_*.tsv, 13 acts, 4 messages per act in each
// file). The target of issue 14 is 85% on the held-out sets; measured 98.1%
// (zh) and 100% (en) when set, tuning sets 100%.
constexpr double kActFloor = 95.0;
constexpr double kActHoldoutFloor = 85.0;
constexpr double kClueFloor = 42.5;
constexpr double kClueAnsweredFloor = 45.0;
constexpr double kClueBalancedMacroF1Floor = 0.385;

std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : fallback;
}

bool readFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

// tests/data: EQ_TEST_DATA_DIR (set by tests/CMakeLists.txt for ctest), else
// next to this source file, which also works when unit_tests is run by hand.
std::string sourceRoot() {
  std::string file = __FILE__;  // <root>/tests/unit/engine_eval_test.cc
  for (int i = 0; i < 3; ++i) {
    const size_t slash = file.rfind('/');
    if (slash == std::string::npos) return ".";
    file.resize(slash);
  }
  return file.empty() ? "/" : file;
}

std::string testDataDir() { return envOr("EQ_TEST_DATA_DIR", sourceRoot() + "/tests/data"); }

std::string mustRead(const std::string& path) {
  std::string text;
  BOOST_TEST_REQUIRE(readFile(path, &text), "cannot open " << path);
  return text;
}

const BuiltinEngine& engine() {
  static const std::unique_ptr<BuiltinEngine> e = [] {
    const std::string dir = envOr("EQ_ENGINE_DATA_DIR", "workers/engine/builtin/data");
    auto r = BuiltinEngine::create(mustRead(dir + "/lexicon.tsv"), mustRead(dir + "/phrases.tsv"),
                                   mustRead(dir + "/examples.tsv"),
                                   mustRead(dir + "/situations.tsv"),
                                   mustRead(dir + "/situation_examples.tsv"));
    BOOST_TEST_REQUIRE(r.isOk(), "create failed: " << r.status().msg());
    return std::move(r).value();
  }();
  return *e;
}

eval::Report measure(const std::string& file) {
  const std::string path = testDataDir() + "/" + file;
  auto samples = eval::parseTsv(mustRead(path), path);
  BOOST_TEST_REQUIRE(samples.isOk(), samples.status().msg());
  const eval::Report r = eval::evaluate(engine(), samples.value());
  BOOST_TEST_MESSAGE(file << ": " << r.format());
  BOOST_TEST(r.failed == 0);
  return r;
}

std::string emotionOf(const std::string& message) {
  AnalyzeInput in;
  in.message = message;
  auto r = engine().analyze(in);
  BOOST_TEST_REQUIRE(r.isOk(), r.status().msg());
  return r.value().emotion;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(engine_eval)

BOOST_AUTO_TEST_CASE(sets_are_large_and_cover_every_emotion) {
  for (const char* file : {"eval_zh.tsv", "eval_en.tsv"}) {
    const std::string path = testDataDir() + "/" + file;
    auto samples = eval::parseTsv(mustRead(path), path);
    BOOST_TEST_REQUIRE(samples.isOk(), samples.status().msg());
    const bool zh = std::string(file) == "eval_zh.tsv";
    BOOST_TEST(samples.value().size() >= (zh ? 400u : 150u), file);
    std::array<int, eval::kEmotionCount> per{};
    for (const auto& s : samples.value()) ++per[static_cast<size_t>(eval::emotionIndex(s.emotion))];
    for (size_t i = 0; i < eval::kEmotionCount; ++i) {
      BOOST_TEST(per[i] >= (zh ? 45 : 15), file << " " << eval::kEmotions[i]);
    }
  }
}

BOOST_AUTO_TEST_CASE(chinese_accuracy_stays_above_its_floor) {
  const eval::Report r = measure("eval_zh.tsv");
  BOOST_TEST(100.0 * r.accuracy() >= kZhFloor);
}

BOOST_AUTO_TEST_CASE(english_accuracy_stays_above_its_floor) {
  const eval::Report r = measure("eval_en.tsv");
  BOOST_TEST(100.0 * r.accuracy() >= kEnFloor);
}

BOOST_AUTO_TEST_CASE(held_out_accuracy_stays_above_its_floor) {
  BOOST_TEST(100.0 * measure("holdout_zh.tsv").accuracy() >= kZhHoldoutFloor);
  BOOST_TEST(100.0 * measure("holdout_en.tsv").accuracy() >= kEnHoldoutFloor);
}

eval::ActReport measureActs(const std::string& file) {
  const std::string path = testDataDir() + "/" + file;
  auto samples = eval::parseActTsv(mustRead(path), path);
  BOOST_TEST_REQUIRE(samples.isOk(), samples.status().msg());
  // Every act is present, four times at least: a set that lost a class would
  // still score well.
  std::array<int, eval::kActCount> per{};
  for (const auto& a : samples.value()) ++per[static_cast<size_t>(eval::actIndex(a.act))];
  for (size_t i = 0; i < eval::kActCount; ++i) BOOST_TEST(per[i] >= 4, file << " " << eval::kActs[i]);
  const eval::ActReport r = eval::evaluateActs(engine(), samples.value());
  BOOST_TEST_MESSAGE(file << ": " << r.format());
  return r;
}

BOOST_AUTO_TEST_CASE(act_accuracy_stays_above_its_floor) {
  for (const char* file : {"acts_zh.tsv", "acts_en.tsv"}) {
    const eval::ActReport r = measureActs(file);
    BOOST_TEST(100.0 * r.accuracy() >= kActFloor, file);
    BOOST_TEST(r.macroF1() >= kActFloor / 100.0, file);
  }
}

BOOST_AUTO_TEST_CASE(held_out_act_accuracy_meets_the_target) {
  for (const char* file : {"acts_holdout_zh.tsv", "acts_holdout_en.tsv"}) {
    const eval::ActReport r = measureActs(file);
    BOOST_TEST(100.0 * r.accuracy() >= kActHoldoutFloor, file);
    BOOST_TEST(r.macroF1() >= kActHoldoutFloor / 100.0, file);
  }
}

// The cases the issue names, and a few more that once went wrong.
BOOST_AUTO_TEST_CASE(pinned_tricky_messages) {
  struct Case {
    const char* message;
    const char* emotion;
  };
  const Case cases[] = {
      {"我不是不喜欢你", "affection"},              // double negation affirms
      {"一点也不生气", "neutral"},                  // negated anger is no emotion at all
      {"笑死我了", "joy"},                          // 死 is a degree here, not sadness
      {"呵呵", "disgust"},                          // dismissive, not laughter
      {"没有不开心啊", "joy"},                      // negated 不开心 (tag not_joy)
      {"我一点都不开心", "sadness"},                // negated joy turns sad
      {"行，你厉害，你说的都对", "anger"},          // irony without a marker
      {"呵呵，你开心就好", "disgust"},              // 开心 inside a brush-off
      {"你就不能早点说吗", "anger"},                // rhetorical, not concern (tag rhetorical)
      {"好想念外婆", "sadness"},                    // longing for someone absent
      {"好想念你", "affection"},                    // ...and said to the reader
      {"我先挂了", "neutral"},                      // 挂了 is not failing an exam here
      {"卧槽？？？", "surprise"},                   // slang plus a ?-burst
      {"吓我一跳", "surprise"},                     // not 吓我 (anxiety)
      {"😭😭😭", "sadness"},                        // emoji only
      {"虽然下雨了，但是玩得很开心", "joy"},        // the clause after 但是 weighs more
      {"虽然很开心，但是好累", "sadness"},
      {"I don't not like you", "affection"},
      {"I'm not angry at all", "neutral"},
      {"I'm not happy", "sadness"},
      {"it was long but so much fun", "joy"},
  };
  for (const Case& c : cases) BOOST_TEST(emotionOf(c.message) == c.emotion, c.message);
}

BOOST_AUTO_TEST_CASE(the_analyzer_reads_better_than_either_of_its_sources) {
  const std::string path = testDataDir() + "/eval_zh.tsv";
  auto samples = eval::parseTsv(mustRead(path), path);
  BOOST_TEST_REQUIRE(samples.isOk(), samples.status().msg());
  const eval::SourceReports by = eval::evaluateSources(engine(), samples.value());
  BOOST_TEST_MESSAGE("eval_zh, the words alone: " << by.words.format());
  BOOST_TEST_MESSAGE("eval_zh, the examples alone: " << by.examples.format());
  // The analyzer's answers are analyze()'s, sample for sample.
  const eval::Report analyzed = eval::evaluate(engine(), samples.value());
  BOOST_TEST((by.emotion.confusion == analyzed.confusion));
  BOOST_TEST(by.emotion.failed + by.words.failed + by.examples.failed == 0);
  // Combining them is worth it: better than the words or the examples alone.
  BOOST_TEST(by.emotion.accuracy() > by.words.accuracy());
  BOOST_TEST(by.emotion.accuracy() > by.examples.accuracy());
}

BOOST_AUTO_TEST_CASE(clue_validation_split_when_present) {
  // ../shared/data next to the source tree: a shared/data folder beside the checkout.
  const std::string path = envOr(
      "EQ_CLUE_JSONL", testDataDir() + "/../../../shared/data/clue-emotion-valid.jsonl");
  std::string text;
  if (!readFile(path, &text)) {
    BOOST_TEST_MESSAGE("CLUE validation split not found at " << path << "; skipped");
    return;
  }
  auto samples = eval::parseClueJsonl(text, path);
  BOOST_TEST_REQUIRE(samples.isOk(), samples.status().msg());
  const eval::Report r = eval::evaluate(engine(), samples.value());
  BOOST_TEST_MESSAGE("CLUE valid (fine-tuned BERT-base: 60.7%): " << r.format());
  BOOST_TEST(100.0 * r.accuracy() >= kClueFloor);
  BOOST_TEST(100.0 * r.accuracy() > 100.0 * r.majorityBaseline() + 1.5);
  BOOST_TEST(100.0 * r.answeredAccuracy() >= kClueAnsweredFloor);
  const eval::Report balanced =
      eval::evaluate(engine(), eval::balancedSample(std::move(samples).value(), 60));
  BOOST_TEST_MESSAGE("CLUE valid, 60 per label: " << balanced.format());
  BOOST_TEST(balanced.macroF1() >= kClueBalancedMacroF1Floor);
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------------------
// The reply rubric (issue 14): for every message of the act sets, every reply
// of every mode (1, 3 and 5 replies) must be a whole sentence in the
// message's language, carry no fragment echo, invent no number, and do what
// the act needs. On the tuning sets the gold act is checked; on the held-out
// sets the act properties are checked where the analyzer read the act right
// (a misread act is already counted by the act floor), everything else always.
namespace {

bool hasCjk(const std::string& s) {
  for (size_t i = 0; i + 2 < s.size(); ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b >= 0xE4 && b <= 0xE9) return true;  // U+4000..U+9FFF lead bytes
  }
  return false;
}

std::string lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

bool containsAny(const std::string& text, std::initializer_list<const char*> words) {
  const std::string l = lower(text);
  for (const char* w : words) {
    if (l.find(w) != std::string::npos) return true;
  }
  return false;
}

bool endsWithAny(const std::string& s, std::initializer_list<const char*> ends) {
  for (const char* e : ends) {
    const std::string end(e);
    if (s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0) {
      return true;
    }
  }
  return false;
}

// An English word that cannot end a clause, right before "?" or ".": the
// mark of an echo cut mid-sentence ("...and you are?"). "to" is left out:
// "what are you up to?" ends on it.
bool fragmentBeforeMark(const std::string& text) {
  static const std::vector<std::string> kNeedsMore = {
      "am", "are", "is", "was", "were", "and", "or", "but", "the", "a", "an",
      "of", "so", "very", "really", "i", "my", "your", "with", "for", "than", "because"};
  const std::string l = lower(text);
  for (size_t i = 0; i < l.size(); ++i) {
    if (l[i] != '?' && l[i] != '.') continue;
    size_t b = i;
    while (b > 0 && std::isalpha(static_cast<unsigned char>(l[b - 1])) != 0) --b;
    const std::string word = l.substr(b, i - b);
    for (const std::string& w : kNeedsMore) {
      if (word == w) return true;
    }
  }
  return false;
}

// Every ASCII number in the reply is one the sender wrote.
bool keepsFacts(const std::string& message, const std::string& reply) {
  for (size_t i = 0; i < reply.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(reply[i]))) continue;
    size_t j = i;
    while (j < reply.size() && std::isdigit(static_cast<unsigned char>(reply[j]))) ++j;
    if (message.find(reply.substr(i, j - i)) == std::string::npos) return false;
    i = j;
  }
  return true;
}

// The act-level property; an empty string when it holds, else what is wrong.
std::string actProperty(const std::string& act, bool zh, const std::string& text) {
  auto need = [&](bool ok, const char* what) { return ok ? std::string() : std::string(what); };
  if (act == "invite") {
    return need(zh ? containsAny(text, {"好呀", "好啊", "可以呀", "接了", "去不了", "换个时间",
                                        "算我一个", "一定到", "走不开", "有安排", "先不去"})
                   : containsAny(text, {"yes", "sure", "count me in", "can't make it",
                                        "how about", "looking forward", "i'm in", "i'd love to",
                                        "rain check", "wish i could", "have plans"}),
                "does not answer the invitation");
  }
  if (act == "ask") {
    return need(zh ? containsAny(text, {"回你", "告诉你", "回答", "答案", "准话", "问清楚", "建议", "换我的话", "如果是我"})
                   : containsAny(text, {"get back", "tell you", "report back", "answer",
                                        "let you know", "text you", "look that up",
                                        "look it up", "double-check", "go with", "i'd pick",
                                        "my honest take", "i'd lean"}),
                "neither answers nor honestly defers the question");
  }
  if (act == "request_favour") {
    return need(zh ? containsAny(text, {"没问题", "可以呀", "我来帮", "帮你", "交给我",
                                        "包在我身上", "这就", "一会儿就去", "帮不上"})
                   : containsAny(text, {"no problem", "sure", "help", "of course", "can't manage",
                                        "on it", "will do", "i'll prioritize", "understood"}),
                "does not answer the request");
  }
  if (act == "apologize") {
    return need(zh ? containsAny(text, {"没关系", "接受", "不怪你", "过去", "道歉", "没事",
                                        "别放在心上", "不是故意"})
                   : containsAny(text, {"accept", "okay", "sorry", "behind us", "apologiz",
                                        "no worries", "we're good", "all good",
                                        "not holding it against"}),
                "neither accepts nor qualifies the apology");
  }
  if (act == "thank") {
    return need(zh ? containsAny(text, {"不客气", "客气", "不谢", "乐意", "谢谢啦", "不用谢",
                                        "小事", "举手之劳", "能帮到你"})
                   : containsAny(text, {"welcome", "anytime", "no problem", "happy to", "pleasure",
                                        "of course", "no worries", "glad", "do the same"}),
                "does not return the thanks");
  }
  if (act == "reject_or_breakup") {
    return need(!(zh ? containsAny(text, {"抱抱", "陪着你", "逞强", "别难过", "不哭", "一直都在"})
                     : containsAny(text, {"hug", "here for you", "on your side", "don't be sad",
                                          "right here", "cheer up"})),
                "consoles the one who leaves");
  }
  if (act == "confess_feelings") {
    return need(zh ? containsAny(text, {"谢谢", "我也", "收到", "心意", "我愿意", "感动"})
                   : containsAny(text, {"thank", "me too", "feel the same", "hear you",
                                        "like you too", "felt the same", "appreciate"}),
                "does not answer the confession");
  }
  if (act == "test_reader") {
    return need(zh ? containsAny(text, {"在乎", "选你", "爱你", "一直都在", "心疼", "对不起",
                                        "只有你", "最重要"})
                   : containsAny(text, {"care", "choose you", "love you", "always",
                                        "matter to me", "important to me", "sorry"}),
                "does not give the reassuring answer");
  }
  if (act == "confide_trouble") {
    return need(!containsAny(text, {"恭喜", "congrat"}), "congratulates a trouble");
  }
  return {};
}

void checkRubric(const std::string& file, bool heldOut) {
  const std::string path = testDataDir() + "/" + file;
  auto samples = eval::parseActTsv(mustRead(path), path);
  BOOST_TEST_REQUIRE(samples.isOk(), samples.status().msg());
  int checks = 0;
  int failures = 0;
  for (const eval::ActSample& s : samples.value()) {
    const bool zh = hasCjk(s.message);
    AnalyzeInput a;
    a.message = s.message;
    a.context = s.context;
    a.scene = s.scene;
    const bool actRight = engine().actOf(a) == s.act;
    for (Mode mode : {Mode::kFast, Mode::kStandard, Mode::kPerfect}) {
      for (int count : {1, 3, 5}) {
        ReplyInput in;
        in.mode = mode;
        in.message = s.message;
        in.context = s.context;
        in.scene = s.scene;
        in.reply_count = count;
        auto out = engine().reply(in);
        BOOST_TEST_REQUIRE(out.isOk(), s.message << ": " << out.status().msg());
        for (const auto& r : out.value().replies) {
          std::vector<std::string> wrong;
          if (!endsWithAny(r.text, {"。", "！", "？", "～", "…", ".", "!", "?", "~", ")", "）"})) {
            wrong.push_back("not a whole sentence");
          }
          if (zh != hasCjk(r.text)) wrong.push_back("wrong language");
          if (!zh && fragmentBeforeMark(r.text)) wrong.push_back("fragment echo");
          if (!keepsFacts(s.message, r.text)) wrong.push_back("invents a number");
          if (!heldOut || actRight) {
            const std::string act = actProperty(s.act, zh, r.text);
            if (!act.empty()) wrong.push_back(act);
          }
          checks += 5;
          failures += static_cast<int>(wrong.size());
          for (const std::string& w : wrong) {
            BOOST_ERROR(file << ":" << s.line << " [" << s.act << "] " << s.message << " -> "
                             << r.text << ": " << w);
          }
        }
      }
    }
  }
  BOOST_TEST_MESSAGE(file << ": rubric " << (checks - failures) << "/" << checks << " checks pass");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(engine_rubric)

BOOST_AUTO_TEST_CASE(every_reply_of_every_mode_does_what_the_act_needs) {
  checkRubric("acts_zh.tsv", false);
  checkRubric("acts_en.tsv", false);
  checkRubric("acts_holdout_zh.tsv", true);
  checkRubric("acts_holdout_en.tsv", true);
}

BOOST_AUTO_TEST_CASE(the_three_examples_of_issue_14) {
  auto top = [](Mode mode, const char* message, const char* scene, const char* context) {
    ReplyInput in;
    in.mode = mode;
    in.message = message;
    in.scene = scene;
    in.context = context;
    in.reply_count = 3;
    auto out = engine().reply(in);
    BOOST_TEST_REQUIRE(out.isOk(), out.status().msg());
    return out.value().replies;
  };
  // Turned down: received with dignity, the leaver is not comforted.
  for (const auto& r : top(Mode::kPerfect, "我们还是做朋友吧", "breakup", "")) {
    BOOST_TEST(actProperty("reject_or_breakup", true, r.text).empty(), r.text);
    BOOST_TEST(!containsAny(r.text, {"我们还是做朋友……"}), r.text);
  }
  // An invitation is answered.
  for (const auto& r : top(Mode::kStandard, "周末有空吗？想约你看电影", "dating", "刚认识两周")) {
    BOOST_TEST(actProperty("invite", true, r.text).empty(), r.text);
  }
  // The clause that carries the feeling is not cut.
  for (const auto& r : top(Mode::kFast, "My mom is in the hospital and I am scared", "", "")) {
    BOOST_TEST(!containsAny(r.text, {"you are?"}), r.text);
    BOOST_TEST(!fragmentBeforeMark(r.text), r.text);
  }
}

// Issue 14: no fragment echo in 2,000 sentences of the CLUE valid split run
// through fast mode. A Chinese echo cut mid-sentence ends on a word that needs
// something after it (很, 的, 和, 把, 被...) right before the reply's own
// punctuation; the reply text is checked for that. Skipped without the file.
BOOST_AUTO_TEST_CASE(no_fragment_echo_on_clue_sentences_in_fast_mode) {
  const std::string path = envOr(
      "EQ_CLUE_JSONL", testDataDir() + "/../../../shared/data/clue-emotion-valid.jsonl");
  std::string text;
  if (!readFile(path, &text)) {
    BOOST_TEST_MESSAGE("CLUE validation split not found at " << path << "; skipped");
    return;
  }
  auto samples = eval::parseClueJsonl(text, path);
  BOOST_TEST_REQUIRE(samples.isOk(), samples.status().msg());
  const auto& all = samples.value();
  // 2,000 sentences spread evenly over the split (fixed, so reruns agree).
  const size_t want = std::min<size_t>(2000, all.size());
  const size_t step = std::max<size_t>(1, all.size() / want);
  // 的 and 得 are left out: "是你应得的，" ends a clause on 的 as Chinese does.
  static const std::vector<std::string> kDangling = {"很", "太", "和", "跟", "把", "被",
                                                     "是", "就", "都", "又", "还", "让",
                                                     "给", "更", "最", "非常", "因为", "觉得"};
  static const std::vector<std::string> kMarks = {"？", "，", "。", "！"};
  size_t checked = 0;
  int fragments = 0;
  for (size_t i = 0; i < all.size() && checked < want; i += step, ++checked) {
    ReplyInput in;
    in.mode = Mode::kFast;
    in.message = all[i].message;
    in.reply_count = 1;
    auto out = engine().reply(in);
    BOOST_TEST_REQUIRE(out.isOk(), out.status().msg());
    const std::string& r = out.value().replies[0].text;
    bool bad = false;
    for (const std::string& d : kDangling) {
      for (const std::string& m : kMarks) bad = bad || r.find(d + m) != std::string::npos;
    }
    // The text is not printed: CLUE sentences stay out of logs.
    if (bad) ++fragments;
  }
  BOOST_TEST_MESSAGE("CLUE fast mode: " << fragments << " fragment echoes in " << checked);
  BOOST_TEST(checked == want);
  BOOST_TEST(fragments == 0);
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------------------
// The situations (issue 22) on the blind batches of tests/data/situations/:
// floors a little under what docs/engine.md reports, so that a change that
// loses a few messages shows. Batch 10 is the batch nobody tuned on; the
// messages of batches 1 to 9 are the engine's situation examples now, and
// their rubrics still test the replies (mostly of messages read as their own
// situation, since the engine has learnt them: what is measured is mostly
// what the replies say).
namespace {

struct SituationFloor {
  const char* batch;
  double accuracy;    // situation accuracy, the messages the examples hold left out
  double rubric;      // replies passing the rubric, the same messages left out
  int guards_broken;  // replies of every mode with what the gold situation forbids
};

std::vector<eval::SituationSample> situationSamples(const std::string& file, bool rubric) {
  const std::string path = testDataDir() + "/situations/" + file;
  auto samples = eval::parseSituationTsv(mustRead(path), path, rubric);
  BOOST_TEST_REQUIRE(samples.isOk(), samples.status().msg());
  return std::move(samples).value();
}

const std::set<std::string>& knownMessages() {
  static const std::set<std::string> known = eval::exampleMessages(
      mustRead(envOr("EQ_ENGINE_DATA_DIR", "workers/engine/builtin/data") +
               "/situation_examples.tsv"));
  return known;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(engine_situations_eval)

BOOST_AUTO_TEST_CASE(the_last_blind_batch_keeps_its_accuracy_rubric_and_guards) {
  for (const SituationFloor& f : std::vector<SituationFloor>{
           // Measured (docs/engine.md, "Situations"): 96.2% / 95.0% / 0 and
           // 97.4% / 96.7% / 0, at its first report.
           {"blind10_zh", 0.95, 0.94, 0},
           {"blind10_en", 0.96, 0.95, 0}}) {
    const std::string name(f.batch);
    const std::vector<eval::SituationSample> samples =
        eval::unknownTo(knownMessages(), situationSamples(name + ".tsv", false));
    const eval::SituationReport report = eval::evaluateSituations(engine(), samples);
    BOOST_TEST_MESSAGE(name << ": " << report.format(5));
    BOOST_TEST(report.accuracy() >= f.accuracy, name << " situation accuracy " << report.accuracy());
    // The target is none (issue 22): a reply that breaks one fails.
    const eval::GuardReport guards = eval::evaluateGuards(engine(), samples);
    BOOST_TEST(guards.broken <= f.guards_broken,
               name << ": " << guards.broken << " replies break their gold situation's guard");
    const std::string rubricFile =
        name.substr(0, name.size() - 3) + "_rubric_" + name.substr(name.size() - 2) + ".tsv";
    const eval::RubricReport rubric = eval::evaluateRubric(
        engine(), eval::unknownTo(knownMessages(), situationSamples(rubricFile, true)));
    BOOST_TEST_MESSAGE(rubricFile << ": " << rubric.format());
    BOOST_TEST(rubric.passRate() >= f.rubric, rubricFile << " rubric " << rubric.passRate());
  }
}

BOOST_AUTO_TEST_CASE(the_rubrics_of_the_batches_turned_examples_still_pass) {
  // Measured: 98.3%, 99.2%, 98.7%, 99.1%, 96.2%, 95.5%, 96.6%, 93.8%, 96.2%,
  // 94.5%, 95.6%, 95.4%, 95.0%, 94.8%, 95.9%, 95.4%.
  for (const auto& [file, floor] : std::vector<std::pair<std::string, double>>{
           {"blind1_rubric_zh.tsv", 0.97},
           {"blind1_rubric_en.tsv", 0.98},
           {"blind2_rubric_zh.tsv", 0.97},
           {"blind2_rubric_en.tsv", 0.98},
           {"blind4_rubric_zh.tsv", 0.95},
           {"blind4_rubric_en.tsv", 0.94},
           {"blind5_rubric_zh.tsv", 0.95},
           {"blind5_rubric_en.tsv", 0.93},
           {"blind6_rubric_zh.tsv", 0.95},
           {"blind6_rubric_en.tsv", 0.93},
           {"blind7_rubric_zh.tsv", 0.94},
           {"blind7_rubric_en.tsv", 0.92},
           {"blind8_rubric_zh.tsv", 0.94},
           {"blind8_rubric_en.tsv", 0.93},
           {"blind9_rubric_zh.tsv", 0.94},
           {"blind9_rubric_en.tsv", 0.94}}) {
    const eval::RubricReport rubric =
        eval::evaluateRubric(engine(), situationSamples(file, true));
    BOOST_TEST_MESSAGE(file << ": " << rubric.format());
    BOOST_TEST(rubric.passRate() >= floor, file << " rubric " << rubric.passRate());
  }
}

BOOST_AUTO_TEST_SUITE_END()
