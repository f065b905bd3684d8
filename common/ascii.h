// ASCII case for text whose case rules are ASCII's alone: protocol tokens
// (URL schemes, header names), email addresses as keys, English words in
// the built-in engine. Locale-free, unlike std::tolower, and bytes outside
// A-Z (UTF-8 among them) pass through unchanged.
#pragma once

#include <string>
#include <string_view>

namespace eq {

inline char lowerAscii(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

inline std::string lowerAscii(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lowerAscii(c);
  return out;
}

}  // namespace eq
