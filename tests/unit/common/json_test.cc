// json::parse and json::readNumber: the one reader every process uses, with
// the numbers that crashed RapidJSON 1.1's own conversion (issue 27).
#include "common/json.h"

#include <rapidjson/document.h>

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>

#include "common/messages.h"
#include "tests/unit/hostile_numbers.h"

using namespace eq;

namespace {

bool mentions(const std::string& msg, const std::string& what) {
  return msg.find(what) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(json_numbers)

BOOST_AUTO_TEST_CASE(hostile_numbers_are_read_or_refused_naming_their_field) {
  for (const test::HostileNumber& n : test::hostileNumbers()) {
    BOOST_TEST_CONTEXT("number " << n.text.substr(0, 40)) {
      // The same number as a member, deep in arrays and objects, in an
      // array at the top, and alone: each is read or refused the same way.
      struct Shape {
        std::string body, field;
      };
      for (const Shape& shape : {Shape{R"({"reply_count":)" + n.text + "}", "field reply_count"},
                                 Shape{R"({"a":[{"b":{"c":)" + n.text + "}}]}", "field a.b.c"},
                                 Shape{"[1,2," + n.text + "]", "request body"},
                                 Shape{n.text, "request body"}}) {
        rapidjson::Document doc;
        Status s = json::parse(shape.body, &doc, 8);
        BOOST_TEST(s.isOk() == n.parses, shape.body.substr(0, 60) << ": " << s.msg());
        if (!s.isOk()) {
          BOOST_TEST(s.code() == 400);
          BOOST_TEST(mentions(s.msg(), shape.field), s.msg());
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(integers_keep_the_kinds_rapidjson_gave_them) {
  // Our conversion must answer IsInt(), IsUint64() and friends as
  // RapidJSON's did, or a reader that asks for an int would change its mind.
  for (const char* text : {"0", "-0", "1", "-1", "2147483647", "2147483648", "-2147483648",
                           "-2147483649", "4294967295", "4294967296", "9223372036854775807",
                           "9223372036854775808", "-9223372036854775808", "18446744073709551615",
                           "18446744073709551616", "-9223372036854775809"}) {
    BOOST_TEST_CONTEXT(text) {
      rapidjson::Document ours, theirs;
      BOOST_REQUIRE(json::parse(text, &ours, 1).isOk());
      theirs.Parse(text);  // safe: integers never reach the broken arithmetic
      BOOST_REQUIRE(!theirs.HasParseError());
      BOOST_TEST(ours.IsInt() == theirs.IsInt());
      BOOST_TEST(ours.IsUint() == theirs.IsUint());
      BOOST_TEST(ours.IsInt64() == theirs.IsInt64());
      BOOST_TEST(ours.IsUint64() == theirs.IsUint64());
      BOOST_TEST(ours.IsDouble() == theirs.IsDouble());
      BOOST_TEST((static_cast<const rapidjson::Value&>(ours) == theirs));
    }
  }
}

BOOST_AUTO_TEST_CASE(doubles_are_read_exactly) {
  auto read = [](const char* text) {
    rapidjson::Document d;
    BOOST_REQUIRE_MESSAGE(json::parse(text, &d, 1).isOk(), text);
    BOOST_REQUIRE(d.IsDouble());
    return d.GetDouble();
  };
  BOOST_TEST(read("0.1") == 0.1);
  BOOST_TEST(read("0.91") == 0.91);
  BOOST_TEST(read("-2.5e3") == -2500.0);
  BOOST_TEST(read("1.7976931348623157e308") == 1.7976931348623157e308);
  BOOST_TEST(read("4.9e-324") == 4.9e-324);
  BOOST_TEST(read("1e-400") == 0.0);
  BOOST_TEST(!std::signbit(read("1e-400")));
  BOOST_TEST(std::signbit(read("-1e-400")));
  BOOST_TEST(std::signbit(read("-0.0")));
}

BOOST_AUTO_TEST_CASE(the_limits_are_exact) {
  BOOST_TEST(json::readNumber(std::string(json::kMaxNumberDigits, '1')).isOk());
  BOOST_TEST(!json::readNumber(std::string(json::kMaxNumberDigits + 1, '1')).isOk());
  BOOST_TEST(json::readNumber("1." + std::string(json::kMaxNumberDigits - 1, '1')).isOk());
  BOOST_TEST(!json::readNumber("1." + std::string(json::kMaxNumberDigits, '1')).isOk());
  BOOST_TEST(json::readNumber("1e-" + std::string(json::kMaxExponentDigits, '1')).isOk());
  BOOST_TEST(!json::readNumber("1e-" + std::string(json::kMaxExponentDigits + 1, '1')).isOk());
  BOOST_TEST(!json::readNumber("1e" + std::string(json::kMaxExponentDigits + 1, '0')).isOk());
}

BOOST_AUTO_TEST_CASE(a_salvaged_task_id_survives_a_hostile_number) {
  for (const test::HostileNumber& n : test::hostileNumbers()) {
    std::string body = R"({"task_id":"tsk_01JD2Q3R4S5T6V7W8X9Y0Z1A2B","reply_count":)" + n.text +
                       R"(,"message":"hi)" "\xED\xB0\x80" R"("})";
    // Taken only when every number is within the limits: a body we refuse
    // to read names no task.
    std::string id = msg::salvageTaskId(body);
    BOOST_TEST((id == "tsk_01JD2Q3R4S5T6V7W8X9Y0Z1A2B") == n.parses, n.text.substr(0, 40));
  }
}

BOOST_AUTO_TEST_SUITE_END()
