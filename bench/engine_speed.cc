// engine_speed: CPU time of the built-in engine on one 200-character Chinese
// message, for analyze() and for a fast-mode reply() (the work eq-worker does
// per job, without the broker), and on a crafted message of 2,000 code points. Prints the median and the 90th percentile
// over many iterations, measured with the thread CPU clock so that other
// processes on a shared machine do not inflate the numbers.
//
//   engine_speed [iterations]    (default 20000; EQ_ENGINE_DATA_DIR as for engine_eval)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "workers/engine/builtin/builtin_engine.h"

namespace {

using eq::engine::builtin::BuiltinEngine;

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double threadCpuMicros() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

size_t codePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Per-call CPU times in microseconds, sorted.
template <typename F>
std::vector<double> timeCalls(int iterations, F f) {
  std::vector<double> t;
  t.reserve(static_cast<size_t>(iterations));
  for (int i = 0; i < iterations; ++i) {
    const double start = threadCpuMicros();
    f();
    t.push_back(threadCpuMicros() - start);
  }
  std::sort(t.begin(), t.end());
  return t;
}

void print(const char* what, const std::vector<double>& t) {
  std::printf("%-18s median %7.1f us   p90 %7.1f us   (n=%zu)\n", what, t[t.size() / 2],
              t[t.size() * 9 / 10], t.size());
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20000;
  const char* env = std::getenv("EQ_ENGINE_DATA_DIR");
  const std::string dir = (env != nullptr && *env != '\0') ? env : "workers/engine/builtin/data";
  auto created =
      BuiltinEngine::create(readFile(dir + "/lexicon.tsv"), readFile(dir + "/phrases.tsv"),
                            readFile(dir + "/examples.tsv"), readFile(dir + "/situations.tsv"),
                            readFile(dir + "/situation_examples.tsv"));
  if (!created.isOk()) {
    std::fprintf(stderr, "engine_speed: %s (set EQ_ENGINE_DATA_DIR)\n",
                 created.status().msg().c_str());
    return 1;
  }
  const std::unique_ptr<BuiltinEngine> engine = std::move(created).value();

  // A long, realistic message with several clauses, a contrast, negation,
  // degree words and emoji, repeated up to 200 code points.
  const std::string clause =
      "今天开会的时候老板当着大家的面说我的方案不行，虽然我也知道有些地方没考虑好，"
      "但是真的好委屈啊😭，回家路上一直在想是不是我不适合这份工作，明天还要改，好焦虑！";
  std::string repeated;
  while (codePoints(repeated) < 200) repeated += clause;
  // Cut at exactly 200 code points (a cut between UTF-8 lead bytes).
  std::string message;
  size_t points = 0;
  for (unsigned char c : repeated) {
    if ((c & 0xC0) != 0x80 && ++points > 200) break;
    message += static_cast<char>(c);
  }

  eq::engine::AnalyzeInput ain;
  ain.message = message;
  eq::engine::ReplyInput rin;
  rin.message = message;
  rin.mode = eq::engine::Mode::kFast;
  rin.reply_count = 1;

  // Warm-up: page in the tables and the allocator's arenas.
  for (int i = 0; i < 200; ++i) {
    (void)engine->analyze(ain);
    (void)engine->reply(rin);
  }
  std::printf("message: %zu code points, %zu bytes\n", codePoints(message), message.size());
  print("analyze", timeCalls(iterations, [&] { (void)engine->analyze(ain); }));
  print("reply (fast, 1)", timeCalls(iterations, [&] { (void)engine->reply(rin); }));
  rin.mode = eq::engine::Mode::kPerfect;
  rin.reply_count = 5;
  print("reply (perfect, 5)", timeCalls(iterations, [&] { (void)engine->reply(rin); }));

  // A crafted message at the API's 2,000 code points: the parts of a gap cue
  // ("猫…走了") repeated, which once cost the cue reader 0.4 s (every match
  // of one part paired with every match of the other).
  std::string crafted;
  for (int i = 0; i < 666; ++i) crafted += "猫走了";
  rin.message = crafted;
  std::printf("crafted message: %zu code points\n", codePoints(crafted));
  print("reply (perfect, 5)", timeCalls(std::max(1, iterations / 100),
                                        [&] { (void)engine->reply(rin); }));
  return 0;
}
