// `--help` on the service binaries (issue 28, item 6): eq-api, eq-worker,
// eq-dispatcher and eq-mcp print their usage on stdout and exit 0 with an
// empty environment (`env -i`: no EQ_INTERNAL_KEY, EQ_API_KEY, database or
// broker), every flag is in it, and an argument a binary does not take is a
// usage error (status 2, the usage on stderr). common/usage.h.
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/integration/stack.h"

namespace {

struct Run {
  int status = -1;
  std::string out, err;
};

// Runs BIN with `args` and nothing in its environment, in an empty folder
// (so a database created by mistake would show), capturing both streams.
Run runBare(const std::string& binary, const std::string& args) {
  char dir_tmpl[] = "/tmp/eq-help-XXXXXX";
  BOOST_REQUIRE(::mkdtemp(dir_tmpl) != nullptr);
  const std::string dir = dir_tmpl;
  const char* bin_dir = std::getenv("EQ_BIN_DIR");
  BOOST_REQUIRE_MESSAGE(bin_dir != nullptr, "EQ_BIN_DIR is not set");
  const std::string bin = std::string(bin_dir) + "/" + binary;
  std::string cmd = "cd '" + dir + "' && env -i '" + bin + "' " + args + " >out 2>err </dev/null";
  Run r;
  int rc = std::system(cmd.c_str());
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = eq::it::readFile(dir + "/out");
  r.err = eq::it::readFile(dir + "/err");
  std::system(("rm -f '" + dir + "/out' '" + dir + "/err'").c_str());
  BOOST_TEST(::rmdir(dir.c_str()) == 0, binary << " " << args << " left files in its folder");
  std::system(("rm -rf '" + dir + "'").c_str());
  return r;
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(help)

BOOST_AUTO_TEST_CASE(every_service_binary_answers_help_without_any_configuration) {
  const std::vector<std::string> binaries = {"eq-api", "eq-worker", "eq-dispatcher", "eq-mcp"};
  for (const std::string& b : binaries) {
    for (const char* flag : {"--help", "-h"}) {
      Run r = runBare(b, flag);
      BOOST_TEST(r.status == 0, b << " " << flag << ": status " << r.status << "\n" << r.err);
      BOOST_TEST(has(r.out, "usage: " + b), b << " " << flag << ":\n" << r.out);
      BOOST_TEST(has(r.out, "README.md"), b << ": the usage names where the configuration is");
      BOOST_TEST(r.err.empty(), b << " " << flag << " wrote on stderr:\n" << r.err);
    }
    Run bad = runBare(b, "--no-such-flag");
    BOOST_TEST(bad.status == 2, b << ": status " << bad.status);
    BOOST_TEST(bad.out.empty(), b << " answered a bad argument on stdout:\n" << bad.out);
    BOOST_TEST(has(bad.err, "unknown argument: --no-such-flag"), b << ":\n" << bad.err);
    BOOST_TEST(has(bad.err, "usage: " + b), b << ":\n" << bad.err);
  }
  Run worker = runBare("eq-worker", "--help");
  for (const char* flag : {"--mode", "--analyze", "--analyze-only", "EQ_ENGINE"}) {
    BOOST_TEST(has(worker.out, flag), "eq-worker --help lacks " << flag << ":\n" << worker.out);
  }
  // --help wins over the other arguments, valid or not.
  BOOST_TEST(runBare("eq-worker", "--mode fast --help").status == 0);
  BOOST_TEST(runBare("eq-api", "--bogus -h").status == 0);
  Run both = runBare("eq-worker", "--analyze-only --mode fast");
  BOOST_TEST(both.status == 2);
  BOOST_TEST(has(both.err, "--analyze-only takes no --mode"), both.err);
}

BOOST_AUTO_TEST_SUITE_END()
