// Reading a message: what the analyzer takes from one message, with its
// context and scene, before anything is composed (Signals): the emotion and
// its intensity, the relationship stage, the situation (conditions), the
// speech act, and the words a reply may say back.
//
// The steps (reading.cc), in order: normalize (text.h), scan against the
// lexicon trie, fold the hits into emotion hits per clause, re-read feelings
// asked about the reader, score the emotions (the words first, the example
// posts second), then read what the message does (acts.h) and choose what to
// say back (echo.h). EmotionHit, Clause and Fold are the folded message,
// declared here because echo.cc picks its topic from them.
//
// Ownership and threads: Signals is a value built per request on the calling
// thread and dropped with the request; readMessage is a pure function of the
// engine's read-only tables and its input, safe on any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "workers/engine/builtin/tables.h"
#include "workers/engine/builtin/vocabulary.h"

namespace eq::engine::builtin::detail {

// One feeling found in the message: an emotion term with its modifiers
// folded in, or a punctuation cue.
struct EmotionHit {
  Emotion emotion = Emotion::kNeutral;
  double strength = 0;    // base strength times degree, negation and post-degree
  double weight = 1;      // contrast weighting
  size_t feel_begin = 0;  // the words to echo back ("不开心" when negated)
  size_t feel_end = 0;
  size_t chain_begin = 0;  // including modifiers ("好生气", "开心死了")
  size_t chain_end = 0;
  size_t clause = 0;  // index into the clause list
  bool echoable = true;
  bool news = false;
  bool rhetorical = false;  // a complaint shaped as a question: stays the sender's
  bool backoff = false;     // a single character that counts only without a word (kTagBackoff)
  bool mirative = false;    // "unexpectedly": surprise only without another feeling (kTagMirative)
  bool cue = false;         // punctuation ("??", "～"), not a lexicon term
};

// What readMessage takes from a message; strategy fit and the composer
// work from it alone.
struct Signals {
  Lang lang = Lang::kEn;
  Emotion emotion = Emotion::kNeutral;
  // What the words alone say (before the examples weigh in, scoreEmotion):
  // a complaint about the reader must be said in words (readAct).
  Emotion worded_emotion = Emotion::kNeutral;
  double intensity = 0;
  Stage stage = Stage::kUnknown;
  Scene scene = Scene::kNone;
  uint8_t conditions = 0;  // Condition bits
  Act act = Act::kSmallTalk;
  bool greeting = false;  // small talk read from a cue ("在吗", "hey"), not by default
  std::string feel;       // the emotion words as the sender wrote them
  std::string topic;      // the most salient clause or chunk
  std::string echo;       // topic in the reader's words, else feel or a cut, quoted
  std::string said;       // what echo stands for, in the sender's own words (for eq_analysis)
  size_t message_units = 0;
  uint64_t hash = 0;
};

// A clause of the normalized message: text between clause breaks or contrast
// words. Negation and degree words never reach across clause boundaries.
struct Clause {
  size_t begin = 0;
  size_t end = 0;
  bool after_contrast = false;
  bool question = false;
};

// What folding the hits yields: the emotion hits, the clauses, and the
// clauses that ask "X不X".
struct Fold {
  std::vector<EmotionHit> found;
  std::vector<Clause> clauses;
  std::vector<size_t> a_not_a_clauses;
  size_t denied = 0;  // feelings a negation cancelled ("一点也不生气")
};

// Reads a message (and its context and scene) into Signals: the steps above,
// in order.
Signals readMessage(const Data& tables, std::string_view message, std::string_view context,
                    std::string_view sceneName);

}  // namespace eq::engine::builtin::detail
