#include <fcntl.h>
#include <rapidjson/document.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <map>
#include <sstream>

#include "common/timefmt.h"
#include "tests/unit/hostile_numbers.h"
#include "tests/unit/temp_db.h"
#include "tools/eqctl_commands.h"

using namespace eq;

namespace {

struct Fixture : test::TempDb {
  Fixture() : TempDb("ctl") {}
  // No webhook ranges allowed beyond public ones; sign-up by invitation.
  tools::EqctlOptions options;
  int run(std::vector<std::string> args, std::string* out, std::string* err = nullptr) {
    std::ostringstream o, e;
    int rc = tools::runEqctl(*store, options, args, o, e);
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

std::string str(const rapidjson::Value& v) {
  return v.IsString() ? v.GetString() : "<not a string>";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(eqctl_commands)

BOOST_AUTO_TEST_CASE(create_json_prints_key_once_and_list_hides_it) {
  Fixture f;
  std::string out;
  BOOST_REQUIRE(
      f.run({"key", "create", "--name", "demo", "--tier", "pro", "--quota-fast", "7", "--json"},
            &out) == 0);
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
  // The monthly volume as GET /api/v1/quota shows it (docs/contract.md §11):
  // 100,000 by default, null once lifted.
  rapidjson::Document shown = f.json({"quota", "show", key_id});
  BOOST_TEST(shown["monthly"]["limit"].GetInt64() == 100'000);
  BOOST_TEST(shown["monthly"]["used"].GetInt64() == 0);
  BOOST_TEST(shown["monthly"]["resets_at"].GetString() == iso8601Offset(nextMonthStartMs(nowMs())));
  BOOST_TEST(shown["tier"].IsString());
  BOOST_REQUIRE(f.run({"quota", "set", key_id, "--monthly", "0"}, &quota) == 0);
  BOOST_TEST(f.json({"quota", "show", key_id})["monthly"]["limit"].IsNull());

  BOOST_REQUIRE(f.run({"key", "revoke", key_id}, &out) == 0);
  BOOST_TEST(!f.store->authenticate(key, "production", nowMs()).value().has_value());
}

BOOST_AUTO_TEST_CASE(bad_usage_is_reported) {
  Fixture f;
  std::string out, err;
  BOOST_TEST(f.run({"key", "create"}, &out, &err) == 2);
  BOOST_TEST(err.find("--name") != std::string::npos);
  BOOST_TEST(f.run({"key", "create", "--name", "x", "--tier", "gold"}, &out, &err) == 2);
  BOOST_TEST(f.run({"quota", "show", "key_missing"}, &out, &err) == tools::kExitNotFound);
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
  BOOST_TEST(f.run({"key", "rotate", old_id}, &out, &err) == tools::kExitNotFound);  // revoked
  BOOST_TEST(err.find("no active key") != std::string::npos);
  BOOST_TEST(f.run({"key", "rotate"}, &out, &err) == 2);
}

// Issue 28: rotation without an outage. The old key keeps working through
// the overlap beside the new one (its expiry in key list), a second key of
// the same account comes from key create --account, and the webhook secret
// is shown and rotated with the same 24 h overlap as the developer center.
BOOST_AUTO_TEST_CASE(rotate_with_overlap_keeps_the_old_key_working_until_then) {
  Fixture f;
  std::string old_key;
  std::string old_id = f.createKey(&old_key);
  const int64_t before = nowMs();
  rapidjson::Document r = f.json({"key", "rotate", old_id, "--overlap", "2h"});
  const std::string new_id = str(r["key_id"]);
  const std::string new_key = str(r["api_key"]);
  BOOST_TEST(str(r["old_key_id"]) == old_id);
  int64_t until = 0;
  BOOST_REQUIRE(tools::parseIso8601(str(r["old_key_expires_at"]), &until));
  BOOST_TEST(until >= before + 2 * 3'600'000 - 1'000);
  BOOST_TEST(until <= nowMs() + 2 * 3'600'000);
  // Both keys work now; the old one no longer once the overlap is over.
  BOOST_TEST(f.store->authenticate(old_key, "production", nowMs()).value().has_value());
  BOOST_TEST(f.store->authenticate(new_key, "production", nowMs()).value().has_value());
  // (until is read at the second, as printed.)
  BOOST_TEST(!f.store->authenticate(old_key, "production", until + 1'000).value().has_value());
  BOOST_TEST(f.store->authenticate(new_key, "production", until + 1'000).value().has_value());
  rapidjson::Document shown = f.json({"key", "show", old_id});
  BOOST_TEST(str(shown["status"]) == "active");
  BOOST_TEST(str(shown["rotated_to"]) == new_id);
  std::string out, err;
  BOOST_REQUIRE(f.run({"key", "list"}, &out, &err) == 0);
  BOOST_TEST(out.find(iso8601Offset(until)) != std::string::npos, "the overlap's end is listed");
  // A key in its overlap is not rotated twice: that would leave two new keys.
  BOOST_TEST(f.run({"key", "rotate", old_id}, &out, &err) == tools::kExitConflict);
  BOOST_TEST(err.find(new_id) != std::string::npos);
  // The overlap never makes a key live longer than it would have.
  std::string short_id = f.createKey();
  f.json({"key", "set", short_id, "--expire-days", "1"});
  const int64_t short_expiry = f.store->keyDetails(short_id).value().key.expires_at;
  r = f.json({"key", "rotate", short_id, "--overlap", "7d"});
  int64_t kept = 0;
  BOOST_REQUIRE(tools::parseIso8601(str(r["old_key_expires_at"]), &kept));
  BOOST_TEST(kept / 1000 == short_expiry / 1000);
  // Durations it does not take.
  for (const char* bad : {"", "24", "h", "-1h", "1.5h", "31d", "0m", "99999999999999d"}) {
    BOOST_TEST(f.run({"key", "rotate", new_id, "--overlap", bad}, &out, &err) == 2, bad);
    BOOST_TEST(err.find("--overlap") != std::string::npos, bad);
  }
}

BOOST_AUTO_TEST_CASE(key_create_account_adds_a_key_to_an_existing_account) {
  Fixture f;
  std::string first = f.createKey();
  const std::string account = f.store->accountOfKey(first).value();
  rapidjson::Document d = f.json({"key", "create", "--account", account, "--name", "second"});
  BOOST_TEST(str(d["account_id"]) == account);
  BOOST_TEST(!d.HasMember("webhook_secret"));  // the account's, shown when it was made
  const std::string second = str(d["key_id"]);
  BOOST_TEST(f.store->authenticate(str(d["api_key"]), "production", nowMs()).value().has_value());
  // One account: the quota the first key sees is the second's.
  BOOST_TEST(f.json({"quota", "show", second})["quota"]["fast"].GetInt() == 5);
  // The first key goes; the second stays.
  std::string out, err;
  BOOST_REQUIRE(f.run({"key", "revoke", first}, &out, &err) == 0);
  BOOST_TEST(f.store->authenticate(str(d["api_key"]), "production", nowMs()).value().has_value());
  // What belongs to the account is not taken here; an unknown account is 3.
  BOOST_TEST(f.run({"key", "create", "--account", account, "--name", "x", "--quota-fast", "9"},
                   &out, &err) == 2);
  BOOST_TEST(err.find("--quota-fast belongs to the account") != std::string::npos);
  BOOST_TEST(f.run({"key", "create", "--account", account}, &out, &err) == 2);
  BOOST_TEST(f.run({"key", "create", "--account", "acc_missing", "--name", "x"}, &out, &err) ==
             tools::kExitNotFound);
}

BOOST_AUTO_TEST_CASE(webhook_secret_show_and_rotate_with_a_day_of_overlap) {
  Fixture f;
  rapidjson::Document created = f.json({"key", "create", "--name", "w"});
  const std::string key_id = str(created["key_id"]);
  const std::string first_secret = str(created["webhook_secret"]);
  const std::string account = f.store->accountOfKey(key_id).value();
  // By key or by account: the same account's secret.
  for (const std::string& id : {key_id, account}) {
    rapidjson::Document s = f.json({"webhook-secret", "show", id});
    BOOST_TEST(str(s["account_id"]) == account);
    BOOST_TEST(str(s["secret"]) == first_secret);
    BOOST_TEST(s["previous_secret"].IsNull());
  }
  const int64_t before = nowMs();
  rapidjson::Document r = f.json({"webhook-secret", "rotate", key_id});
  const std::string second_secret = str(r["secret"]);
  BOOST_TEST(second_secret.rfind("whsec_", 0) == 0u);
  BOOST_TEST(second_secret != first_secret);
  int64_t until = 0;
  BOOST_REQUIRE(tools::parseIso8601(str(r["previous_until"]), &until));
  BOOST_TEST(until >= before + Store::kSecretOverlapMs - 1'000);
  rapidjson::Document s = f.json({"webhook-secret", "show", account});
  BOOST_TEST(str(s["secret"]) == second_secret);
  BOOST_TEST(str(s["previous_secret"]) == first_secret);
  // The dispatcher signs with both meanwhile.
  auto secrets = f.store->signingSecrets(account, nowMs()).value();
  BOOST_TEST(secrets.first == second_secret);
  BOOST_TEST(secrets.second == first_secret);
  std::string out, err;
  BOOST_TEST(f.run({"webhook-secret", "show", "key_missing"}, &out, &err) == tools::kExitNotFound);
  BOOST_TEST(f.run({"webhook-secret", "rotate", "acc_missing"}, &out, &err) ==
             tools::kExitNotFound);
  BOOST_TEST(f.run({"webhook-secret", "show"}, &out, &err) == 2);
  BOOST_TEST(err.find("KEY_ID or ACCOUNT_ID") != std::string::npos);
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
  BOOST_TEST(f.run({"key", "set", "key_missing", "--rate", "3"}, &out, &err) ==
             tools::kExitNotFound);
  BOOST_TEST(f.run({"key", "show", "key_missing"}, &out, &err) == tools::kExitNotFound);
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
                    "2030-01-01"},
                   &out, &err) == 2);
  BOOST_TEST(f.run({"quota", "set", id, "--expire-at", "tomorrow"}, &out, &err) == 2);
  BOOST_TEST(f.run({"quota", "grant", "key_missing", "--fast", "1"}, &out, &err) ==
             tools::kExitNotFound);
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
  for (const char* bad :
       {"", "2026-1-31", "2026-01-31T00:00:00", "2026-02-30", "2026- 1-01", "2026-01-31T24:00:00Z",
        "2026-01-31 00:00:00Z", "2026-01-31T00:00:00Zx", "yesterday"}) {
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
  TaskRecord t{task_id,
               account,
               key_id,
               "req_" + task_id,
               "fast",
               TaskStatus::kQueued,
               "http://hook.example/x",
               "",
               0,
               "",
               nowMs(),
               0,
               0};
  BOOST_REQUIRE(f.store->createTask(t).isOk());
  BOOST_REQUIRE(f.store->markTaskSucceeded(task_id, R"({"replies":[]})", nowMs()).value());
  std::string id = f.store->createDelivery(task_id, t.webhook_url, "task.succeeded", nowMs())
                       .value()
                       .delivery_id;
  for (int i = 1; i <= attempts; ++i) {
    bool last = i == attempts;
    DeliveryAttempt a{nowMs(), last ? 410 : 0, 30 + i,
                      last ? "receiver answered HTTP 410" : "timed out after 10000 ms", 0};
    BOOST_REQUIRE(f.store
                      ->finishAttempt(
                          id, a, last ? DeliveryStatus::kFailed : DeliveryStatus::kPending, nowMs())
                      .value());
  }
  return id;
}

}  // namespace

BOOST_AUTO_TEST_CASE(delivery_list_show_and_replay) {
  Fixture f;
  std::string key_id = f.createKey();
  std::string failed = failedDelivery(f, key_id, "tsk_dl1", 3);
  std::string account = f.store->accountOfKey(key_id).value();
  TaskRecord ok{
      "tsk_dl2", account, key_id,  "req_2", "fast", TaskStatus::kQueued, "http://h/ok", "",
      0,         "",      nowMs(), 0,       0};
  BOOST_REQUIRE(f.store->createTask(ok).isOk());
  BOOST_REQUIRE(f.store->markTaskSucceeded("tsk_dl2", "{}", nowMs()).value());
  BOOST_REQUIRE(
      f.store->createDelivery("tsk_dl2", "http://h/ok", "task.succeeded", nowMs()).isOk());

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
  BOOST_TEST(d.status == DeliveryStatus::kPending);
  BOOST_TEST(d.schedule_offset == 3);
  BOOST_TEST(d.next_attempt_at <= nowMs());
  // Already pending: refused, nothing changes.
  BOOST_TEST(f.run({"delivery", "replay", failed}, &out, &err) == tools::kExitConflict);
  BOOST_TEST(err.find("already pending") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(delivery_bad_usage_is_reported) {
  Fixture f;
  std::string out, err;
  BOOST_TEST(f.run({"delivery", "show"}, &out, &err) == 2);
  BOOST_TEST(f.run({"delivery", "replay", "a", "b"}, &out, &err) == 2);
  BOOST_TEST(f.run({"delivery", "show", "dlv_missing"}, &out, &err) == tools::kExitNotFound);
  BOOST_TEST(err.find("no delivery") != std::string::npos);
  BOOST_TEST(f.run({"delivery", "replay", "dlv_missing"}, &out, &err) == tools::kExitNotFound);
  BOOST_TEST(f.run({"delivery", "list", "--status", "lost"}, &out, &err) == 2);
  BOOST_TEST(f.run({"delivery", "list", "--failed", "--status", "failed"}, &out, &err) == 2);
  BOOST_TEST(f.run({"delivery", "list", "--limit", "0"}, &out, &err) == 2);
  BOOST_TEST(f.run({"delivery", "list", "--bogus", "1"}, &out, &err) == 2);
  BOOST_TEST(f.run({"delivery", "frob"}, &out, &err) == 2);
}

// ---------------------------------------------------------------- tasks, stats, help, errors

namespace {

// A task of key_id's account created at created_at; started/finished (0: not
// reached) as a worker's events would record them.
void addTask(Fixture& f, const std::string& key_id, const std::string& task_id,
             const std::string& mode, int64_t created_at, int64_t started_at, int64_t finished_at,
             bool failed = false, const std::string& webhook = "") {
  std::string account = f.store->accountOfKey(key_id).value();
  TaskRecord t{
      task_id,    account, key_id, "req_" + task_id, mode, TaskStatus::kQueued, webhook, "", 0, "",
      created_at, 0,       0};
  BOOST_REQUIRE(f.store->createTask(t).isOk());
  if (started_at != 0) BOOST_REQUIRE(f.store->markTaskRunning(task_id, started_at).value());
  if (finished_at == 0) return;
  if (failed) {
    BOOST_REQUIRE(f.store->markTaskFailed(task_id, 500, "generation failed", finished_at).value());
  } else {
    std::string result = R"({"replies":[{"text":"抱抱你，今天辛苦了","score":0.91,)"
                         R"("eq_analysis":"共情"}],"request_id":"req_)" +
                         task_id + R"(","mode":")" + mode + R"(","tokens_used":12})";
    BOOST_REQUIRE(f.store->markTaskSucceeded(task_id, result, finished_at).value());
  }
}

// Parses the one JSON error line eqctl writes to stderr under --json.
void expectJsonError(const std::string& err, int exit_code, const std::string& kind) {
  rapidjson::Document d;
  d.Parse(err.c_str());
  BOOST_REQUIRE_MESSAGE(d.IsObject() && d.HasMember("error"), "not a JSON error: " << err);
  BOOST_TEST(d["error"]["exit_code"].GetInt() == exit_code);
  BOOST_TEST(str(d["error"]["kind"]) == kind);
  BOOST_TEST(std::string(d["error"]["message"].GetString()).size() > 0u);
  BOOST_TEST(err.find('\n') == err.size() - 1);  // exactly one line
}

}  // namespace

BOOST_AUTO_TEST_CASE(task_show_reports_times_result_error_and_delivery) {
  Fixture f;
  std::string key_id = f.createKey();
  int64_t t0 = nowMs() - 60'000;
  addTask(f, key_id, "tsk_ok", "fast", t0, t0 + 40, t0 + 1040, false, "https://hook.example/a");
  BOOST_REQUIRE(
      f.store->createDelivery("tsk_ok", "https://hook.example/a", "task.succeeded", nowMs())
          .isOk());
  addTask(f, key_id, "tsk_bad", "perfect", t0, 0, t0 + 5000, true);

  rapidjson::Document d = f.json({"task", "show", "tsk_ok"});
  BOOST_TEST(str(d["task_id"]) == "tsk_ok");
  BOOST_TEST(str(d["key_id"]) == key_id);
  BOOST_TEST(str(d["mode"]) == "fast");
  BOOST_TEST(str(d["status"]) == "succeeded");
  BOOST_TEST(str(d["created_at"]) == iso8601(t0));
  BOOST_TEST(d["queue_ms"].GetInt64() == 40);
  BOOST_TEST(d["run_ms"].GetInt64() == 1000);
  BOOST_TEST(d["total_ms"].GetInt64() == 1040);
  BOOST_REQUIRE(d["result"].IsObject());
  BOOST_TEST(str(d["result"]["replies"][0]["text"]) == "抱抱你，今天辛苦了");
  BOOST_TEST(d["result"]["tokens_used"].GetInt() == 12);
  BOOST_TEST(d["error"].IsNull());
  BOOST_TEST(str(d["webhook_url"]) == "https://hook.example/a");
  BOOST_REQUIRE(d["delivery"].IsObject());
  BOOST_TEST(str(d["delivery"]["status"]) == "pending");
  BOOST_TEST(str(d["delivery"]["delivery_id"]).rfind("dlv_", 0) == 0u);

  d = f.json({"task", "show", "tsk_bad"});
  BOOST_TEST(str(d["status"]) == "failed");
  BOOST_TEST(d["result"].IsNull());
  BOOST_TEST(d["error"]["code"].GetInt() == 500);
  BOOST_TEST(str(d["error"]["msg"]) == "generation failed");
  BOOST_TEST(d["queue_ms"].IsNull());  // never started: no queue or run time
  BOOST_TEST(d["run_ms"].IsNull());
  BOOST_TEST(d["total_ms"].GetInt64() == 5000);
  BOOST_TEST(d["delivery"].IsNull());
  BOOST_TEST(d["webhook_url"].IsNull());

  std::string out, err;
  BOOST_REQUIRE(f.run({"task", "show", "tsk_ok"}, &out, &err) == 0);
  BOOST_TEST(out.find("抱抱你，今天辛苦了") != std::string::npos);
  BOOST_TEST(out.find("queue 40, run 1000, total 1040") != std::string::npos);
  BOOST_TEST(out.find("eqctl delivery show dlv_") != std::string::npos);
  BOOST_REQUIRE(f.run({"task", "show", "tsk_bad"}, &out, &err) == 0);
  BOOST_TEST(out.find("500 generation failed") != std::string::npos);

  BOOST_TEST(f.run({"task", "show", "tsk_missing"}, &out, &err) == tools::kExitNotFound);
  BOOST_TEST(err.find("no task with id tsk_missing") != std::string::npos);
  BOOST_TEST(out.empty());
  BOOST_TEST(f.run({"task", "show"}, &out, &err) == tools::kExitUsage);
  BOOST_TEST(f.run({"task", "show", "a", "b"}, &out, &err) == tools::kExitUsage);
  BOOST_TEST(f.run({"task", "show", "tsk_ok", "--limit", "3"}, &out, &err) == tools::kExitUsage);
}

BOOST_AUTO_TEST_CASE(task_list_filters_by_key_status_mode_and_limit) {
  Fixture f;
  std::string old_id = f.createKey();
  int64_t t0 = nowMs() - 600'000;
  addTask(f, old_id, "tsk_a1", "fast", t0, t0 + 1, t0 + 100);
  // Rotation: the account's tasks made with the old key stay listed under the new one.
  std::string new_id = str(f.json({"key", "rotate", old_id})["key_id"]);
  addTask(f, new_id, "tsk_a2", "standard", t0 + 1000, t0 + 1001, t0 + 3000, true);
  addTask(f, new_id, "tsk_a3", "fast", t0 + 2000, 0, 0);
  std::string other = f.createKey();
  addTask(f, other, "tsk_b1", "perfect", t0 + 3000, t0 + 3001, 0);

  auto ids = [&](std::vector<std::string> args) {
    std::string out, err;
    args.push_back("--json");
    BOOST_REQUIRE_MESSAGE(f.run(args, &out, &err) == 0, err);
    rapidjson::Document d;
    d.Parse(out.c_str());
    BOOST_REQUIRE_MESSAGE(d.IsArray(), out);
    std::vector<std::string> v;
    for (const auto& t : d.GetArray()) v.push_back(t["task_id"].GetString());
    return v;
  };
  using V = std::vector<std::string>;
  BOOST_TEST(ids({"task", "list"}) == (V{"tsk_b1", "tsk_a3", "tsk_a2", "tsk_a1"}),
             boost::test_tools::per_element());
  BOOST_TEST(ids({"task", "list", "--key", new_id}) == (V{"tsk_a3", "tsk_a2", "tsk_a1"}),
             boost::test_tools::per_element());
  BOOST_TEST(ids({"task", "list", "--key", old_id, "--status", "failed"}) == V{"tsk_a2"},
             boost::test_tools::per_element());
  BOOST_TEST(ids({"task", "list", "--mode", "fast"}) == (V{"tsk_a3", "tsk_a1"}),
             boost::test_tools::per_element());
  BOOST_TEST(ids({"task", "list", "--status", "running"}) == V{"tsk_b1"},
             boost::test_tools::per_element());
  BOOST_TEST(ids({"task", "list", "--key", new_id, "--limit", "1"}) == V{"tsk_a3"},
             boost::test_tools::per_element());

  std::string out, err;
  BOOST_REQUIRE(f.run({"task", "list", "--key", new_id, "--json"}, &out, &err) == 0);
  rapidjson::Document d;
  d.Parse(out.c_str());
  const auto& a2 = d[1];
  BOOST_TEST(str(a2["key_id"]) == new_id);
  BOOST_TEST(str(a2["mode"]) == "standard");
  BOOST_TEST(str(a2["status"]) == "failed");
  BOOST_TEST(a2["total_ms"].GetInt64() == 2000);
  BOOST_TEST(a2["error"]["code"].GetInt() == 500);
  BOOST_TEST(a2["finished_at"].IsString());
  BOOST_TEST(d[0]["finished_at"].IsNull());
  BOOST_TEST(d[0]["total_ms"].IsNull());

  // The table: a header and one line per task, columns aligned.
  BOOST_REQUIRE(f.run({"task", "list", "--key", new_id}, &out, &err) == 0);
  std::istringstream lines(out);
  std::string header, first;
  std::getline(lines, header);
  std::getline(lines, first);
  BOOST_TEST(header.rfind("TASK_ID", 0) == 0u);
  BOOST_TEST(header.find("STATUS") == first.find("queued"));
  BOOST_TEST(std::count(out.begin(), out.end(), '\n') == 4);

  BOOST_TEST(f.run({"task", "list", "--status", "lost"}, &out, &err) == tools::kExitUsage);
  BOOST_TEST(f.run({"task", "list", "--mode", "slow"}, &out, &err) == tools::kExitUsage);
  BOOST_TEST(f.run({"task", "list", "--limit", "0"}, &out, &err) == tools::kExitUsage);
  BOOST_TEST(f.run({"task", "list", new_id}, &out, &err) == tools::kExitUsage);
  BOOST_TEST(f.run({"task", "list", "--key", "key_missing"}, &out, &err) == tools::kExitNotFound);
}

BOOST_AUTO_TEST_CASE(stats_counts_by_mode_and_outcome_with_latency_percentiles) {
  Fixture f;
  std::string key_id = f.createKey();
  int64_t now = nowMs();
  // 20 succeeded fast tasks with total latencies 100, 200, ..., 2000 ms and
  // a 10 ms queue wait each.
  for (int i = 1; i <= 20; ++i) {
    int64_t created = now - 30 * 60'000 + i;
    addTask(f, key_id, "tsk_f" + std::to_string(i), "fast", created, created + 10,
            created + i * 100, false, "https://hook.example/s");
  }
  addTask(f, key_id, "tsk_fail", "fast", now - 1000, now - 900, now - 100, true);
  addTask(f, key_id, "tsk_q", "standard", now - 1000, 0, 0);
  addTask(f, key_id, "tsk_r", "perfect", now - 1000, now - 500, 0);
  // Two hours old: outside the default window.
  addTask(f, key_id, "tsk_old", "fast", now - 2 * 3'600'000, now - 2 * 3'600'000 + 5,
          now - 2 * 3'600'000 + 99'000);
  BOOST_REQUIRE(
      f.store->createDelivery("tsk_f1", "https://hook.example/s", "task.succeeded", now).isOk());
  failedDelivery(f, key_id, "tsk_fd", 2);

  rapidjson::Document d = f.json({"stats"});
  BOOST_TEST(d["window"]["minutes"].GetInt() == 60);
  BOOST_TEST(str(d["latency_source"]).find("tasks table") != std::string::npos);
  const auto& fast = d["modes"]["fast"];
  // tsk_fd (from failedDelivery) is a succeeded fast task too, created now
  // with equal times: 22 fast tasks, 21 succeeded.
  BOOST_TEST(fast["tasks"].GetInt() == 22);
  BOOST_TEST(fast["succeeded"].GetInt() == 21);
  BOOST_TEST(fast["failed"].GetInt() == 1);
  BOOST_TEST(fast["queued"].GetInt() == 0);
  BOOST_REQUIRE(fast["total_ms"].IsObject());
  BOOST_TEST(fast["total_ms"]["samples"].GetInt() == 21);
  // Sorted: 0 (tsk_fd), 100, ..., 2000. Nearest rank: p50 = 11th = 1000,
  // p95 = 20th = 1900.
  BOOST_TEST(fast["total_ms"]["p50"].GetInt64() == 1000);
  BOOST_TEST(fast["total_ms"]["p95"].GetInt64() == 1900);
  BOOST_TEST(fast["total_ms"]["max"].GetInt64() == 2000);
  BOOST_TEST(fast["queue_ms"]["max"].GetInt64() == 100);  // tsk_fail waited 100 ms
  BOOST_TEST(fast["queue_ms"]["p50"].GetInt64() == 10);
  const auto& standard = d["modes"]["standard"];
  BOOST_TEST(standard["tasks"].GetInt() == 1);
  BOOST_TEST(standard["queued"].GetInt() == 1);
  BOOST_TEST(standard["total_ms"].IsNull());
  BOOST_TEST(d["modes"]["perfect"]["running"].GetInt() == 1);
  BOOST_TEST(d["modes"]["perfect"]["queue_ms"]["p50"].GetInt64() == 500);
  BOOST_TEST(d["deliveries"]["pending"].GetInt() == 1);
  BOOST_TEST(d["deliveries"]["failed"].GetInt() == 1);
  BOOST_TEST(d["deliveries"]["delivered"].GetInt() == 0);

  d = f.json({"stats", "--minutes", "180"});
  BOOST_TEST(d["modes"]["fast"]["tasks"].GetInt() == 23);
  BOOST_TEST(d["modes"]["fast"]["total_ms"]["max"].GetInt64() == 99'000);

  std::string out, err;
  BOOST_REQUIRE(f.run({"stats"}, &out, &err) == 0);
  BOOST_TEST(out.find("MODE") != std::string::npos);
  BOOST_TEST(out.find("TOTAL_P95") != std::string::npos);
  BOOST_TEST(out.find("failed 1") != std::string::npos);
  BOOST_TEST(out.find("Source:") != std::string::npos);
  BOOST_TEST(f.run({"stats", "--minutes", "0"}, &out, &err) == tools::kExitUsage);
  BOOST_TEST(f.run({"stats", "now"}, &out, &err) == tools::kExitUsage);
  BOOST_TEST(f.run({"stats", "--mode", "fast"}, &out, &err) == tools::kExitUsage);
}

BOOST_AUTO_TEST_CASE(every_command_has_help_and_takes_json) {
  Fixture f;
  const std::vector<std::vector<std::string>> commands = {{"key", "create"},
                                                          {"key", "list"},
                                                          {"key", "show"},
                                                          {"key", "revoke"},
                                                          {"key", "rotate"},
                                                          {"key", "set"},
                                                          {"backup"},
                                                          {"webhook-secret", "show"},
                                                          {"webhook-secret", "rotate"},
                                                          {"quota", "show"},
                                                          {"quota", "set"},
                                                          {"quota", "grant"},
                                                          {"task", "show"},
                                                          {"task", "list"},
                                                          {"delivery", "list"},
                                                          {"delivery", "show"},
                                                          {"delivery", "replay"},
                                                          {"stats"},
                                                          {"account", "invite"},
                                                          {"account", "list"},
                                                          {"account", "show"},
                                                          {"account", "disable"},
                                                          {"account", "reset-password"}};
  for (const auto& c : commands) {
    std::string name = c[0] + (c.size() > 1 ? " " + c[1] : "");
    std::vector<std::string> args = c;
    args.push_back("--help");
    std::string out, err;
    BOOST_TEST(f.run(args, &out, &err) == 0, name);
    BOOST_TEST(out.rfind("usage: eqctl " + name, 0) == 0u, name << ": " << out);
    BOOST_TEST(out.find("--json") != std::string::npos, name);
    BOOST_TEST(out.find("Exit codes") != std::string::npos, name);
    BOOST_TEST(err.empty(), name);
    std::vector<std::string> via_help = {"help"};
    via_help.insert(via_help.end(), c.begin(), c.end());
    std::string out2;
    BOOST_TEST(f.run(via_help, &out2, &err) == 0, name);
    BOOST_TEST(out2 == out, name);
  }
  std::string out, err;
  BOOST_REQUIRE(f.run({"--help"}, &out, &err) == 0);
  for (const char* s : {"key create", "task list", "delivery replay", "stats", "account invite",
                        "account reset-password"}) {
    BOOST_TEST(out.find(s) != std::string::npos, s);
  }
  // What the database keeps in clear, and why, is part of the help (issue 27):
  // an operator must not be told the webhook secret is hashed.
  BOOST_TEST(out.find("webhook secrets and message texts in clear") != std::string::npos);
  BOOST_REQUIRE(f.run({"key", "create", "--help"}, &out, &err) == 0);
  BOOST_TEST(out.find("the webhook secret in clear") != std::string::npos);
  BOOST_TEST(out.find("only their hashes") == std::string::npos);
  BOOST_REQUIRE(f.run({"task", "--help"}, &out, &err) == 0);
  BOOST_TEST(out.find("task list") != std::string::npos);
  BOOST_TEST(out.find("key create") == std::string::npos);  // only that noun's commands
  BOOST_TEST(tools::isHelpRequest({"key", "list", "-h"}));
  BOOST_TEST(!tools::isHelpRequest({"key", "create", "--name", "help"}));
  BOOST_TEST(f.run({}, &out, &err) == tools::kExitUsage);
  BOOST_TEST(err.find("usage: eqctl") != std::string::npos);

  // Every command's --json output is one JSON document on one line.
  std::string api_key;
  std::string key_id = f.createKey(&api_key);
  std::string dlv = failedDelivery(f, key_id, "tsk_h", 1);
  const std::vector<std::vector<std::string>> runs = {
      {"key", "list"},
      {"key", "show", key_id},
      {"key", "set", key_id, "--rate", "7"},
      {"quota", "show", key_id},
      {"quota", "set", key_id, "--fast", "9"},
      {"quota", "grant", key_id, "--fast", "1"},
      {"task", "show", "tsk_h"},
      {"task", "list"},
      {"delivery", "list"},
      {"delivery", "show", dlv},
      {"delivery", "replay", dlv},
      {"stats"},
      {"webhook-secret", "show", key_id},
      {"webhook-secret", "rotate", key_id},
      {"key", "rotate", key_id, "--overlap", "1h"},
      {"key", "create", "--name", "j"},
      {"account", "invite", "h@example.com"},
      {"account", "list"},
      {"account", "reset-password", "h@example.com"},
      {"account", "show", "h@example.com"},
      {"account", "disable", "h@example.com"}};
  // reset-password, show and disable need the person the invitation makes.
  auto useInvite = [&](const std::string& link) {
    std::string token = link.substr(link.rfind('/') + 1);
    BOOST_REQUIRE(f.store->usePortalLink(token, "scrypt$placeholder", nowMs()).isOk());
  };
  for (std::vector<std::string> args : runs) {
    args.push_back("--json");
    BOOST_TEST_CONTEXT(args[0] << " " << args[1]) {
      BOOST_REQUIRE(f.run(args, &out, &err) == 0);
      rapidjson::Document d;
      d.Parse(out.c_str());
      BOOST_TEST(!d.HasParseError());
      BOOST_TEST((d.IsObject() || d.IsArray()));
      BOOST_TEST(out.find('\n') == out.size() - 1);
      if (args[0] == "account" && args[1] == "invite") useInvite(str(d["link"]));
    }
  }
}

BOOST_AUTO_TEST_CASE(json_errors_are_one_line_on_stderr_with_distinct_exit_codes) {
  Fixture f;
  std::string key_id = f.createKey();
  std::string dlv = failedDelivery(f, key_id, "tsk_e", 1);
  BOOST_REQUIRE(f.store->replayDelivery(dlv, nowMs()).isOk());
  std::string out, err;

  BOOST_TEST(f.run({"key", "show", "key_missing", "--json"}, &out, &err) == tools::kExitNotFound);
  BOOST_TEST(out.empty());
  expectJsonError(err, 3, "not_found");
  BOOST_TEST(f.run({"task", "list", "--limit", "x", "--json"}, &out, &err) == tools::kExitUsage);
  expectJsonError(err, 2, "usage");
  BOOST_TEST(err.find("--limit") != std::string::npos);
  BOOST_TEST(f.run({"delivery", "replay", dlv, "--json"}, &out, &err) == tools::kExitConflict);
  expectJsonError(err, 4, "conflict");
  BOOST_TEST(err.find("already pending") != std::string::npos);
  BOOST_TEST(f.run({"frobnicate", "now", "--json"}, &out, &err) == tools::kExitUsage);
  expectJsonError(err, 2, "usage");

  // Without --json: text on stderr, the command's synopsis after a usage error.
  BOOST_TEST(f.run({"task", "list", "--limit", "x"}, &out, &err) == tools::kExitUsage);
  BOOST_TEST(err.rfind("eqctl: --limit", 0) == 0u);
  BOOST_TEST(err.find("usage: eqctl task list") != std::string::npos);
  BOOST_TEST(f.run({"key"}, &out, &err) == tools::kExitUsage);
  BOOST_TEST(err.find("key needs a command") != std::string::npos);
}

// The operator's view of the developer center's people (docs/contract.md §9):
// invitations make people, list and show report them with their account,
// quota and keys, disable stops them.
BOOST_AUTO_TEST_CASE(account_invite_list_show_and_disable) {
  Fixture f;
  std::string out, err;
  std::string key_id = f.createKey();
  auto join = [&](const std::vector<std::string>& invite) {
    rapidjson::Document d = f.json(invite);
    std::string link = str(d["link"]);
    BOOST_TEST(link.rfind("http://127.0.0.1:8080/portal/#/welcome/", 0) == 0u, link);
    BOOST_TEST(d["expires_at"].IsString());
    BOOST_REQUIRE(
        f.store->usePortalLink(link.substr(link.rfind('/') + 1), "scrypt$placeholder", nowMs())
            .isOk());
  };
  join({"account", "invite", "Ann@Example.com", "--tier", "pro"});
  join({"account", "invite", "ops@example.com", "--key", key_id});

  rapidjson::Document list;
  BOOST_REQUIRE(f.run({"account", "list", "--json"}, &out, &err) == 0);
  list.Parse(out.c_str());
  BOOST_REQUIRE(list.IsArray());
  BOOST_REQUIRE(list.Size() == 2u);
  std::map<std::string, std::string> account_of;  // email -> account_id
  for (const auto& p : list.GetArray()) account_of[str(p["email"])] = str(p["account_id"]);
  BOOST_TEST(account_of.count("ann@example.com") == 1u);  // emails are kept lower-cased
  BOOST_TEST(account_of["ops@example.com"] == f.store->accountOfKey(key_id).value());
  BOOST_TEST(account_of["ann@example.com"] != account_of["ops@example.com"]);
  for (const auto& p : list.GetArray()) {
    BOOST_TEST(str(p["status"]) == "active");
    BOOST_TEST(p["created_at"].IsString());
    BOOST_TEST(!p.HasMember("password_hash"));
  }
  BOOST_REQUIRE(f.run({"account", "list"}, &out, &err) == 0);
  BOOST_TEST(out.rfind("EMAIL", 0) == 0u);
  BOOST_TEST(out.find("ann@example.com") != std::string::npos);
  BOOST_TEST(out.find("placeholder") == std::string::npos);

  // An invited newcomer: the tier asked for, 100 units per mode, no keys yet.
  rapidjson::Document ann = f.json({"account", "show", "ann@example.com"});
  BOOST_TEST(str(ann["tier"]) == "pro");
  for (const char* m : {"fast", "standard", "perfect"}) {
    BOOST_TEST(ann["quota"][m].GetInt64() == 100, m);
  }
  BOOST_TEST(ann["keys"].Size() == 0u);
  // The account of an existing key: its key and its quota (fast was set to 5).
  rapidjson::Document ops = f.json({"account", "show", "OPS@example.com"});
  BOOST_REQUIRE(ops["keys"].Size() == 1u);
  BOOST_TEST(str(ops["keys"][0]["key_id"]) == key_id);
  BOOST_TEST(str(ops["keys"][0]["status"]) == "active");
  BOOST_TEST(ops["quota"]["fast"].GetInt64() == 5);
  BOOST_REQUIRE(f.run({"account", "show", "ops@example.com"}, &out, &err) == 0);
  BOOST_TEST(out.find("tier:") != std::string::npos);
  BOOST_TEST(out.find(key_id) != std::string::npos);

  // Disable: the person and every key of the account stop.
  rapidjson::Document off = f.json({"account", "disable", "ops@example.com"});
  BOOST_TEST(str(off["status"]) == "disabled");
  BOOST_TEST(str(off["keys"][0]["status"]) == "revoked");

  BOOST_TEST(f.run({"account", "show", "nobody@example.com", "--json"}, &out, &err) ==
             tools::kExitNotFound);
  expectJsonError(err, 3, "not_found");
  BOOST_TEST(f.run({"account", "reset-password", "nobody@example.com"}, &out, &err) ==
             tools::kExitNotFound);
  BOOST_TEST(f.run({"account", "show"}, &out, &err) == tools::kExitUsage);
  BOOST_TEST(f.run({"account", "invite", "not-an-email"}, &out, &err) == tools::kExitUsage);
  BOOST_TEST(f.run({"account", "invite", "x@example.com", "--tier", "gold"}, &out, &err) ==
             tools::kExitUsage);
}

// EQ_PORTAL_SIGNUP=off means no new people: an invitation is refused with
// its own exit code, and existing people still get reset links.
BOOST_AUTO_TEST_CASE(invite_is_refused_when_sign_up_is_off) {
  Fixture f;
  std::string out, err;
  rapidjson::Document d = f.json({"account", "invite", "ann@example.com"});
  std::string link = str(d["link"]);
  BOOST_REQUIRE(
      f.store->usePortalLink(link.substr(link.rfind('/') + 1), "scrypt$placeholder", nowMs())
          .isOk());

  f.options.portal_signup = "off";
  BOOST_TEST(f.run({"account", "invite", "bob@example.com"}, &out, &err) == tools::kExitRefused);
  BOOST_TEST(out.empty());
  BOOST_TEST(err.find("EQ_PORTAL_SIGNUP=off") != std::string::npos, err);
  BOOST_TEST(err.find("usage:") == std::string::npos);  // not a usage error
  BOOST_TEST(f.run({"account", "invite", "bob@example.com", "--json"}, &out, &err) ==
             tools::kExitRefused);
  expectJsonError(err, 5, "refused");
  // With --key too: attaching a person to an existing account is a new person.
  std::string key_id = f.createKey();
  BOOST_TEST(f.run({"account", "invite", "ops@example.com", "--key", key_id}, &out, &err) ==
             tools::kExitRefused);
  BOOST_TEST(f.store->listPeople().value().size() == 1u);
  // A usage error is still reported as one.
  BOOST_TEST(f.run({"account", "invite", "bob@example.com", "--tier", "gold"}, &out, &err) ==
             tools::kExitUsage);

  rapidjson::Document reset = f.json({"account", "reset-password", "ann@example.com"});
  BOOST_TEST(str(reset["link"]).find("/portal/#/reset/") != std::string::npos);
  BOOST_REQUIRE(f.run({"--help"}, &out, &err) == 0);
  BOOST_TEST(out.find("5 refused") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(revoke_json_and_create_with_default_webhook_url) {
  Fixture f;
  std::string out, err;
  rapidjson::Document c =
      f.json({"key", "create", "--name", "hooks", "--webhook-url", "https://hooks.example/eq"});
  std::string id = str(c["key_id"]);
  std::string api_key = str(c["api_key"]);
  rapidjson::Document shown = f.json({"key", "show", id});
  BOOST_TEST(str(shown["default_webhook_url"]) == "https://hooks.example/eq");
  // A refused URL creates nothing.
  size_t before = f.store->listKeys().value().size();
  BOOST_TEST(f.run({"key", "create", "--name", "x", "--webhook-url", "http://10.0.0.1/"}, &out,
                   &err) == tools::kExitUsage);
  BOOST_TEST(f.store->listKeys().value().size() == before);

  rapidjson::Document r = f.json({"key", "revoke", id});
  BOOST_TEST(str(r["key_id"]) == id);
  BOOST_TEST(str(r["status"]) == "revoked");
  BOOST_TEST(r["revoked_at"].IsString());
  BOOST_TEST(!f.store->authenticate(api_key, "production", nowMs()).value().has_value());
  BOOST_TEST(f.run({"key", "revoke", "key_missing"}, &out, &err) == tools::kExitNotFound);
  BOOST_TEST(f.run({"key", "revoke", id, "--force"}, &out, &err) == tools::kExitUsage);
}

// A stored result is read back with the guarded reader: `task show` of one
// that holds a number past the limits shows no result rather than crashing.
BOOST_AUTO_TEST_CASE(task_show_survives_a_stored_hostile_number) {
  Fixture f;
  std::string key_id = f.createKey();
  int i = 0;
  for (const test::HostileNumber& n : test::hostileNumbers()) {
    BOOST_TEST_CONTEXT(n.text.substr(0, 40)) {
      std::string task_id = "tsk_h" + std::to_string(i++);
      std::string account = f.store->accountOfKey(key_id).value();
      TaskRecord t{
          task_id, account, key_id, "req_" + task_id, "fast", TaskStatus::kQueued, "", "", 0, "",
          1000,    0,       0};
      BOOST_REQUIRE(f.store->createTask(t).isOk());
      std::string result = R"({"replies":[{"text":"hi","score":)" + n.text +
                           R"(,"eq_analysis":"x"}],"tokens_used":1})";
      BOOST_REQUIRE(f.store->markTaskSucceeded(task_id, result, 2000).value());
      rapidjson::Document d = f.json({"task", "show", task_id});
      BOOST_TEST(d["result"].IsObject() == n.parses);
      std::string out, err;
      BOOST_TEST(f.run({"task", "show", task_id}, &out, &err) == 0);
      BOOST_TEST((out.find("replies:") != std::string::npos) == n.parses);
    }
  }
}

BOOST_AUTO_TEST_CASE(migrate_status_changes_nothing_and_migrate_applies_what_is_pending) {
  std::string path = "/tmp/eq-eqctl-migrate-XXXXXX";
  ::close(mkstemp(path.data()));
  const std::string url = "sqlite:" + path;
  auto run = [&](std::vector<std::string> args, std::string* out, std::string* err) {
    std::ostringstream o, e;
    const int rc = eq::tools::runMigrate(url, args, o, e);
    *out = o.str();
    *err = e.str();
    return rc;
  };
  std::string out, err;
  BOOST_TEST(run({"migrate", "--status"}, &out, &err) == eq::tools::kExitOk);
  BOOST_TEST(out.find("001_init  pending") != std::string::npos, out);
  BOOST_TEST(out.find("0 of 14 applied") != std::string::npos, out);
  BOOST_TEST(run({"migrate", "--status"}, &out, &err) == eq::tools::kExitOk);
  BOOST_TEST(out.find("0 of 14 applied") != std::string::npos, out);  // still nothing
  BOOST_TEST(run({"migrate"}, &out, &err) == eq::tools::kExitOk);
  BOOST_TEST(out.find("applied 014_monthly_volume") != std::string::npos, out);
  BOOST_TEST(run({"migrate"}, &out, &err) == eq::tools::kExitOk);
  BOOST_TEST(out == "up to date (14 migrations)\n");
  BOOST_TEST(run({"migrate", "--status"}, &out, &err) == eq::tools::kExitOk);
  BOOST_TEST(out.find("14 of 14 applied") != std::string::npos, out);
  BOOST_TEST(out.find("001_init  applied 20") != std::string::npos, out);
  // The store opens the migrated file as it is.
  BOOST_TEST(eq::Store::open(path).isOk());
  BOOST_TEST(run({"migrate", "--now"}, &out, &err) == eq::tools::kExitUsage);
  BOOST_TEST(err.find("unknown option '--now'") != std::string::npos, err);
  std::ostringstream o, e;
  BOOST_TEST(eq::tools::runMigrate("mysql://db/eq", {"migrate"}, o, e) == eq::tools::kExitUsage);
  BOOST_TEST(e.str().find("unknown database URL scheme") != std::string::npos, e.str());
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
}

// Issue 28: eqctl backup, SQLite's online backup API into a new file.
BOOST_AUTO_TEST_CASE(backup_copies_the_database_into_a_new_file_only) {
  Fixture f;
  const std::string key_id = f.createKey();
  std::string dir = "/tmp/eq-eqctl-backup-XXXXXX";
  BOOST_REQUIRE(mkdtemp(dir.data()) != nullptr);
  const std::string copy = dir + "/copy.db";
  rapidjson::Document d = f.json({"backup", copy});
  BOOST_TEST(str(d["path"]) == copy);
  BOOST_TEST(d["bytes"].GetInt64() > 0);
  {
    auto opened = Store::open(copy);
    BOOST_REQUIRE(opened.isOk());
    BOOST_TEST(opened.value()->keyDetails(key_id).isOk(), "the copy holds the key");
  }
  std::string out, err;
  BOOST_TEST(f.run({"backup", copy}, &out, &err) == tools::kExitConflict);
  BOOST_TEST(err.find("--force") != std::string::npos, err);
  // --force replaces a file, never the database's own (by any name), and
  // the copy it leaves is 0600 with no stale -wal beside it.
  ::chmod(copy.c_str(), 0644);
  ::close(::open((copy + "-wal").c_str(), O_CREAT | O_WRONLY, 0600));
  BOOST_TEST(f.run({"backup", copy, "--force"}, &out, &err) == tools::kExitOk, err);
  struct stat st {};
  BOOST_TEST((::stat(copy.c_str(), &st) == 0 && (st.st_mode & 0777) == 0600));
  BOOST_TEST(::access((copy + "-wal").c_str(), F_OK) != 0);
  const std::string link = dir + "/link.db";
  BOOST_REQUIRE(::symlink(f.path.c_str(), link.c_str()) == 0);
  for (const std::string& own : {f.path, link}) {
    BOOST_TEST(f.run({"backup", own, "--force"}, &out, &err) == tools::kExitUsage, own);
    BOOST_TEST(err.find("the database's own file") != std::string::npos, err);
  }
  BOOST_TEST(f.store->keyDetails(key_id).isOk(), "the database is intact");
  std::remove(link.c_str());
  BOOST_TEST(f.run({"backup"}, &out, &err) == tools::kExitUsage);
  BOOST_TEST(f.run({"backup", dir + "/no/such/dir.db"}, &out, &err) == tools::kExitError);
  BOOST_TEST(::access((dir + "/no").c_str(), F_OK) != 0);
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((copy + suffix).c_str());
  ::rmdir(dir.c_str());
}

// Issue 28: eqctl never creates a database. Pointed where there is none, or
// at a file without EQ Reply's tables, it names the place and how to point
// it elsewhere, and leaves nothing behind; a migrated database passes.
BOOST_AUTO_TEST_CASE(commands_need_a_database_that_exists) {
  std::string dir = "/tmp/eq-eqctl-exists-XXXXXX";
  BOOST_REQUIRE(mkdtemp(dir.data()) != nullptr);
  const std::string path = dir + "/eq.db";
  std::ostringstream e1;
  BOOST_TEST(eq::tools::requireExistingStore("sqlite:" + path, e1) == eq::tools::kExitUsage);
  BOOST_TEST(e1.str().find("no database at sqlite:" + path) != std::string::npos, e1.str());
  BOOST_TEST(e1.str().find("EQ_VAR_DIR") != std::string::npos);
  BOOST_TEST(e1.str().find("eqctl migrate") != std::string::npos);
  BOOST_TEST(::access(path.c_str(), F_OK) != 0, "nothing was created");
  ::close(::open(path.c_str(), O_CREAT | O_WRONLY, 0600));  // a file, but no database
  std::ostringstream e2;
  BOOST_TEST(eq::tools::requireExistingStore(path, e2) == eq::tools::kExitUsage);
  BOOST_TEST(e2.str().find("holds no EQ Reply tables") != std::string::npos, e2.str());
  std::ostringstream o, e3;
  BOOST_REQUIRE(eq::tools::runMigrate("sqlite:" + path, {"migrate"}, o, e3) == eq::tools::kExitOk);
  BOOST_TEST(eq::tools::requireExistingStore("sqlite:" + path, e3) == eq::tools::kExitOk, e3.str());
  std::ostringstream e4;
  BOOST_TEST(eq::tools::requireExistingStore("mysql://db/eq", e4) == eq::tools::kExitUsage);
  // What needs the store: a known command, neither help nor nothing.
  BOOST_TEST(eq::tools::needsStore({"key", "list"}));
  BOOST_TEST(eq::tools::needsStore({"stats", "--json"}));
  BOOST_TEST(eq::tools::needsStore({"store", "copy", "--to", "postgresql://x/y"}));
  BOOST_TEST(!eq::tools::needsStore({}));
  BOOST_TEST(!eq::tools::needsStore({"key", "list", "--help"}));
  BOOST_TEST(!eq::tools::needsStore({"frobnicate", "now"}));
  BOOST_TEST(!eq::tools::needsStore({"key"}));
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  ::rmdir(dir.c_str());
}

BOOST_AUTO_TEST_SUITE_END()
