// Saying the message back: which of the sender's words a reply quotes or
// weaves into its own sentence ({echo}, {topic}, {said} in phrases.tsv). The
// topic is the message's most telling clause, or a noun chunk of a long one,
// turned round into the reader's words (我 -> 你, I -> you); a cut that would
// stop mid-sentence is never said back; a bare feeling word, an
// interjection or a message with nothing to take hold of is quoted instead.
//
// Stateless functions, called by readMessage (reading.h) on the calling
// thread; safe on any number of threads.
#pragma once

#include <cstddef>
#include <string_view>

#include "workers/engine/builtin/reading.h"
#include "workers/engine/builtin/text.h"

namespace eq::engine::builtin::detail {

// Sets sig->topic, sig->said and sig->echo from the folded message, and adds
// kCondAsked to sig->conditions when what is said back is a question.
// [chainBegin, chainEnd) is the feeling chain of the strongest emotion hit
// (npos when there is none); sig->emotion, lang and feel must already be
// read, and `question` is whether the message asks.
void chooseEcho(std::string_view message, const Normalized& n, const Fold& fold, size_t chainBegin,
                size_t chainEnd, bool question, Signals* sig);

}  // namespace eq::engine::builtin::detail
