// What a message does besides what it feels: whether it speaks to the reader,
// asks or invites (the conditions phrases may require, vocabulary.h), and the
// speech act it performs (docs/engine.md, "Speech acts"): the reader answers
// an invitation, receives a breakup, accepts an apology.
//
// Stateless functions over normalized text (text.h), safe on any thread.
#pragma once

#include <cstddef>
#include <string_view>

#include "workers/engine/builtin/vocabulary.h"

namespace eq::engine::builtin::detail {

// Does the message speak to the reader? Fillers that only address the reader
// in passing ("你知道吗，今天老板…", "you know") do not count.
bool mentionsYou(std::string_view t);

// True when the reader ("你", "you") is the last person named in [a, b): in
// "你是不是生气了" the anger belongs to the reader, in "你让我好生气" to the
// sender.
bool readerNamedLast(std::string_view t, size_t a, size_t b);

// A question ends in "?", in 吗/么, or in a question word (在干嘛, 去哪呢), or
// opens with an English question word. Such messages want an answer or a
// question back, not a quote of themselves with "tell me more".
bool isQuestion(std::string_view t);

// A Chinese question word anywhere in a message that exclaims nothing ("你为
// 什么选这个专业" asks without a question mark); a question word in an
// exclamation asks nothing ("你居然记得我喜欢吃什么！").
bool hasQuestionWord(std::string_view t);

// An invitation: a suggestion to do something together, asked or proposed
// ("周末一起去看电影吧", "wanna grab dinner?").
bool isInvite(std::string_view t, bool question);

// The speech act of the message: the first act in acts.cc's kActOrder with
// a cue in the message, else what the analyzer already read decides (an
// invitation, good news, a complaint about the reader, a trouble confided, a
// question, small talk). *greeting says whether small talk came from a
// greeting cue ("在吗", "hey") rather than by default.
Act readAct(std::string_view t, Lang lang, bool question, bool invite, bool news, Emotion emotion,
            Emotion worded, bool addressed, bool* greeting);

}  // namespace eq::engine::builtin::detail
