// JSON helpers over RapidJSON: a depth-limited, UTF-8-validating parser for
// untrusted input, string escaping for hand-built lines (logs), and the
// {code, data, msg} envelope every response uses. Stateless functions.
//
// Every process reads JSON through parse() or scan() and nothing else: they
// are the only callers of RapidJSON's reader, and they never let it convert a
// number. RapidJSON 1.1's own conversion adds the exponent and the count of
// fraction digits in an int that can overflow, then indexes its table of
// powers of ten with the result (CVE-2024-38517; Debian's package carries no
// fix): one number such as 0.0000000001e-2147483639 reads far outside the
// table. So the reader hands each number over as its text
// (kParseNumbersAsStringsFlag, which skips that arithmetic), and
// readNumber() below converts it, within limits no client needs to exceed
// (docs/contract.md, "Numbers").
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace eq::json {

// What every process writes JSON with, and a key with its string value
// (the value's bytes as they are: RapidJSON escapes what JSON needs).
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;
inline void putString(Writer& w, const char* key, std::string_view value) {
  w.Key(key);
  w.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
}

// "monthly": an account's monthly volume (docs/contract.md §11) as GET
// /api/v1/quota, the developer center and `eqctl quota show --json` show
// it: the limit (null for none: 0), the units used this calendar month
// (UTC) and when it resets (`resets_at`, expire_at's form).
inline void putMonthly(Writer& w, int64_t limit, int64_t used, std::string_view resets_at) {
  w.Key("monthly");
  w.StartObject();
  w.Key("limit");
  if (limit > 0) {
    w.Int64(limit);
  } else {
    w.Null();
  }
  w.Key("used");
  w.Int64(used);
  putString(w, "resets_at", resets_at);
  w.EndObject();
}

// Whether strings must be valid UTF-8: always, but for the one reader that
// salvages what it can from a message nobody else could read
// (msg::salvageTaskId).
enum class TextCheck { kValidUtf8, kAnyBytes };

// Parses untrusted text into doc. Rejects invalid UTF-8, both in the raw
// bytes (RapidJSON validates encoding only when asked) and in strings after
// their escapes are decoded (common/utf8.h says why), nesting deeper than
// max_depth (RapidJSON's reader recurses and has no limit of its own),
// numbers past the limits below, and trailing garbage. The error message
// says what is wrong and at which byte offset or in which field.
Status parse(std::string_view text, rapidjson::Document* doc, int max_depth,
             TextCheck check = TextCheck::kValidUtf8);

// The limits on a number's text. A number may have at most kMaxNumberDigits
// digits before its exponent (integer and fraction part together) and at most
// kMaxExponentDigits digits in its exponent; its value must fit a double.
// The API's numbers are small integers, and every score we write has a few
// digits, so these refuse nothing that a client or one of our processes sends.
inline constexpr std::size_t kMaxNumberDigits = 100;
inline constexpr std::size_t kMaxExponentDigits = 4;

// A JSON number converted by readNumber(), in the narrowest of RapidJSON's
// kinds that holds it, so that IsInt(), IsUint64() and friends answer as
// they would had RapidJSON converted it.
struct Number {
  enum class Kind { kInt, kUint, kInt64, kUint64, kDouble };
  Kind kind = Kind::kInt;
  int64_t i = 0;   // kInt, kInt64
  uint64_t u = 0;  // kUint, kUint64
  double d = 0;    // kDouble
};

// Converts the text of one number, as RapidJSON's reader hands it over: the
// grammar is already checked, so what can fail here are the limits above.
// The error message says which limit, not where: the caller names the field.
Result<Number> readNumber(std::string_view text);

// The checks parse() makes of a reader's events, for SAX handlers that build
// no document (common/messages.cc reads sync results this way): decoded text
// must be valid UTF-8, no container may open past max_depth, and a number
// must be within the limits above. Each check returns false to stop the
// reader, which is what bounds its recursion. It also follows the members'
// names, so that an error can say which field it is about.
class SaxChecks {
 public:
  explicit SaxChecks(int max_depth, TextCheck check = TextCheck::kValidUtf8)
      : max_depth_(max_depth), check_(check) {}
  bool text(const char* s, std::size_t n);  // a string, decoded
  bool key(const char* s, std::size_t n);   // a member's name, decoded
  bool enter();                             // a container opens
  void leave();                             // a container closes
  // A number's text: converted, or false with the reason kept for error().
  bool number(const char* s, std::size_t n, Number* out);
  int depth() const { return depth_; }  // 1 inside the top-level container
  bool tooDeep() const { return too_deep_; }
  bool badText() const { return bad_text_; }
  // The refusal of a number, naming its field ("reply_count", "a.b"), or
  // empty when every number was fine.
  const std::string& numberError() const { return number_error_; }
  // The dotted names of the members the reader is in, innermost last
  // ("options.count"); empty at the top level.
  std::string field() const;

 private:
  int max_depth_;
  TextCheck check_;
  int depth_ = 0;
  bool too_deep_ = false;
  bool bad_text_ = false;
  std::string number_error_;
  std::string key_;                // the member whose value comes next
  std::vector<std::string> path_;  // the member each open container is the value of
};

// Calls the typed event of handler for n, as RapidJSON's reader would have.
template <typename Handler>
bool forwardNumber(const Number& n, Handler& handler) {
  switch (n.kind) {
    case Number::Kind::kInt: return handler.Int(static_cast<int>(n.i));
    case Number::Kind::kUint: return handler.Uint(static_cast<unsigned>(n.u));
    case Number::Kind::kInt64: return handler.Int64(n.i);
    case Number::Kind::kUint64: return handler.Uint64(n.u);
    case Number::Kind::kDouble: return handler.Double(n.d);
  }
  return false;
}

// The 400 for a reader that stopped on an error of its own (bad syntax, bad
// encoding, a number too big for a double), naming the field where it can.
Status readerError(const rapidjson::ParseResult& result, const SaxChecks& checks);

// Runs RapidJSON's reader over text with a SAX handler of the caller's.
// Numbers always come as text (see the top of this file): the handler must
// implement RawNumber() through SaxChecks::number() and forwardNumber(), as
// the reader calls no other number event. No kParseFullPrecisionFlag either:
// its slow path calls __builtin_clzll(0) on a zero significand such as "0e54"
// (found by tests/fuzz/request_json).
template <TextCheck kCheck = TextCheck::kValidUtf8, typename Handler>
rapidjson::ParseResult scan(rapidjson::MemoryStream& in, Handler& handler) {
  constexpr unsigned kEncoding =
      kCheck == TextCheck::kValidUtf8 ? rapidjson::kParseValidateEncodingFlag : 0;
  rapidjson::Reader reader;
  return reader.Parse<kEncoding | rapidjson::kParseNumbersAsStringsFlag>(in, handler);
}

// Appends s as a JSON string literal, quotes included. Ill-formed UTF-8 in s
// is written as U+FFFD, so the output is always valid UTF-8.
void appendQuoted(std::string& out, std::string_view s);

std::string toString(const rapidjson::Value& v);

// {"code":code,"data":<data_json>,"msg":"..."}; data_json is raw JSON text
// (use "null" on errors).
std::string envelope(int code, std::string_view data_json, std::string_view msg);

// The 200 body of POST /api/v1/reply/async, {"task_id", "status": "queued"}
// in the envelope. eq-api answers with it; eq-dispatcher writes it into the
// Idempotency-Key record of a call whose eq-api died before answering
// (Store::settleOrphanedCharges), so a retry with the key gets this answer.
std::string asyncAcceptedBody(std::string_view task_id);

// Small typed readers for documents we produced ourselves (broker messages).
// They return the fallback when the member is absent or has another type.
std::string getString(const rapidjson::Value& obj, const char* name,
                      std::string_view fallback = "");
int64_t getInt(const rapidjson::Value& obj, const char* name, int64_t fallback = 0);

}  // namespace eq::json
