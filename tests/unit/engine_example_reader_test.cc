// Unit tests of the example reader (workers/engine/builtin/example_reader.h):
// the naive Bayes reading of a message by the team's example posts, on
// examples written here so each property is visible in the test itself.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <numeric>
#include <string>

#include "workers/engine/builtin/example_reader.h"

namespace {

using eq::engine::builtin::ExampleReader;

// Labels as the engine orders its emotions.
constexpr size_t kJoy = 0;
constexpr size_t kAnger = 2;
constexpr size_t kSadness = 3;
constexpr size_t kNeutral = 7;

std::u32string u32(const char32_t* s) { return std::u32string(s); }

ExampleReader reader() {
  ExampleReader r;
  r.add(kJoy, u32(U"今天发奖金了请大家吃饭"));
  r.add(kJoy, u32(U"周末去海边玩得好开心"));
  r.add(kAnger, u32(U"外卖又送错了客服还挂我电话"));
  r.add(kAnger, u32(U"排了一小时队又被人插队"));
  r.add(kSadness, u32(U"外婆的老房子要拆了"));
  r.add(kSadness, u32(U"毕业以后大家就散了"));
  r.add(kNeutral, u32(U"明天上午九点开会"));
  r.add(kNeutral, u32(U"文件发你邮箱了"));
  r.finish();
  return r;
}

size_t argmax(const ExampleReader::Posterior& p) {
  return static_cast<size_t>(std::max_element(p.begin(), p.end()) - p.begin());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(example_reader)

BOOST_AUTO_TEST_CASE(a_message_reads_as_the_examples_it_resembles) {
  const ExampleReader r = reader();
  BOOST_TEST(r.examples() == 8u);
  const auto anger = r.read(u32(U"客服又挂我电话"));
  BOOST_TEST_REQUIRE(anger.has_value());
  BOOST_TEST(argmax(*anger) == kAnger);
  const auto sad = r.read(u32(U"老房子要拆了"));
  BOOST_TEST_REQUIRE(sad.has_value());
  BOOST_TEST(argmax(*sad) == kSadness);
  const auto plain = r.read(u32(U"明天九点开会"));
  BOOST_TEST_REQUIRE(plain.has_value());
  BOOST_TEST(argmax(*plain) == kNeutral);
}

BOOST_AUTO_TEST_CASE(the_reading_is_a_probability_over_every_class) {
  const auto p = reader().read(u32(U"海边的周末"));
  BOOST_TEST_REQUIRE(p.has_value());
  BOOST_TEST(std::accumulate(p->begin(), p->end(), 0.0) == 1.0, boost::test_tools::tolerance(1e-9));
  for (double v : *p) BOOST_TEST((v > 0.0 && v < 1.0));
  // Classes without examples (affection, anxiety...) share the smoothing
  // alike: none of them is favoured.
  BOOST_TEST((*p)[1] == (*p)[4], boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(nothing_to_go_on_is_no_reading) {
  const ExampleReader r = reader();
  // No character of these occurs in any example.
  BOOST_TEST(!r.read(u32(U"xyz")).has_value());
  BOOST_TEST(!r.read(u32(U"")).has_value());
  // Before finish() nothing is read.
  ExampleReader building;
  building.add(kJoy, u32(U"开心"));
  BOOST_TEST(!building.read(u32(U"开心")).has_value());
}

BOOST_AUTO_TEST_CASE(a_repeated_gram_counts_once_per_example) {
  // "哈哈哈哈" and twelve 哈 hold the same characters and pairs: however
  // long an example laughs, it is one example of 哈 and of 哈哈.
  auto build = [](const char32_t* laugh) {
    ExampleReader r;
    r.add(kJoy, u32(laugh));
    r.add(kAnger, u32(U"哈欠连天还要加班"));
    r.finish();
    return r;
  };
  const ExampleReader shortLaugh = build(U"哈哈哈哈");
  const ExampleReader longLaugh = build(U"哈哈哈哈哈哈哈哈哈哈哈哈");
  BOOST_TEST(shortLaugh.grams() == longLaugh.grams());
  const auto a = shortLaugh.read(u32(U"哈哈，加班"));
  const auto b = longLaugh.read(u32(U"哈哈，加班"));
  BOOST_TEST_REQUIRE((a.has_value() && b.has_value()));
  for (size_t c = 0; c < ExampleReader::kClasses; ++c) {
    BOOST_TEST((*a)[c] == (*b)[c], boost::test_tools::tolerance(1e-12));
  }
}

BOOST_AUTO_TEST_SUITE_END()
