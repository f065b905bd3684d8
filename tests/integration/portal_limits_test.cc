// The developer center's limits under attack (issue 25), over plain HTTP
// against real eq-api processes on a real database and broker: the
// playground's rate limit and in-flight bound, the client address behind
// trusted reverse proxies (EQ_TRUSTED_PROXIES), the registration limits,
// and Strict-Transport-Security.
//
// Every request here comes from 127.0.0.1; the cases that need several
// client addresses make 127.0.0.1 a trusted proxy and name the client in
// X-Forwarded-For, as nginx would.
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <future>
#include <string>
#include <vector>

#include "tests/integration/stack.h"

using namespace eq::it;

namespace {

constexpr const char* kPassword = "a long enough passphrase";

StackOptions portalOnly(std::map<std::string, std::string> env = {}) {
  StackOptions o;
  o.worker_modes = {};
  o.dispatcher = false;
  o.env = std::move(env);
  return o;
}

std::string jsonBody(std::initializer_list<std::pair<const char*, std::string>> fields) {
  rapidjson::Document d(rapidjson::kObjectType);
  for (const auto& [k, v] : fields) {
    d.AddMember(rapidjson::StringRef(k), rapidjson::Value(v.c_str(), d.GetAllocator()),
                d.GetAllocator());
  }
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  d.Accept(w);
  return sb.GetString();
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A browser of the developer center at `base`, optionally behind a proxy
// that reports it as `forwarded` ("X-Forwarded-For: ..." or "Forwarded: ...").
struct Client {
  explicit Client(std::string b, std::string fwd = "")
      : base(std::move(b)), forwarded(std::move(fwd)) {}
  std::string base;
  std::string forwarded;  // a whole header line, or empty
  std::string cookie;
  std::string csrf;

  std::vector<std::string> headers(bool post) const {
    std::vector<std::string> h;
    if (post) {
      h.push_back("Content-Type: application/json");
      h.push_back("Origin: " + base);
      if (!csrf.empty()) h.push_back("X-CSRF-Token: " + csrf);
    }
    if (!forwarded.empty()) h.push_back(forwarded);
    if (!cookie.empty()) h.push_back("Cookie: " + cookie);
    return h;
  }
  HttpResult post(const std::string& path, const std::string& body) const {
    return httpRequest("POST", base + path, headers(true), body);
  }
  HttpResult get(const std::string& path) const {
    return httpRequest("GET", base + path, headers(false));
  }
  void keepSession(const HttpResult& r) {
    auto it = r.headers.find("set-cookie");
    BOOST_REQUIRE_MESSAGE(it != r.headers.end(), "no Set-Cookie: " << r.status << " " << r.body);
    cookie = it->second.substr(0, it->second.find(';'));
    csrf = parse(r)["data"]["csrf"].GetString();
  }
  HttpResult signin(const std::string& email, const std::string& password) const {
    return post("/portal/api/signin", jsonBody({{"email", email}, {"password", password}}));
  }
  HttpResult registerAs(const std::string& email) const {
    return post("/portal/api/register", jsonBody({{"email", email}, {"password", kPassword}}));
  }
};

// A person invited with eqctl who set her password; `c` holds her session.
void invited(Stack& stack, Client& c, const std::string& email) {
  int rc = -1;
  std::string out = stack.eqctl({"account", "invite", email, "--json"}, &rc);
  BOOST_REQUIRE_MESSAGE(rc == 0, out);
  const std::string marker = "\"link\":\"";
  size_t at = out.find(marker);
  BOOST_REQUIRE(at != std::string::npos);
  at += marker.size();
  std::string link = out.substr(at, out.find('"', at) - at);
  HttpResult set = c.post("/portal/api/password/set",
                          jsonBody({{"token", link.substr(link.rfind('/') + 1)},
                                    {"password", kPassword}}));
  BOOST_REQUIRE_MESSAGE(set.status == 200, set.body);
  c.keepSession(set);
}

const std::string kReplyBody =
    R"({"mode":"fast","message":"今天被老板骂了，好难过","reply_count":1})";
const std::string kAnalyzeBody = R"({"message":"你怎么又迟到了！"})";

std::string xff(const std::string& list) { return "X-Forwarded-For: " + list; }

}  // namespace

BOOST_AUTO_TEST_SUITE(portal_limits)

// Issue 25, 1: a signed-in session looping on the playground meets the
// account's rate limit exactly as a key does (429, Retry-After, the
// X-RateLimit headers), analyze calls included; charged calls still charge.
BOOST_AUTO_TEST_CASE(playground_calls_count_against_the_account_rate_limit) {
  StackOptions o;
  o.worker_modes = {"fast"};  // fast also analyzes
  o.dispatcher = false;
  Stack stack(o);
  Client ann{stack.url("")};
  invited(stack, ann, "ann@example.com");
  HttpResult made = ann.post("/portal/api/keys/create", jsonBody({{"name", "k"}}));
  BOOST_REQUIRE_MESSAGE(made.status == 200, made.body);
  std::string key_id = parse(made)["data"]["key_id"].GetString();
  int rc = -1;
  std::string out = stack.eqctl({"key", "set", key_id, "--rate", "4"}, &rc);
  BOOST_REQUIRE_MESSAGE(rc == 0, out);

  // Replies and analyses alternate until one is refused: four pass in a
  // minute, so the fifth is refused, or at the latest the ninth should the
  // minute turn between them.
  std::vector<HttpResult> answers;
  int replies_ok = 0;
  for (int i = 0; i < 9 && (answers.empty() || answers.back().status != 429); ++i) {
    bool reply = i % 2 == 0;
    answers.push_back(ann.post(reply ? "/portal/api/playground/reply"
                                     : "/portal/api/playground/analyze",
                               reply ? kReplyBody : kAnalyzeBody));
    if (reply && answers.back().status == 200) ++replies_ok;
  }
  for (const HttpResult& r : answers) {
    BOOST_TEST((r.status == 200 || r.status == 429), r.status << " " << r.body);
    BOOST_TEST(r.headers.count("x-ratelimit-limit") == 1u);
    if (r.headers.count("x-ratelimit-limit") == 1u) {
      BOOST_TEST(r.headers.at("x-ratelimit-limit") == "4");
    }
  }
  BOOST_TEST(answers.size() >= 5u);
  const HttpResult& last = answers.back();
  BOOST_REQUIRE_MESSAGE(last.status == 429, "no playground call was refused in " << answers.size());
  BOOST_TEST(std::stoi(last.headers.at("retry-after")) > 0);
  BOOST_TEST(last.headers.at("x-ratelimit-remaining") == "0");
  BOOST_TEST(contains(parse(last)["msg"].GetString(), "rate limit exceeded"), last.body);
  // The refused call charged nothing: only the replies that passed did.
  BOOST_TEST(parse(ann.get("/portal/api/me"))["data"]["quota"]["fast"].GetInt64() ==
             100 - replies_ok);
}

// Issue 25, 1: at most two playground calls of one session in flight; the
// third is refused at once (429, Retry-After) without being charged, and
// the slots come back when the calls are answered.
BOOST_AUTO_TEST_CASE(at_most_two_playground_calls_in_flight_per_session) {
  // No worker: each sync call waits for its deadline, then 504.
  Stack stack(portalOnly({{"EQ_SYNC_DEADLINE_MS", "2500"}}));
  Client ann{stack.url("")};
  invited(stack, ann, "ann@example.com");

  auto call = [&ann](const std::string& path, const std::string& body) {
    return std::async(std::launch::async, [&ann, path, body] { return ann.post(path, body); });
  };
  auto first = call("/portal/api/playground/reply", kReplyBody);
  auto second = call("/portal/api/playground/analyze", kAnalyzeBody);
  sleepMs(700);  // both admitted and waiting for a worker
  int64_t sent = nowMs();
  HttpResult third = ann.post("/portal/api/playground/reply", kReplyBody);
  BOOST_TEST(third.status == 429, third.body);
  BOOST_TEST(nowMs() - sent < 1000, "the third is refused at once");
  BOOST_TEST(third.headers["retry-after"] == "1");
  BOOST_TEST(contains(parse(third)["msg"].GetString(), "at most 2 playground calls"), third.body);

  // Another session of the same person has slots of its own.
  Client tab{stack.url("")};
  HttpResult in = tab.signin("ann@example.com", kPassword);
  BOOST_REQUIRE_MESSAGE(in.status == 200, in.body);
  tab.keepSession(in);
  auto from_tab = std::async(std::launch::async,
                             [&tab] { return tab.post("/portal/api/playground/analyze",
                                                      kAnalyzeBody); });

  HttpResult a = first.get();
  HttpResult b = second.get();
  BOOST_TEST(a.status == 504, a.body);
  BOOST_TEST(b.status == 504, b.body);
  HttpResult t = from_tab.get();
  BOOST_TEST(t.status == 504, t.body);
  // Nothing of it stays charged (the timed-out call was refunded).
  BOOST_TEST(parse(ann.get("/portal/api/me"))["data"]["quota"]["fast"].GetInt64() == 100);
  // Answered: the session's slots are free again.
  auto again = call("/portal/api/playground/reply", kReplyBody);
  HttpResult also = ann.post("/portal/api/playground/analyze", kAnalyzeBody);
  BOOST_TEST(also.status == 504, also.body);
  BOOST_TEST(again.get().status == 504);
}

// Issue 25, 2: behind a trusted proxy each client has its own sign-in
// limit (the right-most untrusted address of X-Forwarded-For, or of
// Forwarded's for=); what a client writes left of that is never believed;
// the address is in the access log.
BOOST_AUTO_TEST_CASE(behind_a_trusted_proxy_each_client_address_has_its_own_sign_in_limit) {
  Stack stack(portalOnly({{"EQ_TRUSTED_PROXIES", "127.0.0.0/8, 10.9.0.0/16"}}));
  // Ten bad sign-ins from 198.51.100.7, each for another email (only the
  // address limit is met), each with another made-up hop on the left, and
  // through a second trusted proxy for half of them.
  for (int i = 0; i < 10; ++i) {
    std::string chain = "192.0.2." + std::to_string(i) + ", 198.51.100.7" +
                        (i % 2 == 0 ? ", 10.9.1.1" : "");
    Client c{stack.url(""), xff(chain)};
    HttpResult r = c.signin("u" + std::to_string(i) + "@example.com", "wrong password!!");
    BOOST_TEST(r.status == 401, i << ": " << r.body);
  }
  Client attacker{stack.url(""), xff("203.0.113.50, 198.51.100.7")};
  HttpResult limited = attacker.signin("new@example.com", "wrong password!!");
  BOOST_TEST(limited.status == 429, limited.body);
  BOOST_TEST(std::stoi(limited.headers["retry-after"]) > 0);
  // The same address said by Forwarded (RFC 7239) is the same client.
  Client rfc{stack.url(""), "Forwarded: for=192.0.2.1;proto=https, for=\"198.51.100.7:4711\""};
  BOOST_TEST(rfc.signin("x@example.com", "wrong password!!").status == 429);

  // Everyone else still signs in: another address, by either header.
  Client ann{stack.url(""), xff("198.51.100.8")};
  invited(stack, ann, "ann@example.com");
  HttpResult in = ann.signin("ann@example.com", kPassword);
  BOOST_TEST(in.status == 200, in.body);
  Client v6{stack.url(""), "Forwarded: for=\"[2001:db8::1]:80\""};
  BOOST_TEST(v6.signin("ann@example.com", kPassword).status == 200);
  Client direct{stack.url("")};  // the proxy's own address, no header: itself
  BOOST_TEST(direct.signin("ann@example.com", kPassword).status == 200);

  std::string log = readFile(stack.process("api-0")->logPath());
  BOOST_TEST(contains(log, "\"client\":\"198.51.100.7\""));
  BOOST_TEST(contains(log, "\"client\":\"2001:db8::1\""));
  BOOST_TEST(!contains(log, "\"client\":\"203.0.113.50\""));
}

// Issue 25, 2: from a peer that is not a trusted proxy (no
// EQ_TRUSTED_PROXIES, or one that does not name it), X-Forwarded-For and
// Forwarded are ignored: a client cannot step around its limit by writing
// them.
BOOST_AUTO_TEST_CASE(forwarding_headers_from_an_untrusted_peer_are_ignored) {
  Stack stack(portalOnly({{"EQ_TRUSTED_PROXIES", "10.0.0.0/8"}}));
  for (int i = 0; i < 10; ++i) {
    Client c{stack.url(""), i % 2 == 0 ? xff("198.51.100." + std::to_string(i))
                                       : "Forwarded: for=198.51.100." + std::to_string(i)};
    BOOST_TEST(c.signin("u" + std::to_string(i) + "@example.com", "wrong password!!").status ==
               401);
  }
  Client next{stack.url(""), xff("198.51.100.99")};
  BOOST_TEST(next.signin("v@example.com", "wrong password!!").status == 429);
  std::string log = readFile(stack.process("api-0")->logPath());
  BOOST_TEST(contains(log, "\"client\":\"127.0.0.1\""));
  BOOST_TEST(!contains(log, "\"client\":\"198.51.100."));
}

// Issue 25, 2: a malformed EQ_TRUSTED_PROXIES stops eq-api at start with
// exit code 2 and one line that names the variable.
BOOST_AUTO_TEST_CASE(a_malformed_trusted_proxies_list_stops_eq_api) {
  Stack stack(portalOnly());
  int n = 0;
  for (const char* bad :
       {"10.0.0.0/33", "nginx", "10.0.0.1,,fd00::/129", "10.0.0.0/8 192.168.0.0/16"}) {
    std::string name = "api-bad-" + std::to_string(++n);
    Process* p = stack.spawn(name, {"eq-api"}, {{"EQ_TRUSTED_PROXIES", bad}});
    BOOST_TEST(p->wait(10000) == 2, bad);
    std::string log = readFile(p->logPath());
    BOOST_TEST(contains(log, "EQ_TRUSTED_PROXIES"), log);
    // One error line (a sanitizer build adds a warning about the allocator).
    size_t errors = 0;
    for (size_t at = log.find("\"level\":\"error\""); at != std::string::npos;
         at = log.find("\"level\":\"error\"", at + 1)) {
      ++errors;
    }
    BOOST_TEST(errors == 1u, bad << ": " << log);
  }
}

// Issue 25, 3: registrations are limited per client address (5 a day by
// default) and overall (here 7 an hour), 429 with Retry-After; a
// successful registration counts like a refused one.
BOOST_AUTO_TEST_CASE(registration_is_limited_per_address_and_overall) {
  Stack stack(portalOnly({{"EQ_PORTAL_SIGNUP", "open"},
                          {"EQ_TRUSTED_PROXIES", "127.0.0.1"},
                          {"EQ_PORTAL_REGISTRATIONS_PER_HOUR", "7"}}));
  Client a{stack.url(""), xff("198.51.100.1")};
  for (int i = 0; i < 4; ++i) {
    HttpResult r = a.registerAs("a" + std::to_string(i) + "@example.com");
    BOOST_TEST(r.status == 200, i << ": " << r.body);
  }
  BOOST_TEST(a.registerAs("a0@example.com").status == 409);  // taken: counts too
  HttpResult sixth = a.registerAs("a5@example.com");
  BOOST_TEST(sixth.status == 429, sixth.body);
  int retry = std::stoi(sixth.headers["retry-after"]);
  BOOST_TEST(retry > 23 * 3600, "the day's limit lifts in a day: " << retry);
  BOOST_TEST(contains(parse(sixth)["msg"].GetString(), "too many registrations"), sixth.body);
  // The same /64 of IPv6 is one address.
  Client b{stack.url(""), xff("2001:db8:1:2::1")};
  BOOST_TEST(b.registerAs("b1@example.com").status == 200);
  Client b2{stack.url(""), xff("2001:db8:1:2::ffff")};
  BOOST_TEST(b2.registerAs("b2@example.com").status == 200);
  // Seven in the hour: the eighth is refused from any address, until the
  // hour is over.
  Client c{stack.url(""), xff("198.51.100.3")};
  HttpResult over = c.registerAs("c@example.com");
  BOOST_TEST(over.status == 429, over.body);
  retry = std::stoi(over.headers["retry-after"]);
  BOOST_TEST((retry > 3000 && retry <= 3600), "the hour's limit: " << retry);
  // Sign-ins are not registrations: they are not limited by them.
  Client in{stack.url(""), xff("198.51.100.1")};
  BOOST_TEST(in.signin("a1@example.com", kPassword).status == 200);
  int rc = -1;
  std::string people = stack.eqctl({"account", "list", "--json"}, &rc);
  BOOST_TEST(!contains(people, "a5@example.com"));
  BOOST_TEST(!contains(people, "c@example.com"));
}

// Issue 25, 6: with Secure cookies, every answer of the developer center
// (page, assets, JSON, errors, the redirect) carries
// Strict-Transport-Security; with EQ_PORTAL_INSECURE_COOKIES=1 none does,
// and the API's answers never do.
BOOST_AUTO_TEST_CASE(strict_transport_security_on_every_portal_answer_when_cookies_are_secure) {
  Stack stack(portalOnly());
  Client c{stack.url("")};
  std::vector<HttpResult> answers = {
      c.get("/"),
      c.get("/portal/"),
      c.get("/portal/app.js"),
      c.get("/portal/api/config"),
      c.get("/portal/api/me"),
      c.get("/portal/no-such-page"),
      c.signin("nobody@example.com", "wrong password!!"),
      httpRequest("POST", stack.url("/portal/api/signin"), {"Origin: http://evil.example"}, "{}"),
      httpRequest("DELETE", stack.url("/portal/api/me"))};
  for (const HttpResult& r : answers) {
    BOOST_TEST(r.headers.count("strict-transport-security") == 1u, r.status << " " << r.body);
    if (r.headers.count("strict-transport-security") == 1u) {
      BOOST_TEST(r.headers.at("strict-transport-security") == "max-age=31536000");
    }
  }
  BOOST_TEST(httpRequest("GET", stack.url("/healthz")).headers.count("strict-transport-security") ==
             0u);

  Process* p = stack.spawn("api-insecure", {"eq-api"}, {{"EQ_PORTAL_INSECURE_COOKIES", "1"}});
  std::string line = p->waitForLog("\"msg\":\"listening\"", 10000);
  size_t at = line.find("\"port\":");
  BOOST_REQUIRE(at != std::string::npos);
  std::string base = "http://127.0.0.1:" + std::to_string(std::stoi(line.substr(at + 7)));
  for (const char* path : {"/", "/portal/", "/portal/api/config", "/portal/api/me"}) {
    HttpResult r = httpRequest("GET", base + path);
    BOOST_TEST(r.headers.count("strict-transport-security") == 0u, path);
  }
}

BOOST_AUTO_TEST_SUITE_END()
