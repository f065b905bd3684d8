// JSON helpers over RapidJSON: a depth-limited, UTF-8-validating parser for
// untrusted input, string escaping for hand-built lines (logs), and the
// {code, data, msg} envelope every response uses. Stateless functions.
#pragma once

#include <rapidjson/document.h>

#include <string>
#include <string_view>

#include "common/status.h"

namespace eq::json {

// Parses untrusted text into doc. Rejects invalid UTF-8, both in the raw
// bytes (RapidJSON validates encoding only when asked) and in strings after
// their escapes are decoded (common/utf8.h says why), nesting deeper than max_depth (RapidJSON's
// reader recurses and has no limit of its own) and trailing garbage. The
// error message says what is wrong and at which byte offset.
Status parse(std::string_view text, rapidjson::Document* doc, int max_depth);

// The checks parse() makes of a reader's events, for SAX handlers that build
// no document (common/messages.cc reads sync results this way): decoded text
// must be valid UTF-8, and no container may open past max_depth. Each check
// returns false to stop the reader, which is what bounds its recursion.
class SaxChecks {
 public:
  explicit SaxChecks(int max_depth) : max_depth_(max_depth) {}
  bool text(const char* s, std::size_t n);  // a string or a key, decoded
  bool enter();                             // a container opens
  void leave() { --depth_; }                // a container closes
  int depth() const { return depth_; }      // 1 inside the top-level container
  bool tooDeep() const { return too_deep_; }
  bool badText() const { return bad_text_; }

 private:
  int max_depth_;
  int depth_ = 0;
  bool too_deep_ = false;
  bool bad_text_ = false;
};

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
