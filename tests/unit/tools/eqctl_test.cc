#include "tools/eqctl_commands.h"

#include <rapidjson/document.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <sstream>

#include "common/timefmt.h"

using namespace eq;

namespace {

struct Fixture {
  std::string path;
  std::unique_ptr<Store> store;
  Fixture() {
    char tmpl[] = "/tmp/eq-ctl-XXXXXX";
    ::close(mkstemp(tmpl));
    path = tmpl;
    store = std::move(Store::open(path)).value();
  }
  ~Fixture() {
    store.reset();
    for (const char* s : {"", "-wal", "-shm"}) std::remove((path + s).c_str());
  }
  int run(std::vector<std::string> args, std::string* out, std::string* err = nullptr) {
    std::ostringstream o, e;
    tools::EqctlOptions opts;  // no webhook ranges allowed beyond public ones
    int rc = tools::runEqctl(*store, opts, args, o, e);
    *out = o.str();
    if (err != nullptr) *err = e.str();
    return rc;
  }
  // Runs a command that must succeed and print JSON; returns the document.
  rapidjson::Document json(std::vector<std::string> args) {
    std::string out, err;
    args.push_back("--json");
    int rc = run(args, &out, &err);
    BOOST_REQUIRE_MESSAGE(rc == 0, "eqctl failed (" << rc << "): " << err);
    rapidjson::Document d;
    d.Parse(out.c_str());
    BOOST_REQUIRE_MESSAGE(d.IsObject(), "not a JSON object: " << out);
    return d;
  }
  std::string createKey(std::string* api_key = nullptr) {
    rapidjson::Document d = json({"key", "create", "--name", "t", "--quota-fast", "5"});
    if (api_key != nullptr) *api_key = d["api_key"].GetString();
    return d["key_id"].GetString();
  }
};

std::string str(const rapidjson::Value& v) { return v.IsString() ? v.GetString() : "<not a string>"; }

}  // namespace

BOOST_AUTO_TEST_SUITE(eqctl_commands)

BOOST_AUTO_TEST_CASE(create_json_prints_key_once_and_list_hides_it) {
  Fixture f;
  std::string out;
  BOOST_REQUIRE(f.run({"key", "create", "--name", "demo", "--tier", "pro", "--quota-fast", "7",
                       "--json"}, &out) == 0);
  rapidjson::Document d;
  d.Parse(out.c_str());
  BOOST_REQUIRE(d.IsObject());
  std::string key = d["api_key"].GetString();
  std::string key_id = d["key_id"].GetString();
  BOOST_TEST(std::string(d["tier"].GetString()) == "pro");
  BOOST_TEST(std::string(d["webhook_secret"].GetString()).rfind("whsec_", 0) == 0);

  std::string listing;
  BOOST_REQUIRE(f.run({"key", "list"}, &listing) == 0);
  BOOST_TEST(listing.find(key) == std::string::npos);
  BOOST_TEST(listing.find(key.substr(0, 16)) != std::string::npos);

  std::string quota;
  BOOST_REQUIRE(f.run({"quota", "show", key_id, "--json"}, &quota) == 0);
  BOOST_TEST(quota.find("\"fast\":7") != std::string::npos);
  BOOST_TEST(quota.find("\"standard\":100") != std::string::npos);

  BOOST_REQUIRE(f.run({"quota", "set", key_id, "--perfect", "3"}, &quota) == 0);
  BOOST_TEST(f.store->quota(f.store->accountOfKey(key_id).value()).value().remaining.perfect == 3);

  BOOST_REQUIRE(f.run({"key", "revoke", key_id}, &out) == 0);
  BOOST_TEST(!f.store->authenticate(key, "production", nowMs()).value().has_value());
}

BOOST_AUTO_TEST_CASE(bad_usage_is_reported) {
  Fixture f;
  std::string out, err;
  BOOST_TEST(f.run({"key", "create"}, &out, &err) == 2);
  BOOST_TEST(err.find("--name") != std::string::npos);
  BOOST_TEST(f.run({"key", "create", "--name", "x", "--tier", "gold"}, &out, &err) == 2);
  BOOST_TEST(f.run({"quota", "show", "key_missing"}, &out, &err) == 1);
  BOOST_TEST(f.run({"frobnicate", "now"}, &out, &err) == 2);
}

BOOST_AUTO_TEST_CASE(rotate_prints_a_new_key_once_and_keeps_the_account) {
  Fixture f;
  std::string old_key;
  std::string old_id = f.createKey(&old_key);
  std::string account = f.store->accountOfKey(old_id).value();
  rapidjson::Document r = f.json({"key", "rotate", old_id});
  std::string new_id = str(r["key_id"]);
  std::string new_key = str(r["api_key"]);
  BOOST_TEST(new_key.rfind("eq_live_", 0) == 0u);
  BOOST_TEST(str(r["tier"]) == "free");
  BOOST_TEST(!r.HasMember("webhook_secret"));  // unchanged, so not printed again
  BOOST_TEST(f.store->accountOfKey(new_id).value() == account);
  BOOST_TEST(!f.store->authenticate(old_key, "production", nowMs()).value().has_value());
  BOOST_TEST(f.store->authenticate(new_key, "production", nowMs()).value().has_value());
  rapidjson::Document q = f.json({"quota", "show", new_id});
  BOOST_TEST(q["quota"]["fast"].GetInt() == 5);
  rapidjson::Document shown = f.json({"key", "show", old_id});
  BOOST_TEST(str(shown["status"]) == "revoked");
  BOOST_TEST(str(shown["rotated_to"]) == new_id);

  std::string out, err;
  BOOST_TEST(f.run({"key", "rotate", old_id}, &out, &err) == 1);  // already revoked
  BOOST_TEST(err.find("no active key") != std::string::npos);
  BOOST_TEST(f.run({"key", "rotate"}, &out, &err) == 2);
}

BOOST_AUTO_TEST_CASE(key_set_changes_rate_tier_webhook_and_expiry) {
  Fixture f;
  std::string api_key;
  std::string id = f.createKey(&api_key);
  rapidjson::Document d = f.json({"key", "set", id, "--rate", "5", "--tier", "ultra",
                                  "--webhook-url", "https://hooks.example/eq"});
  BOOST_TEST(d["rate_limit_per_min"].GetInt() == 5);
  BOOST_TEST(str(d["tier"]) == "ultra");
  BOOST_TEST(str(d["default_webhook_url"]) == "https://hooks.example/eq");
  BOOST_TEST(d["expires_at"].IsNull());
  BOOST_TEST(str(d["status"]) == "active");
  BOOST_TEST(f.store->authenticate(api_key, "production", nowMs()).value()->rate_limit_per_min ==
             5);

  d = f.json({"key", "set", id, "--no-webhook-url", "--expire-days", "2"});
  BOOST_TEST(d["default_webhook_url"].IsNull());
  BOOST_TEST(str(d["status"]) == "active");
  BOOST_TEST(str(d["expires_at"]).size() == 25u);

  d = f.json({"key", "set", id, "--expire-at", "2020-01-01T00:00:00Z"});
  BOOST_TEST(str(d["status"]) == "expired");
  BOOST_TEST(str(d["expires_at"]) == "2020-01-01T00:00:00+00:00");
  BOOST_TEST(!f.store->authenticate(api_key, "production", nowMs()).value().has_value());
  d = f.json({"key", "set", id, "--no-expiry"});
  BOOST_TEST(str(d["status"]) == "active");
  BOOST_TEST(f.store->authenticate(api_key, "production", nowMs()).value().has_value());

  std::string out, err;
  BOOST_TEST(f.run({"key", "set", id, "--webhook-url", "ftp://x.example/"}, &out, &err) == 2);
  BOOST_TEST(err.find("http") != std::string::npos);
  BOOST_TEST(f.run({"key", "set", id, "--webhook-url", "http://10.1.2.3/h"}, &out, &err) == 2);
  BOOST_TEST(err.find("non-public") != std::string::npos);
  BOOST_TEST(f.run({"key", "set", id, "--webhook-url", "https://a.example/", "--no-webhook-url"},
                   &out, &err) == 2);
  BOOST_TEST(f.run({"key", "set", id, "--expire-days", "1", "--no-expiry"}, &out, &err) == 2);
  BOOST_TEST(f.run({"key", "set", id, "--rate", "0"}, &out, &err) == 2);
  BOOST_TEST(f.run({"key", "set", id}, &out, &err) == 2);
  BOOST_TEST(f.run({"key", "set", "key_missing", "--rate", "3"}, &out, &err) == 1);
  BOOST_TEST(f.run({"key", "show", "key_missing"}, &out, &err) == 1);
}

BOOST_AUTO_TEST_CASE(list_shows_expired_keys_as_expired_and_never_the_key) {
  Fixture f;
  std::string api_key;
  std::string id = f.createKey(&api_key);
  std::string out;
  BOOST_REQUIRE(f.run({"key", "set", id, "--expire-at", "2021-06-01"}, &out) == 0);
  BOOST_REQUIRE(f.run({"key", "list"}, &out) == 0);
  BOOST_TEST(out.find("expired") != std::string::npos);
  BOOST_TEST(out.find(api_key) == std::string::npos);
}

BOOST_AUTO_TEST_CASE(quota_grant_adds_units_and_expire_at_sets_any_time) {
  Fixture f;
  std::string id = f.createKey();
  rapidjson::Document q = f.json({"quota", "grant", id, "--fast", "10", "--perfect", "1"});
  BOOST_TEST(q["quota"]["fast"].GetInt() == 15);
  BOOST_TEST(q["quota"]["standard"].GetInt() == 100);
  BOOST_TEST(q["quota"]["perfect"].GetInt() == 101);

  q = f.json({"quota", "set", id, "--standard", "0", "--expire-at", "2030-05-06T07:08:09Z"});
  BOOST_TEST(q["quota"]["fast"].GetInt() == 15);  // not named, not written
  BOOST_TEST(q["quota"]["standard"].GetInt() == 0);
  BOOST_TEST(str(q["expire_at"]) == "2030-05-06T07:08:09+00:00");

  std::string out, err;
  BOOST_REQUIRE(f.run({"quota", "grant", id, "--fast", "1", "--expire-at", "2020-01-01T00:00:00Z"},
                      &out, &err) == 0);
  BOOST_TEST(err.find("expired") != std::string::npos);  // a warning: units unusable
  BOOST_TEST(f.run({"quota", "grant", id}, &out, &err) == 2);
  BOOST_TEST(f.run({"quota", "grant", id, "--fast", "-1"}, &out, &err) == 2);
  BOOST_TEST(f.run({"quota", "grant", id, "--fast", "1", "--expire-days", "1", "--expire-at",
                    "2030-01-01"}, &out, &err) == 2);
  BOOST_TEST(f.run({"quota", "set", id, "--expire-at", "tomorrow"}, &out, &err) == 2);
  BOOST_TEST(f.run({"quota", "grant", "key_missing", "--fast", "1"}, &out, &err) == 1);
}

BOOST_AUTO_TEST_CASE(iso8601_accepts_utc_forms_and_refuses_the_rest) {
  int64_t ms = 0;
  BOOST_TEST(tools::parseIso8601("2026-01-31", &ms));
  BOOST_TEST(ms == 1'769'817'600'000);
  BOOST_TEST(tools::parseIso8601("2026-01-31T00:00:00Z", &ms));
  BOOST_TEST(ms == 1'769'817'600'000);
  BOOST_TEST(tools::parseIso8601("2026-01-31T08:00:00+08:00", &ms));
  BOOST_TEST(ms == 1'769'817'600'000);
  BOOST_TEST(tools::parseIso8601("2026-01-30T23:00:00.250-01:00", &ms));
  BOOST_TEST(ms == 1'769'817'600'250);
  for (const char* bad : {"", "2026-1-31", "2026-01-31T00:00:00", "2026-02-30", "2026- 1-01",
                          "2026-01-31T24:00:00Z", "2026-01-31 00:00:00Z", "2026-01-31T00:00:00Zx",
                          "yesterday"}) {
    BOOST_TEST(!tools::parseIso8601(bad, &ms), bad);
  }
}

// ---------------------------------------------------------------- deliveries

namespace {

// A succeeded task of the key's account with a delivery that failed after
// `attempts` attempts (the last one a 410); returns the delivery id.
std::string failedDelivery(Fixture& f, const std::string& key_id, const std::string& task_id,
                           int attempts) {
  std::string account = f.store->accountOfKey(key_id).value();
  TaskRecord t{task_id, account, key_id, "req_" + task_id, "fast", "", "http://hook.example/x",
               "", 0, "", nowMs(), 0, 0};
  BOOST_REQUIRE(f.store->createTask(t).isOk());
  BOOST_REQUIRE(f.store->markTaskSucceeded(task_id, R"({"replies":[]})", nowMs()).value());
  std::string id = f.store->createDelivery(task_id, t.webhook_url, "task.succeeded", nowMs())
                       .value().delivery_id;
  for (int i = 1; i <= attempts; ++i) {
    bool last = i == attempts;
    DeliveryAttempt a{nowMs(), last ? 410 : 0, 30 + i, last ? "receiver answered HTTP 410"
                                                              : "timed out after 10000 ms", 0};
    BOOST_REQUIRE(f.store->finishAttempt(id, a, last ? "failed" : "pending", nowMs()).value());
  }
  return id;
}

}  // namespace

BOOST_AUTO_TEST_CASE(delivery_list_show_and_replay) {
  Fixture f;
  std::string key_id = f.createKey();
  std::string failed = failedDelivery(f, key_id, "tsk_dl1", 3);
  std::string account = f.store->accountOfKey(key_id).value();
  TaskRecord ok{"tsk_dl2", account, key_id, "req_2", "fast", "", "http://h/ok", "", 0, "",
                nowMs(), 0, 0};
  BOOST_REQUIRE(f.store->createTask(ok).isOk());
  BOOST_REQUIRE(f.store->markTaskSucceeded("tsk_dl2", "{}", nowMs()).value());
  BOOST_REQUIRE(f.store->createDelivery("tsk_dl2", "http://h/ok", "task.succeeded", nowMs())
                    .isOk());

  std::string out, err;
  BOOST_REQUIRE(f.run({"delivery", "list"}, &out, &err) == 0);
  BOOST_TEST(out.find(failed) != std::string::npos);
  BOOST_TEST(out.find("tsk_dl2") != std::string::npos);
  BOOST_REQUIRE(f.run({"delivery", "list", "--failed"}, &out, &err) == 0);
  BOOST_TEST(out.find(failed) != std::string::npos);
  BOOST_TEST(out.find("tsk_dl2") == std::string::npos);
  BOOST_TEST(out.find("410") != std::string::npos);

  BOOST_REQUIRE(f.run({"delivery", "list", "--failed", "--json"}, &out, &err) == 0);
  rapidjson::Document list;
  list.Parse(out.c_str());
  BOOST_REQUIRE_MESSAGE(list.IsArray() && list.Size() == 1u, out);
  BOOST_TEST(str(list[0]["delivery_id"]) == failed);
  BOOST_TEST(str(list[0]["status"]) == "failed");
  BOOST_TEST(list[0]["attempts"].GetInt() == 3);
  BOOST_TEST(list[0]["last_status"].GetInt() == 410);
  BOOST_TEST(str(list[0]["last_error"]) == "receiver answered HTTP 410");
  BOOST_TEST(list[0]["next_attempt_at"].IsNull());
  BOOST_REQUIRE(f.run({"delivery", "list", "--task", "tsk_dl2", "--json"}, &out, &err) == 0);
  list.Parse(out.c_str());
  BOOST_REQUIRE(list.IsArray() && list.Size() == 1u);
  BOOST_TEST(str(list[0]["status"]) == "pending");
  BOOST_TEST(list[0]["next_attempt_at"].IsString());

  rapidjson::Document shown = f.json({"delivery", "show", failed});
  BOOST_TEST(str(shown["task_id"]) == "tsk_dl1");
  BOOST_REQUIRE(shown["attempt_log"].IsArray());
  BOOST_REQUIRE(shown["attempt_log"].Size() == 3u);
  BOOST_TEST(shown["attempt_log"][0]["attempt"].GetInt() == 1);
  BOOST_TEST(shown["attempt_log"][0]["http_status"].IsNull());
  BOOST_TEST(str(shown["attempt_log"][0]["error"]) == "timed out after 10000 ms");
  BOOST_TEST(shown["attempt_log"][2]["http_status"].GetInt() == 410);
  BOOST_TEST(shown["attempt_log"][2]["latency_ms"].GetInt() == 33);
  BOOST_REQUIRE(f.run({"delivery", "show", failed}, &out, &err) == 0);
  BOOST_TEST(out.find("timed out after 10000 ms") != std::string::npos);

  rapidjson::Document replayed = f.json({"delivery", "replay", failed});
  BOOST_TEST(str(replayed["delivery_id"]) == failed);
  BOOST_TEST(str(replayed["status"]) == "pending");
  BOOST_TEST(replayed["attempts"].GetInt() == 3);
  DeliveryRecord d = f.store->delivery(failed).value().value();
  BOOST_TEST(d.status == "pending");
  BOOST_TEST(d.schedule_offset == 3);
  BOOST_TEST(d.next_attempt_at <= nowMs());
  // Already pending: refused, nothing changes.
  BOOST_TEST(f.run({"delivery", "replay", failed}, &out, &err) == 1);
  BOOST_TEST(err.find("already pending") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(delivery_bad_usage_is_reported) {
  Fixture f;
  std::string out, err;
  BOOST_TEST(f.run({"delivery", "show"}, &out, &err) == 2);
  BOOST_TEST(f.run({"delivery", "replay", "a", "b"}, &out, &err) == 2);
  BOOST_TEST(f.run({"delivery", "show", "dlv_missing"}, &out, &err) == 1);
  BOOST_TEST(err.find("no delivery") != std::string::npos);
  BOOST_TEST(f.run({"delivery", "replay", "dlv_missing"}, &out, &err) == 1);
  BOOST_TEST(f.run({"delivery", "list", "--status", "lost"}, &out, &err) == 2);
  BOOST_TEST(f.run({"delivery", "list", "--failed", "--status", "failed"}, &out, &err) == 2);
  BOOST_TEST(f.run({"delivery", "list", "--limit", "0"}, &out, &err) == 2);
  BOOST_TEST(f.run({"delivery", "list", "--bogus", "1"}, &out, &err) == 2);
  BOOST_TEST(f.run({"delivery", "frob"}, &out, &err) == 2);
}

BOOST_AUTO_TEST_SUITE_END()
