// The client examples of examples/ against a real stack: the curl walkthrough
// runs end to end with the Python receiver as its webhook URL, the receiver
// verifies the dispatcher's signed webhook, and it refuses tampered, unsigned
// and stale copies of a genuine delivery.
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>

#include "common/crypto.h"
#include "tests/integration/stack.h"

using namespace eq::it;

namespace {

std::string sourceDir() {
  const char* s = std::getenv("EQ_SOURCE_DIR");
  BOOST_REQUIRE_MESSAGE(s != nullptr, "EQ_SOURCE_DIR is not set");
  return s;
}

// The value after `"name": "` in a JSON log line of the receiver.
std::string jsonField(const std::string& line, const std::string& name) {
  std::string needle = "\"" + name + "\": \"";
  size_t at = line.find(needle);
  if (at == std::string::npos) return "";
  at += needle.size();
  return line.substr(at, line.find('"', at) - at);
}

// How many times `needle` occurs in `text`.
size_t countOf(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The receiver's log once it holds `n` lines with `needle`. Each request is
// answered on a thread of its own, which logs after it answers, so a line can
// land after a later request's: waiting for the last one proves nothing of
// the others.
std::string logWith(const std::string& path, const std::string& needle, size_t n) {
  int64_t until = nowMs() + 10000;
  std::string log = readFile(path);
  while (countOf(log, needle) < n && nowMs() < until) {
    sleepMs(50);
    log = readFile(path);
  }
  return log;
}

// POSTs a webhook with the given (lower-case) headers to the receiver.
long deliver(const std::string& url, const std::map<std::string, std::string>& headers,
             const std::string& body) {
  std::vector<std::string> h;
  for (const auto& [name, value] : headers) h.push_back(name + ": " + value);
  return httpRequest("POST", url, h, body).status;
}

// The headers the dispatcher sends, signed here with `secret` for `id` at
// `timestamp`, the way dispatcher/webhook.cc signs them.
std::map<std::string, std::string> signHeaders(const std::string& secret, const std::string& id,
                                               int64_t timestamp, const std::string& body) {
  std::string key;
  BOOST_REQUIRE(eq::crypto::base64Decode(secret.substr(6), &key));
  std::string ts = std::to_string(timestamp);
  return {
      {"content-type", "application/json; charset=utf-8"},
      {"x-service-signature", "sha256=" + eq::crypto::hex(eq::crypto::hmacSha256(secret, body))},
      {"x-service-delivery", id},
      {"webhook-id", id},
      {"webhook-timestamp", ts},
      {"webhook-signature",
       "v1," + eq::crypto::base64(eq::crypto::hmacSha256(key, id + "." + ts + "." + body))}};
}

// Replaces the body's "timestamp": N with `timestamp`.
std::string withTimestamp(const std::string& body, int64_t timestamp) {
  size_t at = body.find("\"timestamp\":");
  BOOST_REQUIRE(at != std::string::npos);
  size_t end = body.find_first_of(",}", at);
  return body.substr(0, at) + "\"timestamp\":" + std::to_string(timestamp) + body.substr(end);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(examples)

BOOST_AUTO_TEST_CASE(walkthrough_and_python_receiver_verify_real_signed_webhooks) {
  Stack stack;
  const std::string src = sourceDir();
  int rc = -1;
  std::string created = stack.eqctl({"key", "create", "--name", "examples", "--json"}, &rc);
  BOOST_REQUIRE_MESSAGE(rc == 0, created);
  rapidjson::Document k;
  k.Parse(created.c_str());
  BOOST_REQUIRE(k.IsObject());
  const std::string api_key = k["api_key"].GetString();
  const std::string secret = k["webhook_secret"].GetString();

  Process receiver("receiver",
                   {"/usr/bin/python3", src + "/examples/webhook_receiver.py", "--port", "0"},
                   {{"EQ_WEBHOOK_SECRET", secret}}, stack.dir() + "/receiver.log");
  std::string listening = receiver.waitForLog("\"listening\"", 10000);
  const std::string hook_url = jsonField(listening, "listening");
  BOOST_REQUIRE_MESSAGE(hook_url.rfind("http://127.0.0.1:", 0) == 0, listening);

  // 1. The walkthrough, with the receiver as the async task's webhook.
  const std::string walk_log = stack.dir() + "/walkthrough.log";
  int walk_rc = -1;
  {
    Process walk("walkthrough", {"/bin/bash", src + "/examples/walkthrough.sh"},
                 {{"EQ_URL", stack.url("")},
                  {"EQ_API_KEY", api_key},
                  {"WEBHOOK_URL", hook_url},
                  {"EQ_POLL_SECONDS", "60"}},
                 walk_log);
    walk_rc = walk.wait(120000);
  }
  std::string transcript = readFile(walk_log);
  BOOST_REQUIRE_MESSAGE(walk_rc == 0, "walkthrough failed (" << walk_rc << "):\n" << transcript);
  size_t ok_at = transcript.find("walkthrough: ok task_id=");
  BOOST_REQUIRE_MESSAGE(ok_at != std::string::npos, transcript);
  std::string task_id = transcript.substr(ok_at + 24, transcript.find('\n', ok_at) - ok_at - 24);
  BOOST_TEST(task_id.rfind("tsk_", 0) == 0u);
  // Each step answered as documented: two reply calls charged fast units.
  BOOST_TEST(transcript.find("fast: 100 -> 98") != std::string::npos, transcript);
  BOOST_TEST(transcript.find("emotion: ") != std::string::npos);

  // The dispatcher's webhook reached the receiver and passed both checks.
  std::string accepted = receiver.waitForLog("\"task_id\": \"" + task_id + "\"", 30000);
  BOOST_TEST(jsonField(accepted, "verdict") == "accepted", accepted);
  BOOST_TEST(jsonField(accepted, "event") == "task.succeeded");
  BOOST_TEST(accepted.find("\"verified\": [\"x-service-signature\", \"standard-webhooks\"]") !=
                 std::string::npos,
             accepted);
  // And the service recorded the 2xx.
  int64_t until = nowMs() + 10000;
  std::string shown;
  while (nowMs() < until) {
    shown = stack.eqctl({"task", "show", task_id, "--json"});
    if (shown.find("\"status\":\"delivered\"") != std::string::npos) break;
    sleepMs(200);
  }
  BOOST_TEST(shown.find("\"status\":\"delivered\"") != std::string::npos, shown);
  BOOST_TEST(shown.find("\"last_status\":204") != std::string::npos, shown);

  // 2. A second genuine delivery, captured by the harness's receiver, is
  // replayed to the Python receiver as it came and in tampered forms.
  Key key{k["key_id"].GetString(), api_key};
  std::string capture_url = "http://127.0.0.1:" + std::to_string(stack.receiver.port()) + "/c";
  HttpResult async = post(
      stack, "/api/v1/reply/async",
      R"({"mode":"fast","message":"明天面试，好紧张","webhook_url":")" + capture_url + "\"}", key);
  BOOST_REQUIRE_MESSAGE(async.status == 200, async.body);
  BOOST_REQUIRE(stack.receiver.waitFor(1, 30000));
  const ReceivedWebhook genuine = stack.receiver.received().at(0);
  const std::string& body = genuine.body;
  std::map<std::string, std::string> headers;
  for (const char* h :
       {"content-type", "x-service-signature", "x-service-event", "x-service-delivery",
        "webhook-id", "webhook-timestamp", "webhook-signature"}) {
    BOOST_REQUIRE_MESSAGE(genuine.headers.count(h) == 1, "missing header " << h);
    headers[h] = genuine.headers.at(h);
  }

  BOOST_TEST(deliver(hook_url, headers, body) == 204);
  std::string line = receiver.waitForLog(headers["webhook-id"], 5000);
  BOOST_TEST(jsonField(line, "verdict") == "accepted", line);
  // At-least-once delivery: the same delivery again is acknowledged, not reprocessed.
  BOOST_TEST(deliver(hook_url, headers, body) == 204);
  BOOST_TEST(receiver.waitForLog("\"verdict\": \"duplicate\"", 5000).find(headers["webhook-id"]) !=
             std::string::npos);

  std::string tampered = body;
  size_t mode_at = tampered.find("\"fast\"");
  BOOST_REQUIRE(mode_at != std::string::npos);
  tampered.replace(mode_at, 6, "\"perfect\"");
  BOOST_TEST(deliver(hook_url, headers, tampered) == 401);

  auto bad_std = headers;
  std::string& sig = bad_std["webhook-signature"];
  sig[5] = sig[5] == 'A' ? 'B' : 'A';  // inside the base64 after "v1,"
  BOOST_TEST(deliver(hook_url, bad_std, body) == 401);
  auto bad_service = headers;
  bad_service["x-service-signature"] = "sha256=" + std::string(64, '0');
  BOOST_TEST(deliver(hook_url, bad_service, body) == 401);
  auto unsigned_copy = headers;
  unsigned_copy.erase("webhook-signature");
  BOOST_TEST(deliver(hook_url, unsigned_copy, body) == 401);
  auto no_id = headers;
  no_id.erase("webhook-id");
  BOOST_TEST(deliver(hook_url, no_id, body) == 400);

  // Correctly signed with the real secret, but ten minutes old: a replay.
  int64_t now_s = static_cast<int64_t>(std::time(nullptr));
  std::string old_body = withTimestamp(body, now_s - 600);
  BOOST_TEST(deliver(hook_url, signHeaders(secret, "dlv_stale", now_s - 600, old_body), old_body) ==
             400);
  // The same signing with a current timestamp passes, so the 400 above was
  // the timestamp and not this test's signing.
  std::string fresh_body = withTimestamp(body, now_s);
  BOOST_TEST(deliver(hook_url, signHeaders(secret, "dlv_fresh", now_s, fresh_body), fresh_body) ==
             204);
  BOOST_TEST(jsonField(receiver.waitForLog("dlv_fresh", 5000), "verdict") == "accepted");

  // Six refused: tampered, two bad signatures, unsigned, no id, stale.
  std::string log = logWith(stack.dir() + "/receiver.log", "\"rejected\"", 6);
  BOOST_TEST(countOf(log, "\"rejected\"") == 6u, log);
  BOOST_TEST(log.find("X-Service-Signature does not match") != std::string::npos, log);
  BOOST_TEST(log.find("webhook-signature does not match") != std::string::npos, log);
  BOOST_TEST(log.find("missing webhook-signature") != std::string::npos, log);
  BOOST_TEST(log.find("webhook-timestamp is 6") != std::string::npos, log);  // 600 s away
  // Nothing tampered was ever accepted: the walkthrough's, the captured one, dlv_fresh.
  BOOST_TEST(countOf(log, "\"accepted\"") == 3u, log);
}

// The developer center's test event (issue 28, item 3): {event: "test",
// delivery_id, created_at, timestamp}, signed like every delivery (here by
// this test, as dispatcher/webhook.cc does; portal/a_test_event_is_signed_...
// sends a real one). The receiver accepts it and logs it as a test, and
// still refuses a tampered, unsigned or stale one. No stack is needed.
BOOST_AUTO_TEST_CASE(python_receiver_accepts_a_signed_test_event_and_refuses_forged_ones) {
  char dir_tmpl[] = "/tmp/eq-examples-XXXXXX";
  BOOST_REQUIRE(::mkdtemp(dir_tmpl) != nullptr);
  const std::string dir = dir_tmpl;
  std::string key_bytes = eq::crypto::randomBytes(32);
  const std::string secret = "whsec_" + eq::crypto::base64(key_bytes);
  Process receiver(
      "receiver",
      {"/usr/bin/python3", sourceDir() + "/examples/webhook_receiver.py", "--port", "0"},
      {{"EQ_WEBHOOK_SECRET", secret}}, dir + "/receiver.log");
  const std::string hook_url = jsonField(receiver.waitForLog("\"listening\"", 10000), "listening");
  BOOST_REQUIRE(hook_url.rfind("http://127.0.0.1:", 0) == 0);

  int64_t now_s = static_cast<int64_t>(std::time(nullptr));
  auto testEvent = [](const std::string& id, int64_t timestamp) {
    return R"({"event":"test","delivery_id":")" + id +
           R"(","created_at":"2026-11-27T10:00:00.000Z","timestamp":)" + std::to_string(timestamp) +
           "}";
  };
  const std::string id = "dlv_01JTEST0000000000000000001";
  const std::string body = testEvent(id, now_s);
  auto headers = signHeaders(secret, id, now_s, body);
  headers["x-service-event"] = "test";

  BOOST_TEST(deliver(hook_url, headers, body) == 204);
  std::string line = receiver.waitForLog(id, 5000);
  BOOST_TEST(jsonField(line, "verdict") == "accepted", line);
  BOOST_TEST(jsonField(line, "event") == "test", line);
  BOOST_TEST(deliver(hook_url, headers, body) == 204);  // at-least-once: a duplicate
  BOOST_TEST(jsonField(receiver.waitForLog("\"duplicate\"", 5000), "delivery_id") == id);

  std::string tampered = body;
  tampered.replace(tampered.find("10:00:00"), 8, "11:00:00");
  BOOST_TEST(deliver(hook_url, headers, tampered) == 401);
  auto unsigned_copy = headers;
  unsigned_copy.erase("x-service-signature");
  BOOST_TEST(deliver(hook_url, unsigned_copy, body) == 401);
  // Signed with the right secret, but for another delivery than it names.
  const std::string other = "dlv_01JTEST0000000000000000002";
  auto mismatched = signHeaders(secret, other, now_s, body);
  BOOST_TEST(deliver(hook_url, mismatched, body) == 400);
  // Ten minutes old: a replay.
  const std::string stale_id = "dlv_01JTEST0000000000000000003";
  const std::string stale = testEvent(stale_id, now_s - 600);
  BOOST_TEST(deliver(hook_url, signHeaders(secret, stale_id, now_s - 600, stale), stale) == 400);
  // Four refused: tampered, unsigned, mismatched, stale.
  std::string log = logWith(dir + "/receiver.log", "\"rejected\"", 4);
  BOOST_TEST(countOf(log, "\"rejected\"") == 4u, log);
  BOOST_TEST(log.find("X-Service-Signature does not match") != std::string::npos, log);
  BOOST_TEST(log.find("missing X-Service-Signature") != std::string::npos, log);
  BOOST_TEST(log.find("delivery_id and webhook-id differ") != std::string::npos, log);
  BOOST_TEST(log.find("webhook-timestamp is 6") != std::string::npos, log);  // 600 s away
  BOOST_TEST(countOf(log, "\"accepted\"") == 1u, log);  // the genuine one, once
  receiver.terminate();
  std::remove((dir + "/receiver.log").c_str());
  ::rmdir(dir.c_str());
}

BOOST_AUTO_TEST_SUITE_END()
