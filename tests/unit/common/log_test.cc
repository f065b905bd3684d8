// Held log lines (log::holdLines): eq-api's loop writes the access-log lines
// of an iteration together; nothing is lost, reordered or cut, and a warning
// is never held back.
#include "common/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <string>
#include <thread>

using namespace eq;

namespace {

// Points stderr at a pipe for the life of the object; read() returns what
// reached it so far.
class CapturedStderr {
 public:
  CapturedStderr() {
    BOOST_REQUIRE(::pipe(fds_) == 0);
    BOOST_REQUIRE(::fcntl(fds_[0], F_SETFL, O_NONBLOCK) == 0);
    // Room for the whole test's output, so a held flush never blocks.
    ::fcntl(fds_[1], F_SETPIPE_SZ, 1 << 20);
    saved_ = ::dup(STDERR_FILENO);
    ::dup2(fds_[1], STDERR_FILENO);
  }
  ~CapturedStderr() {
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  std::string read() {
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds_[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
    return out;
  }

 private:
  int fds_[2] = {-1, -1};
  int saved_ = -1;
};

std::size_t count(const std::string& text, std::string_view what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Runs `body` on a thread of its own: holding is per thread, and the test
// runner's thread must not keep holding after the test.
template <typename F>
void onOwnThread(F body) {
  std::thread t(body);
  t.join();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(log_lines)

BOOST_AUTO_TEST_CASE(held_lines_wait_for_the_flush_and_keep_their_order) {
  CapturedStderr err;
  onOwnThread([&] {
    log::holdLines();
    log::info("first", {{"n", 1LL}});
    log::info("second", {{"n", 2LL}});
    BOOST_TEST(err.read().empty());
    log::flushHeld();
    std::string out = err.read();
    BOOST_TEST(count(out, "\n") == 2u);
    BOOST_TEST(out.find("\"msg\":\"first\"") < out.find("\"msg\":\"second\""));
    log::flushHeld();  // nothing left: writes nothing
    BOOST_TEST(err.read().empty());
  });
}

BOOST_AUTO_TEST_CASE(a_warning_goes_out_at_once_with_the_lines_before_it) {
  CapturedStderr err;
  onOwnThread([&] {
    log::holdLines();
    log::info("request", {{"status", 200LL}});
    log::warn("trouble");
    std::string out = err.read();
    BOOST_TEST(count(out, "\n") == 2u);
    BOOST_TEST(out.find("\"msg\":\"request\"") < out.find("\"msg\":\"trouble\""));
  });
}

BOOST_AUTO_TEST_CASE(a_thread_that_does_not_hold_writes_each_line_at_once) {
  CapturedStderr err;
  onOwnThread([&] {
    log::info("plain");
    BOOST_TEST(count(err.read(), "\"msg\":\"plain\"") == 1u);
  });
}

BOOST_AUTO_TEST_CASE(many_held_lines_flush_by_themselves_and_stay_whole) {
  CapturedStderr err;
  std::string out;
  constexpr int kLines = 2000;  // ~200 KiB: several 64 KiB flushes on the way
  onOwnThread([&] {
    log::holdLines();
    for (int i = 0; i < kLines; ++i) log::info("line", {{"i", static_cast<long long>(i)}});
    out = err.read();
    BOOST_TEST(!out.empty());  // the bound flushed some before the end
    log::flushHeld();
    out += err.read();
  });
  BOOST_TEST(count(out, "\n") == static_cast<std::size_t>(kLines));
  // Every line whole and in order.
  std::size_t at = 0;
  for (int i = 0; i < kLines; ++i) {
    std::size_t end = out.find('\n', at);
    BOOST_REQUIRE(end != std::string::npos);
    std::string line = out.substr(at, end - at);
    BOOST_REQUIRE_MESSAGE(line.front() == '{' && line.back() == '}', line);
    BOOST_REQUIRE(line.find("\"i\":" + std::to_string(i) + "}") != std::string::npos);
    at = end + 1;
  }
}

BOOST_AUTO_TEST_SUITE_END()
