// Force-included into every file of a fuzz build (CMakeLists.txt, EQ_FUZZ):
// RapidJSON checks its own invariants with RAPIDJSON_ASSERT, which is
// assert() by default and so vanishes under NDEBUG. A fuzzer must see a
// broken invariant as a crash, whatever the build type: the read outside
// the powers-of-ten table of CVE-2024-38517 trips `n <= 308` in Pow10 long
// before it reads memory ASan would notice.
#pragma once

#include <cstdio>
#include <cstdlib>

#define RAPIDJSON_ASSERT(x)                                                              \
  ((x) ? static_cast<void>(0)                                                            \
       : (std::fprintf(stderr, "%s:%d: RAPIDJSON_ASSERT(%s) failed\n", __FILE__, __LINE__, \
                       #x),                                                              \
          std::abort()))
