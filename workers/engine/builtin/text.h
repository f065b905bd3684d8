// Text primitives of the built-in engine: UTF-8 decoding and repair,
// character classes, the normalization that lexicon terms and messages share,
// the unit and token counts, and the hashes that vary replies between
// messages.
//
// The engine decodes UTF-8 itself instead of using common/utf8.h, whose
// sanitize() writes one U+FFFD per maximal ill-formed subpart: here every
// malformed byte becomes a U+FFFD of its own (a truncated "ä½" gives
// two, not one), and what the engine reads in and echoes from malformed
// input follows from that. Switching would change those replies.
//
// Stateless functions, safe on any thread; the small ones used in every scan
// loop are inline here, the rest live in text.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/ascii.h"

namespace eq::engine::builtin::detail {

// ---------------------------------------------------------------------------
// UTF-8 and character classes.

// Decodes the code point at s[pos] and returns its length in bytes (at least
// 1, so a scan always advances). A malformed sequence reads as U+FFFD of one
// byte; callers that emit text sanitize the input first (sanitizeUtf8).
inline size_t decodeUtf8(std::string_view s, size_t pos, char32_t* cp) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  size_t len = 0;
  char32_t v = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    v = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    v = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    v = b0 & 0x07;
  } else {
    *cp = 0xFFFD;
    return 1;
  }
  if (pos + len > s.size()) {
    *cp = 0xFFFD;
    return 1;
  }
  for (size_t i = 1; i < len; ++i) {
    const auto b = static_cast<unsigned char>(s[pos + i]);
    if ((b & 0xC0) != 0x80) {
      *cp = 0xFFFD;
      return 1;
    }
    v = (v << 6) | (b & 0x3F);
  }
  // Overlong forms and surrogates are malformed too.
  if ((len == 2 && v < 0x80) || (len == 3 && v < 0x800) || (len == 4 && v < 0x10000) ||
      v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
    *cp = 0xFFFD;
    return 1;
  }
  *cp = v;
  return len;
}

// eq-api rejects invalid UTF-8, but the engine is also linked by tools and
// tests; echoing a stray byte into a reply would make invalid JSON downstream,
// so malformed input is repaired (each bad byte becomes U+FFFD) before use.
std::optional<std::string> sanitizeUtf8(std::string_view s);

inline bool isCjkIdeograph(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x20000 && cp <= 0x2FA1F);
}

// Characters that a tokenizer for CJK text would count one by one: ideographs
// plus CJK punctuation, kana and full-width forms.
inline bool isWideChar(char32_t cp) {
  return isCjkIdeograph(cp) || (cp >= 0x3000 && cp <= 0x30FF) || (cp >= 0xFF00 && cp <= 0xFFEF);
}

inline bool isSpace(char32_t cp) {
  return cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || cp == 0x3000 || cp == 0xA0;
}

inline bool isAsciiAlpha(unsigned char b) {
  return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z');
}
inline bool isAsciiAlnum(unsigned char b) { return isAsciiAlpha(b) || (b >= '0' && b <= '9'); }
using eq::lowerAscii;

// Bytes that make up an English word. The apostrophe belongs to the word so
// that "don't" is one lexicon term and "won't" never matches "won".
inline bool isWordByte(unsigned char b) { return isAsciiAlnum(b) || b == '\''; }

// Characters that end a clause. Negation and degree words never reach across
// them, and the echo chunk is cut at them. Works on normalized text, where
// full-width ASCII punctuation has already been folded.
inline bool isClauseBreak(char32_t cp) {
  switch (cp) {
    case ',':
    case '.':
    case '!':
    case '?':
    case ';':
    case ':':
    case '(':
    case ')':
    case '~':
    case '\n':
    case '\r':
    case '"':
    case 0x3002:
    case 0x3001:
    case 0x2026:
    case 0xFF5E:
    case 0x2014:
    case 0x300C:
    case 0x300D:
    case 0x300E:
    case 0x300F:
    case 0x3010:
    case 0x3011:
    case 0x300A:
    case 0x300B:
    case 0x201C:
    case 0x201D:
      return true;
    default:
      return false;
  }
}

// ---------------------------------------------------------------------------
// Normalization. Lexicon terms and messages go through the same function, so
// matching is a plain byte comparison. origin maps every byte of the
// normalized text back to the original, which is where echoed terms are cut
// from (the reply quotes the sender's own spelling, not our folded one).

struct Normalized {
  std::string text;
  std::vector<uint32_t> origin;  // origin[i]: byte offset in the original; back() = its size
};

Normalized normalize(std::string_view s);

inline std::string cutOriginal(std::string_view original, const Normalized& n, size_t a, size_t b) {
  return std::string(original.substr(n.origin[a], n.origin[b] - n.origin[a]));
}

// Counts "units" in text[a, b): one per CJK or other non-ASCII character and
// one per ASCII word, skipping spaces and clause breaks. Windows of negation
// and degree words and the echo length limits are measured in these units, so
// "不觉得你烦" and "don't really feel that" count alike.
size_t countUnits(std::string_view t, size_t a, size_t b);

// The token estimate of docs/contract.md §3: one token per CJK character and one
// per whitespace-separated word otherwise. It is an estimate, not what a model
// tokenizer would say; it only has to be stable and roughly proportional.
int64_t countTokens(std::string_view s);

inline bool endsWithAny(std::string_view t, size_t end,
                        std::initializer_list<std::string_view> list) {
  for (std::string_view w : list) {
    if (end >= w.size() && t.substr(end - w.size(), w.size()) == w) return true;
  }
  return false;
}

// Where [a, b) ends once trailing spaces and non-question marks are dropped.
inline size_t contentEnd(std::string_view t, size_t a, size_t b) {
  while (b > a && (t[b - 1] == ' ' || t[b - 1] == '!' || t[b - 1] == '~' || t[b - 1] == '.' ||
                   t[b - 1] == '\n' || t[b - 1] == ',')) {
    --b;
  }
  return b;
}

inline uint64_t fnv1a(std::string_view s, uint64_t h = 1469598103934665603ULL) {
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace eq::engine::builtin::detail
