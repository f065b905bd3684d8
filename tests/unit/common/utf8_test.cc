// Strict UTF-8 and what rests on it: the JSON parser refusing strings that
// decode to bad bytes, and every JSON string we write being valid UTF-8
// (issue 13, finding 1).
#include "common/utf8.h"

#include <boost/test/unit_test.hpp>

#include "common/json.h"
#include "common/messages.h"

using namespace eq;

BOOST_AUTO_TEST_SUITE(utf8_text)

BOOST_AUTO_TEST_CASE(well_formed_text_is_valid) {
  for (std::string_view s : {"", "hello", "你好，世界", "emoji \xF0\x9F\x98\x80", "\xC2\x80",
                             "\xEF\xBF\xBF", "\xF4\x8F\xBF\xBF", "\xE0\xA0\x80"}) {
    BOOST_TEST(utf8::isValid(s), s);
    BOOST_TEST(utf8::sanitize(s) == s);
  }
}

BOOST_AUTO_TEST_CASE(ill_formed_text_is_found_and_replaced) {
  struct Case {
    std::string_view in;
    std::size_t first_bad;
    std::string_view sanitized;
  };
  const Case cases[] = {
      // Lone low surrogate U+DC00: ED cannot be followed by B0, so each
      // byte is its own maximal subpart.
      {"a\xED\xB0\x80z", 1, "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDz"},
      {"\xED\xA0\x80", 0, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},  // high surrogate: 3 subparts
      {"\xC0\xAF", 0, "\xEF\xBF\xBD\xEF\xBF\xBD"},          // overlong '/'
      {"\xE0\x80\xAF", 0, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},  // overlong, 3 bytes
      {"ok\xFF", 2, "ok\xEF\xBF\xBD"},                      // never valid
      {"\xF4\x90\x80\x80", 0, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},  // > U+10FFFF
      {"\xE4\xBD", 0, "\xEF\xBF\xBD"},                      // truncated 你: one subpart
      {"\x80x", 0, "\xEF\xBF\xBDx"},                        // stray continuation
  };
  for (const Case& c : cases) {
    BOOST_TEST(!utf8::isValid(c.in));
    BOOST_TEST(utf8::firstInvalid(c.in) == c.first_bad);
    BOOST_TEST(utf8::sanitize(c.in) == c.sanitized);
    BOOST_TEST(utf8::isValid(utf8::sanitize(c.in)));
  }
}

BOOST_AUTO_TEST_CASE(parser_refuses_escapes_that_decode_to_bad_bytes) {
  rapidjson::Document doc;
  Status s = json::parse(R"({"mode":"standard","message":"hi\udc00"})", &doc, 16);
  BOOST_TEST(s.code() == 400);
  BOOST_TEST(s.msg().find("not valid Unicode") != std::string::npos, s.msg());
  rapidjson::Document key;
  BOOST_TEST(json::parse(R"({"\udfff":1})", &key, 16).code() == 400);
  // A proper pair is a character like any other.
  rapidjson::Document pair;
  BOOST_TEST(json::parse(R"({"message":"\ud83d\ude00"})", &pair, 16).isOk());
}

BOOST_AUTO_TEST_CASE(what_we_write_is_valid_utf8) {
  std::string env = json::envelope(400, "null", "not found: no route /\xFF\xFE");
  BOOST_TEST(utf8::isValid(env));
  rapidjson::Document doc;
  BOOST_REQUIRE(json::parse(env, &doc, 4).isOk());
  BOOST_TEST(std::string(doc["msg"].GetString()) == "not found: no route /\xEF\xBF\xBD\xEF\xBF\xBD");
}

BOOST_AUTO_TEST_CASE(an_unreadable_job_still_names_its_task) {
  // What an older eq-api enqueued for "hi\udc00": strict decoding refuses it.
  std::string body =
      "{\"v\":1,\"kind\":\"reply\",\"request_id\":\"req_1\",\"task_id\":"
      "\"tsk_01JD2Q3R4S5T6V7W8X9Y0Z1A2B\",\"mode\":\"standard\",\"message\":\"hi\xED\xB0\x80\"}";
  BOOST_TEST(!msg::decodeJob(body).isOk());
  BOOST_TEST(msg::salvageTaskId(body) == "tsk_01JD2Q3R4S5T6V7W8X9Y0Z1A2B");
  BOOST_TEST(msg::salvageTaskId("{\"task_id\":\"../etc\"}").empty());
  BOOST_TEST(msg::salvageTaskId("not json").empty());
}

// Names people choose are shown in the page, in logs and on an operator's
// terminal (issue 12 attack, finding 3).
BOOST_AUTO_TEST_CASE(display_controls_are_found_and_escaped) {
  for (std::string_view s : {"my key", "测试 key", "emoji \xF0\x9F\x98\x80", "", "tab-free"}) {
    BOOST_TEST(!utf8::hasDisplayControl(s), s);
    BOOST_TEST(utf8::escapeDisplayControls(s) == s);
  }
  BOOST_TEST(utf8::hasDisplayControl("a\tb"));
  BOOST_TEST(utf8::hasDisplayControl("bell\x07"));
  BOOST_TEST(utf8::hasDisplayControl("del\x7F"));
  BOOST_TEST(utf8::hasDisplayControl("c1 \xC2\x9B"));               // U+009B, CSI
  BOOST_TEST(utf8::hasDisplayControl("evil\xE2\x80\xAE" "exe.txt"));   // U+202E, RLO
  BOOST_TEST(utf8::hasDisplayControl("\xE2\x81\xA6isolate"));       // U+2066, LRI
  BOOST_TEST(utf8::hasDisplayControl("mark\xE2\x80\x8F"));          // U+200F, RLM
  BOOST_TEST(utf8::escapeDisplayControls("\x1B[2Jkey\xE2\x80\xAE") == "\\u{001B}[2Jkey\\u{202E}");
  // Not well-formed: sanitized first, so the output is always valid UTF-8.
  BOOST_TEST(utf8::escapeDisplayControls("a\xFF" "b") == "a\xEF\xBF\xBD" "b");
}

BOOST_AUTO_TEST_SUITE_END()
