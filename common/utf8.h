// Strict UTF-8 (RFC 3629): what every string eq-api accepts must be after
// JSON decoding, and what every body and log line we write must be.
//
// Why a check of our own on top of RapidJSON's kParseValidateEncodingFlag:
// that flag validates the raw bytes of the document, but a \u escape is
// decoded afterwards, and RapidJSON turns a lone low surrogate (\udc00 to
// \udfff) into the three bytes of the surrogate code point, which is not
// UTF-8. Such a string passed validation, was enqueued, and then every
// strict reader downstream (worker, dispatcher) refused the job, so its
// task stayed queued forever (issue 13, finding 1).
//
// Stateless functions, safe on any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace eq::utf8 {

// Byte length of the well-formed sequence starting at s[i], or 0 when the
// bytes there are not one: a stray continuation byte, a truncated sequence,
// an overlong form, a surrogate (U+D800..U+DFFF) or a value past U+10FFFF.
std::size_t sequenceLength(std::string_view s, std::size_t i);

// True when every byte of s belongs to a well-formed sequence.
bool isValid(std::string_view s);

// Offset of the first byte that is not part of a well-formed sequence, or
// s.size() when there is none.
std::size_t firstInvalid(std::string_view s);

// s with each maximal ill-formed subpart replaced by U+FFFD, the
// substitution Unicode recommends (§3.9 "U+FFFD Substitution of Maximal
// Subparts"), so text from outside can be echoed in a response or a log
// line without making it invalid UTF-8.
std::string sanitize(std::string_view s);

// True for code points that change how text around them is shown rather
// than being text: C0 and C1 controls, DEL, and the bidirectional
// formatting controls (U+200E, U+200F, U+202A..U+202E, U+2066..U+2069). A
// name a person chose may contain none of them: echoed to an operator's
// terminal they move the cursor or reorder what the operator reads.
bool isDisplayControl(char32_t cp);

// True when well-formed s contains a display control (see above).
bool hasDisplayControl(std::string_view s);

// s (sanitized first) with every display control written as \u{XXXX}: safe
// to print on a terminal.
std::string escapeDisplayControls(std::string_view s);

}  // namespace eq::utf8
