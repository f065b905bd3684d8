#include "api/validation.h"

#include "common/config.h"

#include <boost/test/unit_test.hpp>
#include <memory>
#include <string>
#include "tests/unit/hostile_numbers.h"

using eq::api::parseAnalyzeRequest;
using eq::api::parseReplyRequest;

namespace {

// The message of a rejection, or "" when the body was accepted.
const eq::net::CidrSet kNoneAllowed;

std::string rejection(const std::string& body, bool async = false,
                      const eq::net::CidrSet& allowed = kNoneAllowed) {
  auto r = parseReplyRequest(body, async, allowed);
  if (r.isOk()) return "";
  BOOST_TEST(r.status().code() == 400);
  return r.status().msg();
}

bool mentions(const std::string& msg, const std::string& what) {
  return msg.find(what) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(validation)

BOOST_AUTO_TEST_CASE(accepts_a_full_request_and_trims) {
  auto r = parseReplyRequest(
      R"({"mode":"fast","message":"  你好呀\u3000","context":" 刚认识 ","scene":"dating","reply_count":3})",
      false, kNoneAllowed);
  BOOST_REQUIRE(r.isOk());
  BOOST_TEST(r.value().mode == "fast");
  BOOST_TEST(r.value().message == "你好呀");
  BOOST_TEST(r.value().context == "刚认识");
  BOOST_TEST(r.value().scene == "dating");
  BOOST_TEST(r.value().reply_count == 3);
}

BOOST_AUTO_TEST_CASE(reply_count_defaults_to_one) {
  auto r = parseReplyRequest(R"({"mode":"perfect","message":"hi"})", false, kNoneAllowed);
  BOOST_REQUIRE(r.isOk());
  BOOST_TEST(r.value().reply_count == 1);
}

BOOST_AUTO_TEST_CASE(rejects_bad_json_and_non_objects) {
  BOOST_TEST(mentions(rejection("{"), "not valid JSON"));
  BOOST_TEST(mentions(rejection("[1]"), "JSON object"));
  BOOST_TEST(mentions(rejection(""), "not valid JSON"));
}

BOOST_AUTO_TEST_CASE(rejects_invalid_utf8) {
  std::string body = "{\"mode\":\"fast\",\"message\":\"\xff\xfe\"}";
  BOOST_TEST(mentions(rejection(body), "UTF-8"));
}

BOOST_AUTO_TEST_CASE(rejects_deep_nesting) {
  std::string body = std::string(100, '[') + std::string(100, ']');
  BOOST_TEST(mentions(rejection(body), "deeper"));
}

BOOST_AUTO_TEST_CASE(mode_is_required_and_enumerated) {
  BOOST_TEST(mentions(rejection(R"({"message":"hi"})"), "'mode' is required"));
  BOOST_TEST(mentions(rejection(R"({"mode":"slow","message":"hi"})"), "fast, standard, perfect"));
  BOOST_TEST(mentions(rejection(R"({"mode":1,"message":"hi"})"), "'mode' must be a string"));
}

BOOST_AUTO_TEST_CASE(message_is_required_non_blank_and_bounded) {
  BOOST_TEST(mentions(rejection(R"({"mode":"fast"})"), "'message' is required"));
  BOOST_TEST(mentions(rejection(R"({"mode":"fast","message":"  \u3000 "})"), "empty"));
  BOOST_TEST(mentions(rejection(R"({"mode":"fast","message":5})"), "must be a string"));
  // 2000 CJK characters (6000 bytes) are fine: the bound is in code points.
  std::string ok;
  for (int i = 0; i < 2000; ++i) ok += "好";
  BOOST_TEST(rejection(R"({"mode":"fast","message":")" + ok + "\"}") == "");
  BOOST_TEST(mentions(rejection(R"({"mode":"fast","message":")" + ok + "好\"}"), "at most 2000"));
}

BOOST_AUTO_TEST_CASE(context_is_bounded_at_4000) {
  std::string ctx(4001, 'a');
  BOOST_TEST(mentions(rejection(R"({"mode":"fast","message":"hi","context":")" + ctx + "\"}"),
                      "'context'"));
}

BOOST_AUTO_TEST_CASE(reply_count_must_be_an_integer_in_range) {
  for (const char* bad : {"0", "6", "-1", "2.5", "2.0", "\"2\"", "true", "[]"}) {
    std::string body = std::string(R"({"mode":"fast","message":"hi","reply_count":)") + bad + "}";
    BOOST_TEST(mentions(rejection(body), "'reply_count'"), bad);
  }
  BOOST_TEST(rejection(R"({"mode":"fast","message":"hi","reply_count":5})") == "");
}

BOOST_AUTO_TEST_CASE(scene_is_enumerated) {
  BOOST_TEST(mentions(rejection(R"({"mode":"fast","message":"hi","scene":"party"})"), "'scene'"));
  BOOST_TEST(rejection(R"({"mode":"fast","message":"hi","scene":"breakup"})") == "");
}

BOOST_AUTO_TEST_CASE(unknown_and_duplicate_fields_are_named) {
  BOOST_TEST(mentions(rejection(R"({"mode":"fast","message":"hi","reply_cnt":2})"),
                      "'reply_cnt' is not a known field"));
  BOOST_TEST(mentions(rejection(R"({"mode":"fast","mode":"perfect","message":"hi"})"),
                      "more than once"));
}

BOOST_AUTO_TEST_CASE(webhook_url_only_on_async_and_must_be_http) {
  std::string with_hook = R"({"mode":"fast","message":"hi","webhook_url":"https://example.com/h"})";
  BOOST_TEST(mentions(rejection(with_hook, false), "'webhook_url' is not a known field"));
  BOOST_TEST(rejection(with_hook, true) == "");
  BOOST_TEST(mentions(
      rejection(R"({"mode":"fast","message":"hi","webhook_url":"ftp://x/y"})", true), "http"));
  BOOST_TEST(mentions(
      rejection(R"({"mode":"fast","message":"hi","webhook_url":"https://u:p@x/"})", true),
      "user info"));
}

BOOST_AUTO_TEST_CASE(literal_non_public_webhook_hosts_are_refused_unless_allowed) {
  auto body = [](const std::string& url) {
    return R"({"mode":"fast","message":"hi","webhook_url":")" + url + "\"}";
  };
  for (const char* url : {"http://127.0.0.1/h", "http://127.0.0.1:9000/h", "https://10.1.2.3/",
                          "http://169.254.169.254/latest/meta-data", "http://[::1]:8080/h",
                          "http://[fe80::1]/", "http://0.0.0.0/", "http://[::ffff:192.168.0.1]/"}) {
    BOOST_TEST(mentions(rejection(body(url), true), "non-public"), url);
  }
  auto loopback = eq::net::CidrSet::parse("127.0.0.0/8").value();
  BOOST_TEST(rejection(body("http://127.0.0.1:9000/h"), true, loopback) == "");
  BOOST_TEST(mentions(rejection(body("http://10.0.0.1/h"), true, loopback), "non-public"));
  // Names are judged later, on the address actually connected to.
  BOOST_TEST(rejection(body("https://hooks.example.com/x"), true) == "");
  BOOST_TEST(rejection(body("HTTPS://hooks.example.com/x"), true) == "");
  BOOST_TEST(mentions(rejection(body("http://[::1/h"), true), "unclosed"));
}

BOOST_AUTO_TEST_CASE(analyze_takes_message_and_context_only) {
  BOOST_TEST(parseAnalyzeRequest(R"({"message":"我好开心"})").isOk());
  BOOST_TEST(!parseAnalyzeRequest(R"({"message":"hi","mode":"fast"})").isOk());
  BOOST_TEST(!parseAnalyzeRequest(R"({"context":"x"})").isOk());
}

BOOST_AUTO_TEST_CASE(idempotency_key_is_1_to_255_printable_ascii) {
  using eq::api::checkIdempotencyKey;
  BOOST_TEST(checkIdempotencyKey("8e0f6f0c-3b7a-4c55-9d1e-2f4a1b7c9d00").isOk());
  BOOST_TEST(checkIdempotencyKey(std::string(255, 'k')).isOk());
  BOOST_TEST(checkIdempotencyKey("order 42").isOk());  // inner spaces are printable
  eq::Status too_long = checkIdempotencyKey(std::string(256, 'k'));
  BOOST_TEST(too_long.code() == 400);
  BOOST_TEST(mentions(too_long.msg(), "Idempotency-Key"));
  BOOST_TEST(mentions(too_long.msg(), "255"));
  BOOST_TEST(checkIdempotencyKey("").code() == 400);
  BOOST_TEST(checkIdempotencyKey("tab\there").code() == 400);
  BOOST_TEST(checkIdempotencyKey("\xE4\xBD\xA0\xE5\xA5\xBD").code() == 400);  // 你好
}

// The developer center's same-origin rule (issue 12 attack, finding 4: DNS
// rebinding passed a rule that compared Origin with Host only).
BOOST_AUTO_TEST_CASE(portal_posts_come_from_the_configured_origin) {
  using eq::api::portalOriginAllowed;
  std::string origin, host;
  BOOST_REQUIRE(eq::parsePortalUrl("HTTPS://EQ.Example.com:443/portal/", &origin, &host).isOk());
  BOOST_TEST(origin == "https://eq.example.com");  // default port left out, as browsers do
  BOOST_TEST(host == "eq.example.com");
  BOOST_REQUIRE(eq::parsePortalUrl("http://127.0.0.1:8080", &origin, &host).isOk());
  BOOST_TEST(origin == "http://127.0.0.1:8080");
  BOOST_TEST(host == "127.0.0.1:8080");
  for (const char* bad : {"", "127.0.0.1:8080", "ftp://x", "https://", "https://u:p@x.example",
                          "https://a b.example"}) {
    std::string o, h;
    BOOST_TEST(!eq::parsePortalUrl(bad, &o, &h).isOk(), bad);
  }
  auto allowed = [&](const char* o, const char* h) {
    std::string so = o ? o : "", sh = h ? h : "";
    return portalOriginAllowed(o ? &so : nullptr, h ? &sh : nullptr, origin, host);
  };
  BOOST_TEST(allowed("http://127.0.0.1:8080", "127.0.0.1:8080"));
  // A rebinding page: its own name in both Origin and Host.
  BOOST_TEST(!allowed("http://rebind.example:8080", "rebind.example:8080"));
  BOOST_TEST(!allowed("http://127.0.0.1:8080", "rebind.example:8080"));
  BOOST_TEST(!allowed("http://evil.example", "127.0.0.1:8080"));
  BOOST_TEST(!allowed("null", "127.0.0.1:8080"));
  BOOST_TEST(!allowed(nullptr, "127.0.0.1:8080"));
  BOOST_TEST(!allowed("http://127.0.0.1:8080", nullptr));
  // Without EQ_PORTAL_URL: Origin must name the Host the request went to.
  std::string o = "http://localhost:8080", h = "localhost:8080";
  BOOST_TEST(portalOriginAllowed(&o, &h, "", ""));
  std::string evil = "http://evil.example";
  BOOST_TEST(!portalOriginAllowed(&evil, &h, "", ""));
}

// scripts/run sets EQ_PORTAL_URL=http://127.0.0.1:8080 and the README's
// examples say localhost:8080: both are this machine, and a sign-in from
// either must work. Only loopback spellings of the same scheme and port are
// added, each with the Origin naming the Host the request went to.
BOOST_AUTO_TEST_CASE(a_loopback_portal_takes_every_loopback_spelling_and_nothing_else) {
  using eq::api::portalOriginAllowed;
  auto allowedBy = [](const char* portal_url) {
    auto origin = std::make_shared<std::string>();
    auto host = std::make_shared<std::string>();
    BOOST_REQUIRE(eq::parsePortalUrl(portal_url, origin.get(), host.get()).isOk());
    return [origin, host](const std::string& o, const std::string& h) {
      return portalOriginAllowed(&o, &h, *origin, *host);
    };
  };
  auto local = allowedBy("http://127.0.0.1:8080");
  BOOST_TEST(local("http://127.0.0.1:8080", "127.0.0.1:8080"));
  BOOST_TEST(local("http://localhost:8080", "localhost:8080"));
  BOOST_TEST(local("http://LocalHost:8080", "localhost:8080"));
  BOOST_TEST(local("http://[::1]:8080", "[::1]:8080"));
  // Another port, another scheme, or a name that is not a loopback spelling.
  BOOST_TEST(!local("http://localhost:8081", "localhost:8081"));
  BOOST_TEST(!local("http://localhost", "localhost"));
  BOOST_TEST(!local("https://localhost:8080", "localhost:8080"));
  BOOST_TEST(!local("http://127.0.0.2:8080", "127.0.0.2:8080"));
  BOOST_TEST(!local("http://localhost.evil.example:8080", "localhost.evil.example:8080"));
  BOOST_TEST(!local("http://rebind.example:8080", "rebind.example:8080"));
  // Origin and Host must agree: a page of one name cannot post to another.
  BOOST_TEST(!local("http://localhost:8080", "127.0.0.1:8080"));
  BOOST_TEST(!local("http://rebind.example:8080", "localhost:8080"));
  BOOST_TEST(!local("http://localhost:8080", "rebind.example:8080"));
  BOOST_TEST(!local("http://[::1]:8080", "[::1]:8080:1"));
  BOOST_TEST(!local("null", "localhost:8080"));

  auto named = allowedBy("http://localhost:9000");
  BOOST_TEST(named("http://127.0.0.1:9000", "127.0.0.1:9000"));
  BOOST_TEST(named("http://[::1]:9000", "[::1]:9000"));
  auto v6 = allowedBy("http://[::1]");  // port 80, left out as browsers do
  BOOST_TEST(v6("http://localhost", "localhost"));
  BOOST_TEST(!v6("http://localhost:8080", "localhost:8080"));

  // A public portal widens nothing, loopback included.
  auto pub = allowedBy("https://eq.example.com");
  BOOST_TEST(pub("https://eq.example.com", "eq.example.com"));
  BOOST_TEST(!pub("https://localhost", "localhost"));
  BOOST_TEST(!pub("https://127.0.0.1", "127.0.0.1"));
}

// The crash of issue 27: the body is parsed before the key is checked, so
// every number an attacker can write must come back as a 400.
BOOST_AUTO_TEST_CASE(hostile_numbers_are_400_naming_the_field) {
  for (const eq::test::HostileNumber& n : eq::test::hostileNumbers()) {
    BOOST_TEST_CONTEXT(n.text.substr(0, 40)) {
      for (bool async : {false, true}) {
        std::string msg = rejection(R"({"mode":"fast","message":"hi","reply_count":)" + n.text + "}", async);
        BOOST_TEST(mentions(msg, "reply_count"), msg);
      }
      auto a = parseAnalyzeRequest(R"({"message":"hi","context":)" + n.text + "}");
      BOOST_REQUIRE(!a.isOk());
      BOOST_TEST(a.status().code() == 400);
      BOOST_TEST(mentions(a.status().msg(), "context"), a.status().msg());
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
