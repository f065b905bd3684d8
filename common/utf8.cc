#include "common/utf8.h"

#include <cstdio>

namespace eq::utf8 {
namespace {

bool isContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// How many bytes of an ill-formed sequence at s[i] make up one "maximal
// subpart": the lead byte plus the continuation bytes that could still have
// started a valid sequence. Always at least 1.
std::size_t maximalSubpart(std::string_view s, std::size_t i) {
  auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = at(i);
  std::size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 1;
  }
  std::size_t n = 1;
  if (i + 1 < s.size() && at(i + 1) >= lo && at(i + 1) <= hi) {
    n = 2;
    while (n < need && i + n < s.size() && isContinuation(at(i + n))) ++n;
  }
  return n;
}

}  // namespace

std::size_t sequenceLength(std::string_view s, std::size_t i) {
  if (i >= s.size()) return 0;
  unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  if (c < 0xC2 || c > 0xF4) return 0;  // continuation, overlong lead, or past U+10FFFF
  std::size_t need = c <= 0xDF ? 2 : c <= 0xEF ? 3 : 4;
  return maximalSubpart(s, i) == need ? need : 0;
}

std::size_t firstInvalid(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    // ASCII runs are the common case in both languages' markup and keys.
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    std::size_t n = sequenceLength(s, i);
    if (n == 0) return i;
    i += n;
  }
  return s.size();
}

bool isValid(std::string_view s) { return firstInvalid(s) == s.size(); }

std::string sanitize(std::string_view s) {
  std::size_t bad = firstInvalid(s);
  if (bad == s.size()) return std::string(s);
  std::string out(s.substr(0, bad));
  std::size_t i = bad;
  while (i < s.size()) {
    std::size_t n = sequenceLength(s, i);
    if (n > 0) {
      out.append(s, i, n);
      i += n;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
      i += maximalSubpart(s, i);
    }
  }
  return out;
}

namespace {

// The code point of the well-formed sequence of n bytes at s[i].
char32_t decodeAt(std::string_view s, std::size_t i, std::size_t n) {
  auto b = [&](std::size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(s[i + k])); };
  switch (n) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

}  // namespace

bool isDisplayControl(char32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x200E || cp == 0x200F ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

bool hasDisplayControl(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    std::size_t n = sequenceLength(s, i);
    if (n == 0) return false;  // not well-formed: not this function's question
    if (isDisplayControl(decodeAt(s, i, n))) return true;
    i += n;
  }
  return false;
}

std::string escapeDisplayControls(std::string_view raw) {
  std::string s = sanitize(raw);
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    std::size_t n = sequenceLength(s, i);
    char32_t cp = decodeAt(s, i, n);
    if (isDisplayControl(cp)) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "\\u{%04X}", static_cast<unsigned>(cp));
      out += buf;
    } else {
      out.append(s, i, n);
    }
    i += n;
  }
  return out;
}

}  // namespace eq::utf8
