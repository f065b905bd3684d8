#include "common/json.h"

#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <charconv>
#include <climits>
#include <cstdint>
#include <optional>

#include "common/utf8.h"

namespace eq::json {
namespace {

// Forwards SAX events to a Document, with SaxChecks' checks before each.
class DepthLimitedHandler {
 public:
  DepthLimitedHandler(rapidjson::Document& doc, int max_depth, TextCheck check)
      : doc_(doc), checks_(max_depth, check) {}

  bool Null() { return doc_.Null(); }
  bool Bool(bool b) { return doc_.Bool(b); }
  bool Int(int i) { return doc_.Int(i); }
  bool Uint(unsigned u) { return doc_.Uint(u); }
  bool Int64(int64_t i) { return doc_.Int64(i); }
  bool Uint64(uint64_t u) { return doc_.Uint64(u); }
  bool Double(double d) { return doc_.Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool) {
    Number number;
    return checks_.number(s, n, &number) && forwardNumber(number, *this);
  }
  // Decoded strings are checked again: see common/utf8.h for the escapes
  // that pass RapidJSON's own validation and still decode to bad bytes.
  bool String(const char* s, rapidjson::SizeType n, bool copy) {
    return checks_.text(s, n) && doc_.String(s, n, copy);
  }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) {
    return checks_.key(s, n) && doc_.Key(s, n, copy);
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

  const SaxChecks& checks() const { return checks_; }

 private:
  rapidjson::Document& doc_;
  SaxChecks checks_;
};

// How many digits text has from at on, up to the first character that is not one.
std::size_t digitsAt(std::string_view text, std::size_t at) {
  std::size_t n = 0;
  while (at + n < text.size() && text[at + n] >= '0' && text[at + n] <= '9') ++n;
  return n;
}

// An integer's text (no fraction, no exponent) in the narrowest kind that
// holds it; nullopt when it is beyond 64 bits and must be read as a double.
std::optional<Number> readInteger(std::string_view text) {
  Number n;
  const char* end = text.data() + text.size();
  if (text.front() == '-') {
    if (std::from_chars(text.data(), end, n.i).ec != std::errc()) return std::nullopt;
    n.kind = n.i >= INT32_MIN ? Number::Kind::kInt : Number::Kind::kInt64;
  } else {
    if (std::from_chars(text.data(), end, n.u).ec != std::errc()) return std::nullopt;
    n.kind = n.u <= UINT32_MAX ? Number::Kind::kUint : Number::Kind::kUint64;
  }
  return n;
}

}  // namespace

Result<Number> readNumber(std::string_view text) {
  // The reader checked the grammar: -? int frac? exp?, so the text is not
  // empty and every character is a sign, a digit, '.', 'e' or 'E'.
  std::size_t at = text.front() == '-' ? 1 : 0;
  std::size_t digits = digitsAt(text, at);
  at += digits;
  bool integer = true;
  if (at < text.size() && text[at] == '.') {
    std::size_t fraction = digitsAt(text, at + 1);
    digits += fraction;
    at += 1 + fraction;
    integer = false;
  }
  bool negative_exponent = false;
  if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    ++at;
    if (at < text.size() && (text[at] == '+' || text[at] == '-')) negative_exponent = text[at++] == '-';
    if (digitsAt(text, at) > kMaxExponentDigits) {
      return Status(400, "a number has more than " + std::to_string(kMaxExponentDigits) +
                             " digits in its exponent");
    }
    integer = false;
  }
  if (digits > kMaxNumberDigits) {
    return Status(400, "a number has more than " + std::to_string(kMaxNumberDigits) + " digits");
  }
  if (integer) {
    if (std::optional<Number> n = readInteger(text)) return *n;
  }
  Number n;
  n.kind = Number::Kind::kDouble;
  std::from_chars_result r = std::from_chars(text.data(), text.data() + text.size(), n.d);
  if (r.ec == std::errc::result_out_of_range) {
    // Too small for a double rounds to zero, as it would in any reader;
    // too large has no value at all.
    if (!negative_exponent) return Status(400, "a number is too large for a double");
    n.d = text.front() == '-' ? -0.0 : 0.0;
  } else if (r.ec != std::errc() || r.ptr != text.data() + text.size()) {
    // Cannot happen for the reader's grammar; refused all the same.
    return Status(400, "a number could not be read");
  }
  return n;
}

bool SaxChecks::text(const char* s, std::size_t n) {
  if (check_ == TextCheck::kAnyBytes || utf8::isValid(std::string_view(s, n))) return true;
  bad_text_ = true;
  return false;
}

bool SaxChecks::key(const char* s, std::size_t n) {
  if (!text(s, n)) return false;
  key_.assign(s, n);
  return true;
}

bool SaxChecks::enter() {
  if (++depth_ > max_depth_) {
    too_deep_ = true;
    return false;
  }
  path_.push_back(std::move(key_));
  key_.clear();
  return true;
}

void SaxChecks::leave() {
  --depth_;
  if (!path_.empty()) path_.pop_back();
  key_.clear();
}

bool SaxChecks::number(const char* s, std::size_t n, Number* out) {
  Result<Number> r = readNumber(std::string_view(s, n));
  if (!r.isOk()) {
    std::string where = field();
    number_error_ = (where.empty() ? std::string("the body") : "field " + where) + ": " +
                    r.status().msg() + " (at most " + std::to_string(kMaxNumberDigits) +
                    " digits and " + std::to_string(kMaxExponentDigits) + " exponent digits)";
    return false;
  }
  *out = r.value();
  return true;
}

std::string SaxChecks::field() const {
  std::string out;
  auto add = [&out](const std::string& name) {
    if (name.empty()) return;  // an array's element, or the top level
    if (!out.empty()) out += '.';
    out += name;
  };
  for (const std::string& name : path_) add(name);
  add(key_);
  return out;
}

Status parse(std::string_view text, rapidjson::Document* doc, int max_depth, TextCheck check) {
  rapidjson::MemoryStream ms(text.data(), text.size());
  DepthLimitedHandler handler(*doc, max_depth, check);
  rapidjson::ParseResult result;
  auto generator = [&](rapidjson::Document&) {
    result = check == TextCheck::kValidUtf8 ? scan<TextCheck::kValidUtf8>(ms, handler)
                                             : scan<TextCheck::kAnyBytes>(ms, handler);
    return !result.IsError();
  };
  doc->Populate(generator);
  const SaxChecks& checks = handler.checks();
  if (checks.tooDeep()) {
    return Status(400, "request body nests deeper than " + std::to_string(max_depth) + " levels");
  }
  if (checks.badText()) {
    return Status(400, "request body has a string that is not valid Unicode text (a lone "
                       "surrogate escape such as \\udc00?) before byte " +
                           std::to_string(result.Offset()));
  }
  if (!checks.numberError().empty()) return Status(400, "request body: " + checks.numberError());
  if (result.IsError()) return readerError(result, checks);
  return Status::ok();
}

Status readerError(const rapidjson::ParseResult& result, const SaxChecks& checks) {
  if (result.Code() == rapidjson::kParseErrorStringInvalidEncoding) {
    return Status(400,
                  "request body is not valid UTF-8 (at byte " + std::to_string(result.Offset()) + ")");
  }
  std::string msg = std::string("request body is not valid JSON: ") +
                    rapidjson::GetParseError_En(result.Code()) + " (at byte " +
                    std::to_string(result.Offset());
  // The reader's own number errors (1e309: too big for a double; 1.e5: no
  // fraction) happen before our checks see the number: name the field here.
  std::string where = checks.field();
  bool number_error = result.Code() == rapidjson::kParseErrorNumberTooBig ||
                      result.Code() == rapidjson::kParseErrorNumberMissFraction ||
                      result.Code() == rapidjson::kParseErrorNumberMissExponent;
  if (number_error && !where.empty()) msg += ", field " + where;
  return Status(400, msg + ")");
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
