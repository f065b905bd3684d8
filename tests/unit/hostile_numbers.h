// The number texts that every JSON reader of ours is tested with (issue 27):
// the one that crashed every process through RapidJSON 1.1's exponent
// arithmetic (CVE-2024-38517), its neighbours on both sides of the int
// limits, mantissas of hundreds of digits, and the edges of a double. Each
// entry says whether json::parse must take it (and then a reader may still
// refuse the value as out of its range) or refuse it with a 400 that names
// the field.
#pragma once

#include <string>
#include <vector>

namespace eq::test {

struct HostileNumber {
  std::string text;
  bool parses;  // within json::kMaxNumberDigits / kMaxExponentDigits and a double's range
};

inline std::vector<HostileNumber> hostileNumbers() {
  const std::string digits400(400, '7');
  return {
      // The crash (ten fraction digits) and what parsed before it (nine).
      {"0.0000000001e-2147483639", false},
      {"0.000000001e-2147483639", false},
      // The exponent at and around the int limits, both signs.
      {"1e-2147483648", false},
      {"1e-2147483649", false},
      {"-1e-2147483647", false},
      {"1e2147483647", false},
      {"1e+2147483648", false},
      {"1E-99999", false},
      // Hundreds of digits before the exponent.
      {digits400, false},
      {"0." + digits400, false},
      {"-" + digits400 + "e-5", false},
      {"0." + digits400 + "e-2147483639", false},
      // Beyond a double: too large is refused, too small rounds to zero.
      {"1e309", false},
      {"-1e309", false},
      {"1e-400", true},
      {"-1e-400", true},
      // Within every limit.
      {"-0", true},
      {"-0.0", true},
      {"0e54", true},
      {"4.9e-324", true},
      {"1.7976931348623157e308", true},
      {"2147483648", true},
      {"-2147483649", true},
      {"18446744073709551616", true},
      {"-9223372036854775809", true},
      {"1" + std::string(99, '0'), true},
      {"1e9999", false},  // four exponent digits, but beyond a double
      {"1e-9999", true},
  };
}

}  // namespace eq::test
