// The command line of the service binaries (eq-api, eq-worker,
// eq-dispatcher, eq-mcp): `--help` or `-h` prints the binary's usage on
// stdout and exits 0, and it is looked at before anything reads the
// environment, opens the database or connects to the broker, so it answers
// on a machine with none of them. An argument the binary does not take is a
// usage error: the problem and the usage on stderr, exit 2, the status
// scripts/run treats as a configuration error and does not restart.
//
// Header-only: each main() calls these first thing; nothing here keeps state.
#pragma once

#include <cstdio>
#include <cstring>
#include <string>

namespace eq::cli {

// True when any argument is `--help` or `-h`.
inline bool wantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) return true;
  }
  return false;
}

// Prints `text` on stdout and returns 0 (it was asked for), or, given a
// problem ("unknown argument: --x"), both on stderr and returns 2.
inline int usage(const char* text, const std::string& problem = "") {
  if (problem.empty()) {
    std::fputs(text, stdout);
    return 0;
  }
  std::fprintf(stderr, "%s\n\n%s", problem.c_str(), text);
  return 2;
}

}  // namespace eq::cli
