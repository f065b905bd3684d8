// The engine's vocabulary: emotions, relationship stages, strategies, scenes,
// languages and speech acts, the conditions a phrase may require and the
// placeholders it may use. The enum orders match the name tables, which are
// the wire names of docs/contract.md §3 and the names used in the data files.
//
// Constants and pure functions only: nothing to own, safe on any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace eq::engine::builtin::detail {

enum class Emotion : uint8_t {
  kJoy,
  kAffection,
  kAnger,
  kSadness,
  kAnxiety,
  kDisgust,
  kSurprise,
  kNeutral
};
constexpr size_t kEmotionCount = 8;
constexpr std::array<std::string_view, kEmotionCount> kEmotionNames = {
    "joy", "affection", "anger", "sadness", "anxiety", "disgust", "surprise", "neutral"};

enum class Stage : uint8_t {
  kStranger,
  kAcquaintance,
  kAmbiguous,
  kDating,
  kCommitted,
  kStrained,
  kPostBreakup,
  kColleague,
  kFamily,
  kUnknown
};
constexpr size_t kStageCount = 10;
constexpr std::array<std::string_view, kStageCount> kStageNames = {
    "stranger", "acquaintance", "ambiguous", "dating", "committed",
    "strained", "post_breakup", "colleague", "family", "unknown"};

enum class Strategy : uint8_t {
  kEmpathize,
  kReassure,
  kHumor,
  kApologize,
  kBoundary,
  kFlirt,
  kCongratulate,
  kSpace,
  kCurious
};
constexpr size_t kStrategyCount = 9;
constexpr std::array<std::string_view, kStrategyCount> kStrategyNames = {
    "empathize", "reassure",     "humor", "apologize", "boundary",
    "flirt",     "congratulate", "space", "curious"};

enum class Scene : uint8_t {
  kNone,
  kChat,
  kAmbiguous,
  kDating,
  kHumor,
  kConflict,
  kSocial,
  kWork,
  kBreakup,
  kProposal
};
constexpr size_t kSceneCount = 10;
constexpr std::array<std::string_view, kSceneCount> kSceneNames = {
    "",         "chat",   "ambiguous", "dating",  "humor",
    "conflict", "social", "work",      "breakup", "proposal"};

enum class Lang : uint8_t { kZh, kEn };
constexpr size_t kLangCount = 2;
constexpr std::array<std::string_view, kLangCount> kLangNames = {"zh", "en"};

// What the message does, besides what it feels (docs/engine.md, "Speech
// acts"): the reader answers an invitation, receives a breakup, accepts an
// apology. The names are the act names of the act sets (tests/data/acts_*.tsv)
// and of the "@act" conditions in phrases.tsv. small_talk is also the act of a
// message no cue speaks for.
enum class Act : uint8_t {
  kInvite,
  kAsk,
  kRequestFavour,
  kShareGoodNews,
  kConfideTrouble,
  kComplainAboutReader,
  kApologize,
  kThank,
  kRejectOrBreakup,
  kConfessFeelings,
  kFlirt,
  kTestReader,
  kSmallTalk
};
constexpr size_t kActCount = 13;
constexpr std::array<std::string_view, kActCount> kActNames = {"invite",
                                                               "ask",
                                                               "request_favour",
                                                               "share_good_news",
                                                               "confide_trouble",
                                                               "complain_about_reader",
                                                               "apologize",
                                                               "thank",
                                                               "reject_or_breakup",
                                                               "confess_feelings",
                                                               "flirt",
                                                               "test_reader",
                                                               "small_talk"};

template <size_t N>
int indexOf(const std::array<std::string_view, N>& names, std::string_view name) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  return -1;
}

template <typename E>
size_t idx(E e) {
  return static_cast<size_t>(e);
}

inline bool isNegative(Emotion e) {
  return e == Emotion::kAnger || e == Emotion::kSadness || e == Emotion::kAnxiety ||
         e == Emotion::kDisgust;
}

inline bool isPositive(Emotion e) { return e == Emotion::kJoy || e == Emotion::kAffection; }

// Placeholders a phrase may use. Each is filled from the message; a phrase
// whose placeholder has no value for this message is not used.
enum Slot : uint8_t {
  kSlotEcho = 1,
  kSlotFeel = 2,
  kSlotTopic = 4,
  kSlotMood = 8,
  kSlotStage = 16,
  kSlotSaid = 32
};
constexpr std::array<std::string_view, 6> kSlotNames = {"echo", "feel",  "topic",
                                                        "mood", "stage", "said"};
constexpr uint8_t kEchoSlots = kSlotEcho | kSlotFeel | kSlotTopic;

// Conditions a phrase can require or exclude besides the emotion, written in
// the emotions field ("anger,!addressed"): whether the message speaks to the
// reader ("你怎么又迟到了"), asks something, invites ("周末一起去看电影吧"), or
// reports good news (a "news" lexicon term); "asked" means the echoed clause
// itself is a yes/no question ("你今晚有空吗"), which {topic} says back as
// "我今晚有没有空" and {echo} quotes as the sender wrote it.
enum Condition : uint8_t {
  kCondAddressed = 1,
  kCondQuestion = 2,
  kCondInvite = 4,
  kCondNews = 8,
  kCondAsked = 16
};
constexpr std::array<std::string_view, 5> kConditionNames = {"addressed", "question", "invite",
                                                             "news", "asked"};

}  // namespace eq::engine::builtin::detail
