#include "dispatcher/webhook.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>

#include "common/crypto.h"
#include "tests/unit/hostile_numbers.h"

using namespace eq;
using namespace eq::dispatch;


BOOST_AUTO_TEST_SUITE(webhook)

BOOST_AUTO_TEST_CASE(service_signature_keys_with_the_printed_secret) {
  std::string secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  std::string body = R"({"task_id":"tsk_1"})";
  BOOST_TEST(serviceSignature(secret, body) ==
             "sha256=" + crypto::hex(crypto::hmacSha256(secret, body)));
}

// The example of the Standard Webhooks specification's reference libraries.
BOOST_AUTO_TEST_CASE(standard_signature_matches_the_spec_example) {
  std::string sig = standardSignature("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
                                      1614265330, R"({"test": 2432232314})");
  BOOST_TEST(sig == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
  BOOST_TEST(standardSignature("not-a-secret", "id", 1, "x") == "");
}

BOOST_AUTO_TEST_CASE(body_has_every_field_of_product_6) {
  TaskRecord t;
  t.task_id = "tsk_1";
  t.request_id = "req_1";
  t.mode = "fast";
  t.status = TaskStatus::kSucceeded;
  t.result_json = R"({"replies":[{"text":"hi","score":0.9,"eq_analysis":"x"}],"tokens_used":7})";
  t.created_at = 1000;
  t.finished_at = 2000;
  std::string body = webhookBody(t, "task.succeeded", 42);
  for (const char* field : {"\"event\":\"task.succeeded\"", "\"task_id\":\"tsk_1\"",
                            "\"status\":\"succeeded\"", "\"mode\":\"fast\"",
                            "\"request_id\":\"req_1\"", "\"replies\":[{\"text\":\"hi\"",
                            "\"tokens_used\":7", "\"error\":null", "\"created_at\":",
                            "\"finished_at\":", "\"timestamp\":42"}) {
    BOOST_TEST(body.find(field) != std::string::npos, field);
  }
}

BOOST_AUTO_TEST_CASE(headers_carry_both_signatures_and_the_delivery_id) {
  WebhookRequest req;
  req.secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  req.body = R"({"timestamp":1614265330})";
  req.delivery_id = "dlv_1";
  req.event = "task.failed";
  req.timestamp = 1614265330;
  std::vector<std::string> h = webhookHeaders(req);
  auto has = [&](const std::string& line) {
    return std::find(h.begin(), h.end(), line) != h.end();
  };
  BOOST_TEST(has("Content-Type: application/json; charset=utf-8"));
  BOOST_TEST(has("X-Service-Signature: " + serviceSignature(req.secret, req.body)));
  BOOST_TEST(has("X-Service-Event: task.failed"));
  BOOST_TEST(has("X-Service-Delivery: dlv_1"));
  BOOST_TEST(has("webhook-id: dlv_1"));
  BOOST_TEST(has("webhook-timestamp: 1614265330"));
  BOOST_TEST(has("webhook-signature: " +
                 standardSignature(req.secret, "dlv_1", 1614265330, req.body)));
  BOOST_TEST(has("Expect:"));
}

// During a secret rotation's overlap (docs/contract.md §9) webhook-signature
// carries one v1 entry per secret, space-separated, so a receiver holding
// either verifies; X-Service-Signature uses the new secret only.
BOOST_AUTO_TEST_CASE(a_rotation_overlap_signs_with_both_secrets) {
  WebhookRequest req;
  req.secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  req.previous_secret = "whsec_" + crypto::base64("the previous key of this account");
  req.body = R"({"event":"test"})";
  req.delivery_id = "dlv_2";
  req.event = "test";
  req.timestamp = 1700000000;
  std::vector<std::string> h = webhookHeaders(req);
  auto has = [&](const std::string& line) {
    return std::find(h.begin(), h.end(), line) != h.end();
  };
  BOOST_TEST(has("X-Service-Signature: " + serviceSignature(req.secret, req.body)));
  BOOST_TEST(has("webhook-signature: " +
                 standardSignature(req.secret, "dlv_2", 1700000000, req.body) + " " +
                 standardSignature(req.previous_secret, "dlv_2", 1700000000, req.body)));
}

BOOST_AUTO_TEST_CASE(a_test_event_body_names_its_delivery) {
  DeliveryRecord d;
  d.delivery_id = "dlv_3";
  d.created_at = 1700000000000;
  std::string body = testEventBody(d, 1700000001);
  BOOST_TEST(body == R"({"event":"test","delivery_id":"dlv_3","created_at":"2023-11-14T22:13:20.000Z","timestamp":1700000001})");
}

// The stored result is read back through the guarded reader: one that
// holds a number past its limits is sent without replies, never a crash.
BOOST_AUTO_TEST_CASE(a_stored_result_with_a_hostile_number_is_not_read) {
  for (const eq::test::HostileNumber& n : eq::test::hostileNumbers()) {
    TaskRecord t;
    t.task_id = "tsk_1";
    t.mode = "fast";
    t.status = TaskStatus::kSucceeded;
    t.result_json = R"({"replies":[{"text":"hi","score":)" + n.text + R"(,"eq_analysis":"x"}]})";
    std::string body = webhookBody(t, "task.succeeded", 42);
    BOOST_TEST((body.find(R"("text":"hi")") != std::string::npos) == n.parses, n.text.substr(0, 40));
  }
}

BOOST_AUTO_TEST_SUITE_END()
