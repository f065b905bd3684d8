// Text primitives of the built-in engine (text.h): UTF-8 repair,
// normalization and the unit and token counts.
#include "workers/engine/builtin/text.h"

namespace eq::engine::builtin::detail {
namespace {

void appendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

std::optional<std::string> sanitizeUtf8(std::string_view s) {
  bool valid = true;
  for (size_t pos = 0; pos < s.size();) {
    char32_t cp = 0;
    const size_t len = decodeUtf8(s, pos, &cp);
    if (cp == 0xFFFD && len == 1 && static_cast<unsigned char>(s[pos]) >= 0x80) {
      valid = false;
      break;
    }
    pos += len;
  }
  if (valid) return std::nullopt;
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t pos = 0; pos < s.size();) {
    char32_t cp = 0;
    const size_t len = decodeUtf8(s, pos, &cp);
    appendUtf8(out, cp);
    pos += len;
  }
  return out;
}

Normalized normalize(std::string_view s) {
  Normalized out;
  out.text.reserve(s.size());
  out.origin.reserve(s.size() + 1);
  auto push = [&](char c, size_t at) {
    out.text.push_back(c);
    out.origin.push_back(static_cast<uint32_t>(at));
  };
  size_t pos = 0;
  while (pos < s.size()) {
    const auto b = static_cast<unsigned char>(s[pos]);
    if (isAsciiAlpha(b)) {
      // Stretched letters ("sooo", "ewww", "loooove") collapse to one so that
      // the word matches the lexicon; the stretch itself is still seen as
      // emphasis on the original text.
      const char lower = lowerAscii(static_cast<char>(b));
      size_t run = 1;
      while (pos + run < s.size() && lowerAscii(s[pos + run]) == lower) ++run;
      if (run >= 3) {
        push(lower, pos);
        pos += run;
      } else {
        for (size_t i = 0; i < run; ++i) push(lower, pos + i);
        pos += run;
      }
      continue;
    }
    char32_t cp = 0;
    const size_t len = decodeUtf8(s, pos, &cp);
    char mapped = 0;
    if (cp == 0x2018 || cp == 0x2019) {
      mapped = '\'';
    } else if (cp >= 0xFF01 && cp <= 0xFF5E) {
      mapped = lowerAscii(static_cast<char>(cp - 0xFEE0));  // full-width ASCII
    }
    if (mapped != 0) {
      push(mapped, pos);
    } else {
      for (size_t i = 0; i < len; ++i) push(s[pos + i], pos + i);
    }
    pos += len;
  }
  out.origin.push_back(static_cast<uint32_t>(s.size()));
  return out;
}

size_t countUnits(std::string_view t, size_t a, size_t b) {
  size_t units = 0;
  bool inWord = false;
  size_t pos = a;
  while (pos < b) {
    const auto c = static_cast<unsigned char>(t[pos]);
    if (c < 0x80) {
      if (isWordByte(c)) {
        if (!inWord) ++units;
        inWord = true;
      } else {
        inWord = false;
      }
      ++pos;
      continue;
    }
    inWord = false;
    char32_t cp = 0;
    const size_t len = decodeUtf8(t, pos, &cp);
    if (!isSpace(cp) && !isClauseBreak(cp)) ++units;
    pos += len;
  }
  return units;
}

int64_t countTokens(std::string_view s) {
  int64_t tokens = 0;
  bool inWord = false;
  for (size_t pos = 0; pos < s.size();) {
    char32_t cp = 0;
    const size_t len = decodeUtf8(s, pos, &cp);
    if (isWideChar(cp)) {
      ++tokens;
      inWord = false;
    } else if (isSpace(cp)) {
      inWord = false;
    } else if (!inWord) {
      ++tokens;
      inWord = true;
    }
    pos += len;
  }
  return tokens;
}

}  // namespace eq::engine::builtin::detail
