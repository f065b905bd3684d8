#include "common/json.h"

#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "common/utf8.h"

namespace eq::json {
namespace {

// Forwards SAX events to a Document, with SaxChecks' checks before each.
class DepthLimitedHandler {
 public:
  DepthLimitedHandler(rapidjson::Document& doc, int max_depth) : doc_(doc), checks_(max_depth) {}

  bool Null() { return doc_.Null(); }
  bool Bool(bool b) { return doc_.Bool(b); }
  bool Int(int i) { return doc_.Int(i); }
  bool Uint(unsigned u) { return doc_.Uint(u); }
  bool Int64(int64_t i) { return doc_.Int64(i); }
  bool Uint64(uint64_t u) { return doc_.Uint64(u); }
  bool Double(double d) { return doc_.Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool copy) {
    return doc_.RawNumber(s, n, copy);
  }
  // Decoded strings are checked again: see common/utf8.h for the escapes
  // that pass RapidJSON's own validation and still decode to bad bytes.
  bool String(const char* s, rapidjson::SizeType n, bool copy) {
    return checks_.text(s, n) && doc_.String(s, n, copy);
  }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) {
    return checks_.text(s, n) && doc_.Key(s, n, copy);
  }
  bool StartObject() { return checks_.enter() && doc_.StartObject(); }
  bool EndObject(rapidjson::SizeType n) {
    checks_.leave();
    return doc_.EndObject(n);
  }
  bool StartArray() { return checks_.enter() && doc_.StartArray(); }
  bool EndArray(rapidjson::SizeType n) {
    checks_.leave();
    return doc_.EndArray(n);
  }

  bool tooDeep() const { return checks_.tooDeep(); }
  bool badText() const { return checks_.badText(); }

 private:
  rapidjson::Document& doc_;
  SaxChecks checks_;
};

// No kParseFullPrecisionFlag: its slow path (internal/diyfp.h in RapidJSON
// 1.1) calls __builtin_clzll(0) on a zero significand such as "0e54",
// which is undefined behaviour (found by tests/fuzz/request_json), and no
// number we read needs more than the normal path's precision: the API's
// numbers are small integers, and scores are written by us.
constexpr unsigned kParseFlags = rapidjson::kParseValidateEncodingFlag;

}  // namespace

bool SaxChecks::text(const char* s, std::size_t n) {
  if (utf8::isValid(std::string_view(s, n))) return true;
  bad_text_ = true;
  return false;
}

bool SaxChecks::enter() {
  if (++depth_ > max_depth_) {
    too_deep_ = true;
    return false;
  }
  return true;
}

Status parse(std::string_view text, rapidjson::Document* doc, int max_depth) {
  rapidjson::MemoryStream ms(text.data(), text.size());
  rapidjson::Reader reader;
  DepthLimitedHandler handler(*doc, max_depth);
  rapidjson::ParseResult result;
  auto generator = [&](rapidjson::Document& d) {
    (void)d;
    result = reader.Parse<kParseFlags>(ms, handler);
    return !result.IsError();
  };
  doc->Populate(generator);
  if (handler.tooDeep()) {
    return Status(400, "request body nests deeper than " + std::to_string(max_depth) + " levels");
  }
  if (handler.badText()) {
    return Status(400, "request body has a string that is not valid Unicode text (a lone "
                       "surrogate escape such as \\udc00?) before byte " +
                           std::to_string(result.Offset()));
  }
  if (result.IsError()) {
    if (result.Code() == rapidjson::kParseErrorStringInvalidEncoding) {
      return Status(400, "request body is not valid UTF-8 (at byte " +
                             std::to_string(result.Offset()) + ")");
    }
    return Status(400, std::string("request body is not valid JSON: ") +
                           rapidjson::GetParseError_En(result.Code()) + " (at byte " +
                           std::to_string(result.Offset()) + ")");
  }
  return Status::ok();
}

void appendQuoted(std::string& out, std::string_view raw) {
  static const char kHex[] = "0123456789abcdef";
  // What we write must be UTF-8 even when it quotes bytes from outside (a
  // bad request path, a header): ill-formed parts become U+FFFD.
  std::string fixed;
  std::string_view s = raw;
  if (!utf8::isValid(raw)) {
    fixed = utf8::sanitize(raw);
    s = fixed;
  }
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xf];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

std::string toString(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return std::string(sb.GetString(), sb.GetSize());
}

std::string envelope(int code, std::string_view data_json, std::string_view msg) {
  std::string out;
  out.reserve(data_json.size() + msg.size() + 40);
  out += "{\"code\":";
  out += std::to_string(code);
  out += ",\"data\":";
  out += data_json;
  out += ",\"msg\":";
  appendQuoted(out, msg);
  out += '}';
  return out;
}

std::string asyncAcceptedBody(std::string_view task_id) {
  std::string data = "{\"task_id\":";
  appendQuoted(data, task_id);
  data += ",\"status\":\"queued\"}";
  return envelope(0, data, "ok");
}

std::string getString(const rapidjson::Value& obj, const char* name, std::string_view fallback) {
  if (!obj.IsObject()) return std::string(fallback);
  auto it = obj.FindMember(name);
  if (it == obj.MemberEnd() || !it->value.IsString()) return std::string(fallback);
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

int64_t getInt(const rapidjson::Value& obj, const char* name, int64_t fallback) {
  if (!obj.IsObject()) return fallback;
  auto it = obj.FindMember(name);
  if (it == obj.MemberEnd() || !it->value.IsInt64()) return fallback;
  return it->value.GetInt64();
}

}  // namespace eq::json
