// A check that stops a fuzz run: libFuzzer treats abort() as a finding and
// saves the input that caused it. Used for the properties each target
// asserts beyond "does not crash" (an accepted request can be enqueued and
// read back, an answer is valid UTF-8, ...).
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "%s:%d: property violated: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)
