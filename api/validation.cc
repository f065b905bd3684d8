#include "api/validation.h"

#include <rapidjson/document.h>
#include <strings.h>

#include <array>
#include <set>

#include "common/defaults.h"
#include "common/enums.h"
#include "common/json.h"

namespace eq::api {
namespace {

constexpr std::array<std::string_view, 9> kScenes = {
    "chat", "ambiguous", "dating", "humor", "conflict", "social", "work", "breakup", "proposal"};

// Decodes one code point at s[i] (valid UTF-8 is guaranteed by the parser)
// and returns its length in bytes.
size_t decodeAt(std::string_view s, size_t i, uint32_t* cp) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if (i + len > s.size()) len = s.size() - i;
  uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < len; ++k) v = (v << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  *cp = v;
  return len;
}

// White space as Unicode defines it (White_Space property), including the
// ideographic space U+3000 that Chinese input methods produce.
bool isSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
}

Status badField(std::string_view field, std::string_view what) {
  return Status(400, "field '" + std::string(field) + "' " + std::string(what));
}

Status parseObject(std::string_view body, rapidjson::Document* doc) {
  if (Status s = json::parse(body, doc, defaults::kMaxJsonDepth); !s.isOk()) return s;
  if (!doc->IsObject()) return Status(400, "request body must be a JSON object");
  // A repeated member would be ambiguous (RapidJSON keeps both; other parsers
  // keep the last): refuse it instead of guessing.
  std::set<std::string_view> seen;
  for (auto& m : doc->GetObject()) {
    std::string_view name(m.name.GetString(), m.name.GetStringLength());
    if (!seen.insert(name).second) return badField(name, "appears more than once");
  }
  return Status::ok();
}

// Reads an optional string member, trims it, and checks its length in code
// points; `required` also rejects absence and emptiness.
Status readText(const rapidjson::Value& obj, const char* name, bool required, size_t max_cp,
                std::string* out) {
  auto it = obj.FindMember(name);
  if (it == obj.MemberEnd() || it->value.IsNull()) {
    return required ? badField(name, "is required") : Status::ok();
  }
  if (!it->value.IsString()) return badField(name, "must be a string");
  std::string text = trimUnicodeSpace(
      std::string_view(it->value.GetString(), it->value.GetStringLength()));
  if (text.find('\0') != std::string::npos) return badField(name, "must not contain NUL");
  size_t n = codePoints(text);
  if (required && n == 0) return badField(name, "must not be empty or only white space");
  if (n > max_cp) {
    return badField(name, "is " + std::to_string(n) + " characters long; at most " +
                              std::to_string(max_cp) + " are allowed");
  }
  *out = std::move(text);
  return Status::ok();
}

Status checkKnownFields(const rapidjson::Value& obj, std::initializer_list<std::string_view> known) {
  for (auto& m : obj.GetObject()) {
    std::string_view name(m.name.GetString(), m.name.GetStringLength());
    bool ok = false;
    for (std::string_view k : known) ok = ok || k == name;
    if (!ok) {
      std::string allowed;
      for (std::string_view k : known) allowed += (allowed.empty() ? "" : ", ") + std::string(k);
      return badField(name, "is not a known field (allowed: " + allowed + ")");
    }
  }
  return Status::ok();
}

}  // namespace

std::string trimUnicodeSpace(std::string_view s) {
  size_t begin = 0, end = s.size();
  while (begin < end) {
    uint32_t cp;
    size_t len = decodeAt(s, begin, &cp);
    if (!isSpace(cp)) break;
    begin += len;
  }
  // Walk back to the start of the last code point each time.
  while (end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    uint32_t cp;
    decodeAt(s, start, &cp);
    if (!isSpace(cp)) break;
    end = start;
  }
  return std::string(s.substr(begin, end - begin));
}

size_t codePoints(std::string_view utf8) {
  size_t n = 0;
  for (unsigned char c : utf8) n += (c & 0xC0) != 0x80;
  return n;
}

Status checkIdempotencyKey(std::string_view key) {
  bool printable = !key.empty() && key.size() <= kMaxIdempotencyKeyChars;
  for (unsigned char c : key) printable = printable && c >= 0x20 && c < 0x7F;
  if (!printable) {
    return Status(400, "header 'Idempotency-Key' must be 1 to " +
                           std::to_string(kMaxIdempotencyKeyChars) +
                           " printable ASCII characters (a UUID is a good choice)");
  }
  return Status::ok();
}

Result<ReplyRequest> parseReplyRequest(std::string_view body, bool async,
                                       const net::CidrSet& webhook_allow) {
  rapidjson::Document doc;
  if (Status s = parseObject(body, &doc); !s.isOk()) return s;
  Status known = async ? checkKnownFields(doc, {"mode", "message", "context", "scene",
                                                "reply_count", "webhook_url"})
                       : checkKnownFields(doc, {"mode", "message", "context", "scene",
                                                "reply_count"});
  if (!known.isOk()) return known;

  ReplyRequest r;
  auto mode = doc.FindMember("mode");
  if (mode == doc.MemberEnd() || mode->value.IsNull()) {
    return badField("mode", "is required (one of fast, standard, perfect)");
  }
  if (!mode->value.IsString()) return badField("mode", "must be a string: fast, standard or perfect");
  r.mode.assign(mode->value.GetString(), mode->value.GetStringLength());
  if (!isModeName(r.mode)) {
    return badField("mode", "must be one of fast, standard, perfect");
  }
  if (Status s = readText(doc, "message", true, defaults::kMaxMessageCodePoints, &r.message);
      !s.isOk()) {
    return s;
  }
  if (Status s = readText(doc, "context", false, defaults::kMaxContextCodePoints, &r.context);
      !s.isOk()) {
    return s;
  }
  auto scene = doc.FindMember("scene");
  if (scene != doc.MemberEnd() && !scene->value.IsNull()) {
    if (!scene->value.IsString()) return badField("scene", "must be a string");
    r.scene.assign(scene->value.GetString(), scene->value.GetStringLength());
    bool ok = false;
    for (std::string_view s : kScenes) ok = ok || s == r.scene;
    if (!ok) {
      return badField("scene", "must be one of chat, ambiguous, dating, humor, conflict, social, "
                               "work, breakup, proposal");
    }
  }
  auto count = doc.FindMember("reply_count");
  if (count != doc.MemberEnd() && !count->value.IsNull()) {
    // IsInt is false for 2.5 and for 2.0 written with a decimal point, and
    // for strings and booleans: only a JSON integer is an integer here.
    if (!count->value.IsInt()) return badField("reply_count", "must be an integer from 1 to 5");
    r.reply_count = count->value.GetInt();
    if (r.reply_count < defaults::kMinReplyCount || r.reply_count > defaults::kMaxReplyCount) {
      return badField("reply_count", "must be an integer from 1 to 5");
    }
  }
  if (async) {
    auto hook = doc.FindMember("webhook_url");
    if (hook != doc.MemberEnd() && !hook->value.IsNull()) {
      if (!hook->value.IsString()) return badField("webhook_url", "must be a string");
      r.webhook_url.assign(hook->value.GetString(), hook->value.GetStringLength());
      if (Status s = checkWebhookUrl(r.webhook_url, webhook_allow); !s.isOk()) return s;
    }
  }
  return r;
}

Result<AnalyzeRequest> parseAnalyzeRequest(std::string_view body) {
  rapidjson::Document doc;
  if (Status s = parseObject(body, &doc); !s.isOk()) return s;
  if (Status s = checkKnownFields(doc, {"message", "context"}); !s.isOk()) return s;
  AnalyzeRequest r;
  if (Status s = readText(doc, "message", true, defaults::kMaxMessageCodePoints, &r.message);
      !s.isOk()) {
    return s;
  }
  if (Status s = readText(doc, "context", false, defaults::kMaxContextCodePoints, &r.context);
      !s.isOk()) {
    return s;
  }
  return r;
}

namespace {

bool sameAscii(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

// The three ways a browser spells this machine's loopback address in a Host
// header: the name and the two literals.
bool loopbackName(std::string_view host) {
  return sameAscii(host, "127.0.0.1") || sameAscii(host, "localhost") || sameAscii(host, "[::1]");
}

// Splits a Host value ("name", "name:port", "[v6]", "[v6]:port") into its
// name and its port ("" when absent). False when it has another shape.
bool splitHost(std::string_view authority, std::string_view* name, std::string_view* port) {
  std::size_t colon = std::string_view::npos;
  if (!authority.empty() && authority.front() == '[') {
    std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return false;
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return false;
      colon = close + 1;
    }
  } else {
    colon = authority.find(':');
    if (colon != std::string_view::npos &&
        authority.find(':', colon + 1) != std::string_view::npos) {
      return false;
    }
  }
  *name = authority.substr(0, colon);
  *port = colon == std::string_view::npos ? std::string_view() : authority.substr(colon + 1);
  return !name->empty();
}

}  // namespace

bool portalOriginAllowed(const std::string* origin, const std::string* host,
                         std::string_view portal_origin, std::string_view portal_host) {
  if (origin == nullptr || host == nullptr || host->empty()) return false;
  if (portal_origin.empty()) {
    return sameAscii(*origin, "http://" + *host) || sameAscii(*origin, "https://" + *host);
  }
  if (sameAscii(*origin, portal_origin) && sameAscii(*host, portal_host)) return true;
  // A local portal (EQ_PORTAL_URL http://127.0.0.1:8080, as scripts/run sets
  // it) is opened as http://localhost:8080 just as often: any loopback
  // spelling of the same scheme and port is the same machine's page. The
  // Origin must still name exactly the Host the request went to, and that
  // Host must itself be a loopback spelling, so a rebinding page (whose
  // Host is its own name) stays refused. Nothing widens for other hosts.
  std::string_view want_name, want_port, got_name, got_port;
  if (!splitHost(portal_host, &want_name, &want_port) || !loopbackName(want_name)) return false;
  if (!splitHost(*host, &got_name, &got_port) || !loopbackName(got_name)) return false;
  if (got_port != want_port) return false;
  std::string_view scheme = portal_origin.substr(0, portal_origin.find("://"));
  return sameAscii(*origin, std::string(scheme) + "://" + *host);
}

}  // namespace eq::api
