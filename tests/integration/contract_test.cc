// The contract of docs/contract.md §2-§4 on the real binaries: quota atomicity,
// the rate limit and Idempotency-Key across two eq-api processes sharing one
// database and one port (SO_REUSEPORT, as scripts/run with
// EQ_API_PROCESSES=2: the kernel spreads the test's connections over both),
// 402/401 for exhausted or expired quota and keys, key rotation,
// and the error rows of §2 that the handlers own (404, 405, 409, 415, 429).
//
// One stack serves the whole suite (starting one costs seconds). It has no
// perfect worker, so a sync perfect call runs into EQ_SYNC_DEADLINE_MS and
// exercises the 504 path; every test creates its own key, so the cases do
// not share quota or rate windows.
#include <rapidjson/document.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/timefmt.h"
#include "common/utf8.h"
#include "tests/integration/stack.h"

using eq::it::HttpResult;
using eq::it::Stack;
using eq::it::StackOptions;

namespace {

constexpr int kSyncDeadlineMs = 4000;

struct ContractWorld {
  static ContractWorld* instance;
  std::unique_ptr<Stack> stack;
  ContractWorld() {
    StackOptions o;
    o.api_processes = 2;
    o.shared_port = true;  // as scripts/run with EQ_API_PROCESSES=2
    o.worker_modes = {"fast", "standard"};
    o.dispatcher = true;
    o.env["EQ_SYNC_DEADLINE_MS"] = std::to_string(kSyncDeadlineMs);
    stack = std::make_unique<Stack>(o);
    instance = this;
  }
  ~ContractWorld() {
    BOOST_CHECK_MESSAGE(stack->stopAll(), "every process exits with status 0 on SIGTERM");
    instance = nullptr;
  }
};
ContractWorld* ContractWorld::instance = nullptr;

Stack& stack() { return *ContractWorld::instance->stack; }

struct Key {
  std::string id, api_key;
};

rapidjson::Document parseJson(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str());
  return d;
}

// `eqctl key create --json` with extra options.
Key createKey(const std::string& name, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"key", "create", "--name", name, "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  int rc = -1;
  std::string out = stack().eqctl(args, &rc);
  BOOST_REQUIRE_MESSAGE(rc == 0, "eqctl key create failed: " << out);
  rapidjson::Document d = parseJson(out);
  BOOST_REQUIRE_MESSAGE(d.IsObject(), "eqctl output is not JSON: " << out);
  return Key{d["key_id"].GetString(), d["api_key"].GetString()};
}

void eqctlOk(const std::vector<std::string>& args) {
  int rc = -1;
  std::string out = stack().eqctl(args, &rc);
  BOOST_REQUIRE_MESSAGE(rc == 0, "eqctl failed: " << out);
}

HttpResult post(const std::string& path, const std::string& body, const std::string& api_key,
                int api = 0, std::vector<std::string> headers = {}) {
  headers.push_back("Authorization: Bearer " + api_key);
  headers.push_back("Content-Type: application/json; charset=utf-8");
  return eq::it::httpRequest("POST", stack().url(path, api), headers, body);
}

HttpResult postIdem(const std::string& path, const std::string& body, const std::string& api_key,
                    const std::string& idem, int api = 0) {
  return post(path, body, api_key, api, {"Idempotency-Key: " + idem});
}

HttpResult get(const std::string& path, const std::string& api_key, int api = 0) {
  return eq::it::httpRequest("GET", stack().url(path, api), {"Authorization: Bearer " + api_key});
}

rapidjson::Document envelope(const HttpResult& r) {
  rapidjson::Document d = parseJson(r.body);
  BOOST_REQUIRE_MESSAGE(d.IsObject() && d.HasMember("code") && d.HasMember("data") &&
                            d.HasMember("msg") && d["msg"].IsString(),
                        "not an envelope: " << r.body);
  return d;
}

// docs/contract.md §2: data null, code == HTTP status, X-Request-Id, and a msg
// that says what went wrong (checked by fragment).
void expectError(const HttpResult& r, int status, const std::string& fragment) {
  BOOST_TEST(r.status == status, "status " << r.status << " body " << r.body);
  rapidjson::Document d = envelope(r);
  BOOST_TEST(d["code"].GetInt() == status);
  BOOST_TEST(d["data"].IsNull());
  std::string msg = d["msg"].GetString();
  BOOST_TEST(msg.find(fragment) != std::string::npos,
             "msg '" << msg << "' should mention '" << fragment << "'");
  auto id = r.headers.find("x-request-id");
  BOOST_TEST((id != r.headers.end() && !id->second.empty()), "no X-Request-Id");
}

int64_t quotaOf(const Key& k, const std::string& mode) {
  HttpResult r = get("/api/v1/quota", k.api_key);
  BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
  return envelope(r)["data"]["quota"][mode.c_str()].GetInt64();
}

// The usage record's net units of a key's account in one mode (calls -
// refunds over all hours), read from the database as the developer
// center's Usage page reads it: it must always equal what the quota lost.
int64_t usageNet(const Key& k, const std::string& mode) {
  int64_t net = -1;
  auto r = stack().db().exec(
      eq::store::Sql{
          "SELECT coalesce(sum(u.calls - u.refunded), 0) FROM usage_hourly u "
          "JOIN api_keys k ON k.account_id = u.account_id WHERE k.id = ? AND u.mode = ?"},
      {std::string_view(k.id), std::string_view(mode)},
      [&](const eq::store::Row& row) { net = row.int64(0); });
  BOOST_REQUIRE_MESSAGE(r.isOk(), r.status().msg());
  return net;
}

// The value of an unlabelled counter, summed over both eq-api processes.
// The sum of a counter over both eq-api processes. They share one port, so
// /metrics is scraped on fresh connections until both have answered, told
// apart by their process_start_time_seconds.
int64_t counterSum(const std::string& name) {
  std::map<std::string, int64_t> by_process;
  for (int attempt = 0; attempt < 500 && by_process.size() < 2; ++attempt) {
    // The port itself, never the prism proxy of EQ_TEST_PRISM runs: a proxy
    // keeps its upstream connection, so it would reach one process only.
    HttpResult m = eq::it::httpRequest(
        "GET", "http://127.0.0.1:" + std::to_string(stack().apiPort(0)) + "/metrics");
    BOOST_REQUIRE(m.status == 200);
    size_t start = m.body.find("\nprocess_start_time_seconds ");
    BOOST_REQUIRE_MESSAGE(start != std::string::npos, "process_start_time_seconds missing");
    std::string id = m.body.substr(start + 28, m.body.find('\n', start + 1) - start - 28);
    size_t at = m.body.find("\n" + name + " ");
    BOOST_REQUIRE_MESSAGE(at != std::string::npos, name << " missing from /metrics");
    by_process[id] = std::stoll(m.body.substr(at + name.size() + 2));
  }
  BOOST_REQUIRE_MESSAGE(by_process.size() == 2u, "both eq-api processes answer on the port");
  int64_t sum = 0;
  for (const auto& [id, n] : by_process) sum += n;
  return sum;
}

// True when the eq-api process `api` logged a request on `route`: the kernel
// spread the test's connections over both processes.
// Through the prism proxies (EQ_TEST_PRISM) every request may reach the same
// process over the proxy's kept connection, so there it is not asked.
bool servedBy(int api, const std::string& route) {
  if (eq::it::prismEnabled()) return true;
  std::ifstream log(stack().dir() + "/api-" + std::to_string(api) + ".log");
  std::string line;
  while (std::getline(log, line)) {
    if (line.find("\"route\":\"" + route + "\"") != std::string::npos) return true;
  }
  return false;
}

const std::string kFastBody =
    R"({"mode":"fast","message":"今天被老板骂了，好难过","reply_count":2})";

}  // namespace

BOOST_AUTO_TEST_SUITE(contract, *boost::unit_test::fixture<ContractWorld>())

BOOST_AUTO_TEST_CASE(fifty_concurrent_calls_take_exactly_the_ten_units_there_are) {
  Key k = createKey("atomic", {"--quota-fast", "10", "--rate", "1000"});
  int64_t rejected_before = counterSum("eq_api_quota_rejected_total");
  std::vector<long> status(50, 0);
  std::vector<std::thread> threads;
  // Both processes at once: the charge must be atomic in SQLite, not merely
  // serialised by one process's loop.
  for (int i = 0; i < 50; ++i) {
    threads.emplace_back(
        [&, i] { status[i] = post("/api/v1/reply", kFastBody, k.api_key, i % 2).status; });
  }
  for (std::thread& t : threads) t.join();
  std::map<long, int> by_status;
  for (long s : status) ++by_status[s];
  BOOST_TEST(by_status[200] == 10);
  BOOST_TEST(by_status[402] == 40);
  BOOST_TEST(by_status.size() == 2u, "unexpected statuses besides 200 and 402");
  BOOST_TEST(quotaOf(k, "fast") == 0);
  BOOST_TEST(usageNet(k, "fast") == 10);  // the usage record agrees with the quota
  BOOST_TEST(counterSum("eq_api_quota_rejected_total") - rejected_before == 40);
  BOOST_TEST(servedBy(0, "/api/v1/reply"), "api-0 took some of the calls");
  BOOST_TEST(servedBy(1, "/api/v1/reply"), "api-1 took some of the calls");
}

BOOST_AUTO_TEST_CASE(rate_limit_holds_across_two_api_processes) {
  Key k = createKey("rate");  // the default 60 per minute
  // The window is the UTC minute: start early enough that 120 requests
  // finish before it turns over and resets the count.
  eq::it::waitForMinuteRoom(20'000);
  int64_t limited_before = counterSum("eq_api_rate_limited_total");

  int ok = 0, limited = 0;
  for (int i = 0; i < 120; ++i) {
    HttpResult r = get("/api/v1/quota", k.api_key, i % 2);
    BOOST_TEST_CONTEXT("request " << i << " on api " << i % 2) {
      BOOST_TEST(r.headers["x-ratelimit-limit"] == "60");
      BOOST_TEST(r.headers.count("x-ratelimit-remaining") == 1u);
      BOOST_TEST(r.headers.count("x-ratelimit-reset") == 1u);
      int reset = std::stoi(r.headers["x-ratelimit-reset"]);
      BOOST_TEST(reset >= 1);
      BOOST_TEST(reset <= 60);
      if (r.status == 200) {
        ++ok;
        BOOST_TEST(r.headers["x-ratelimit-remaining"] == std::to_string(60 - ok));
      } else {
        ++limited;
        expectError(r, 429, "rate limit exceeded");
        BOOST_TEST(r.headers["x-ratelimit-remaining"] == "0");
        BOOST_TEST(r.headers["retry-after"] == r.headers["x-ratelimit-reset"]);
      }
    }
  }
  BOOST_TEST(ok == 60);
  BOOST_TEST(limited == 60);
  BOOST_TEST(counterSum("eq_api_rate_limited_total") - limited_before == 60);
  BOOST_TEST(servedBy(0, "/api/v1/quota"), "api-0 served some of them");
  BOOST_TEST(servedBy(1, "/api/v1/quota"), "api-1 served some of them");
}

BOOST_AUTO_TEST_CASE(idempotent_async_returns_the_same_task_and_charges_once) {
  Key k = createKey("idem-async");
  std::string body = R"({"mode":"fast","message":"Thanks for dinner tonight!"})";
  HttpResult first = postIdem("/api/v1/reply/async", body, k.api_key, "order-1", 0);
  BOOST_REQUIRE_MESSAGE(first.status == 200, first.body);
  std::string task_id = envelope(first)["data"]["task_id"].GetString();
  BOOST_TEST(first.headers.count("idempotent-replayed") == 0u);

  // The other process answers the repeat from the shared database.
  HttpResult again = postIdem("/api/v1/reply/async", body, k.api_key, "order-1", 1);
  BOOST_REQUIRE_MESSAGE(again.status == 200, again.body);
  BOOST_TEST(again.body == first.body);
  BOOST_TEST(std::string(envelope(again)["data"]["task_id"].GetString()) == task_id);
  BOOST_TEST(again.headers["idempotent-replayed"] == "true");
  BOOST_TEST(again.headers["x-request-id"] != first.headers["x-request-id"]);
  BOOST_TEST(quotaOf(k, "fast") == 99);

  expectError(postIdem("/api/v1/reply/async", R"({"mode":"fast","message":"something else"})",
                       k.api_key, "order-1", 0),
              409, "Idempotency-Key reused with a different request body");
  expectError(postIdem("/api/v1/reply", body, k.api_key, "order-1", 1), 409, "another endpoint");
  BOOST_TEST(quotaOf(k, "fast") == 99);

  // A new key is a new request.
  HttpResult other = postIdem("/api/v1/reply/async", body, k.api_key, "order-2", 0);
  BOOST_REQUIRE(other.status == 200);
  BOOST_TEST(std::string(envelope(other)["data"]["task_id"].GetString()) != task_id);
  BOOST_TEST(quotaOf(k, "fast") == 98);
}

BOOST_AUTO_TEST_CASE(idempotent_sync_returns_the_same_replies_and_charges_once) {
  Key k = createKey("idem-sync");
  HttpResult first = postIdem("/api/v1/reply", kFastBody, k.api_key, "sync-1", 1);
  BOOST_REQUIRE_MESSAGE(first.status == 200, first.body);
  HttpResult again = postIdem("/api/v1/reply", kFastBody, k.api_key, "sync-1", 0);
  BOOST_TEST(again.status == 200);
  BOOST_TEST(again.body == first.body);  // replies and the first request_id
  BOOST_TEST(again.headers["idempotent-replayed"] == "true");
  BOOST_TEST(quotaOf(k, "fast") == 99);
  expectError(
      postIdem("/api/v1/reply", R"({"mode":"fast","message":"hello"})", k.api_key, "sync-1", 0),
      409, "different request body");
  // Final 4xx answers are remembered too: the same bad body gets the same 400.
  HttpResult bad =
      postIdem("/api/v1/reply", R"({"mode":"slow","message":"x"})", k.api_key, "sync-2", 0);
  expectError(bad, 400, "mode");
  HttpResult bad_again =
      postIdem("/api/v1/reply", R"({"mode":"slow","message":"x"})", k.api_key, "sync-2", 1);
  BOOST_TEST(bad_again.body == bad.body);
  BOOST_TEST(bad_again.headers["idempotent-replayed"] == "true");
}

BOOST_AUTO_TEST_CASE(concurrent_duplicates_run_once) {
  Key k = createKey("idem-race", {"--rate", "1000"});
  std::vector<HttpResult> results(12);
  std::vector<std::thread> threads;
  for (int i = 0; i < 12; ++i) {
    threads.emplace_back(
        [&, i] { results[i] = postIdem("/api/v1/reply", kFastBody, k.api_key, "race-1", i % 2); });
  }
  for (std::thread& t : threads) t.join();
  std::string body;
  int ok = 0;
  for (const HttpResult& r : results) {
    if (r.status == 200) {
      ++ok;
      if (body.empty()) body = r.body;
      BOOST_TEST(r.body == body, "every 200 is the one stored response");
    } else {
      expectError(r, 409, "still in progress");
      BOOST_TEST(r.headers.count("retry-after") == 1u);
    }
  }
  BOOST_TEST(ok >= 1);
  BOOST_TEST(quotaOf(k, "fast") == 99);  // however the race went, one charge
}

BOOST_AUTO_TEST_CASE(idempotency_key_over_255_chars_is_a_400_naming_the_header) {
  Key k = createKey("idem-long");
  expectError(postIdem("/api/v1/reply", kFastBody, k.api_key, std::string(256, 'k')), 400,
              "Idempotency-Key");
  BOOST_TEST(postIdem("/api/v1/reply", kFastBody, k.api_key, std::string(255, 'k')).status == 200);
  BOOST_TEST(quotaOf(k, "fast") == 99);
}

BOOST_AUTO_TEST_CASE(a_timeout_is_refunded_and_not_remembered) {
  Key k = createKey("timeout");
  std::string body = R"({"mode":"perfect","message":"我们分手吧"})";
  HttpResult r = postIdem("/api/v1/reply", body, k.api_key, "slow-1");
  expectError(r, 504, "timed out");
  BOOST_TEST(quotaOf(k, "perfect") == 100);  // refunded
  // A 504 is not final: the retry runs again (and times out again here)
  // instead of replaying the 504.
  HttpResult retry = postIdem("/api/v1/reply", body, k.api_key, "slow-1", 1);
  expectError(retry, 504, "timed out");
  BOOST_TEST(retry.headers.count("idempotent-replayed") == 0u);
  BOOST_TEST(quotaOf(k, "perfect") == 100);
  BOOST_TEST(usageNet(k, "perfect") == 0);  // two calls, two refunds
}

BOOST_AUTO_TEST_CASE(exhausted_and_expired_quota_are_402_naming_the_mode) {
  Key k = createKey("quota");
  eqctlOk({"quota", "set", k.id, "--fast", "0"});
  expectError(post("/api/v1/reply", kFastBody, k.api_key), 402, "quota exhausted: no fast units");
  expectError(post("/api/v1/reply/async", kFastBody, k.api_key, 1), 402, "quota exhausted");
  std::string standard = R"({"mode":"standard","message":"周末一起去爬山吗？"})";
  BOOST_TEST(post("/api/v1/reply", standard, k.api_key).status == 200);
  BOOST_TEST(quotaOf(k, "standard") == 99);

  eqctlOk({"quota", "set", k.id, "--expire-at", "2020-01-01T00:00:00Z"});
  HttpResult expired = post("/api/v1/reply", standard, k.api_key, 1);
  expectError(expired, 402, "quota expired");
  BOOST_TEST(std::string(envelope(expired)["msg"].GetString()).find("standard") !=
             std::string::npos);
  BOOST_TEST(quotaOf(k, "standard") == 99);  // nothing charged
  HttpResult q = get("/api/v1/quota", k.api_key);
  BOOST_TEST(std::string(envelope(q)["data"]["expire_at"].GetString()) ==
             "2020-01-01T00:00:00+00:00");

  // quota grant adds units (and, here, a new expiry): calls go through again.
  eqctlOk({"quota", "grant", k.id, "--fast", "2", "--expire-days", "1"});
  BOOST_TEST(quotaOf(k, "fast") == 2);
  BOOST_TEST(post("/api/v1/reply", kFastBody, k.api_key).status == 200);
  BOOST_TEST(quotaOf(k, "fast") == 1);
}

// docs/contract.md §11: the account's monthly volume. GET /api/v1/quota
// shows it; a call past it is 402 in its own words and charges nothing;
// a failed call gives its unit back to the month; --monthly 0 lifts it.
BOOST_AUTO_TEST_CASE(the_monthly_volume_is_counted_shown_and_refused_past) {
  Key k = createKey("monthly");
  HttpResult q = get("/api/v1/quota", k.api_key);
  BOOST_REQUIRE(q.status == 200);
  const rapidjson::Document body = envelope(q);  // the value below lives in it
  const auto& monthly = body["data"]["monthly"];
  BOOST_REQUIRE(monthly.IsObject());
  BOOST_TEST(monthly["limit"].GetInt64() == 100000);  // a new account's
  BOOST_TEST(monthly["used"].GetInt64() == 0);
  // The first instant of next month, UTC, in expire_at's form.
  std::string resets = monthly["resets_at"].GetString();
  BOOST_TEST(resets == eq::iso8601Offset(eq::nextMonthStartMs(eq::nowMs())));

  eqctlOk({"quota", "set", k.id, "--monthly", "2"});
  std::string standard = R"({"mode":"standard","message":"周末一起去爬山吗？"})";
  BOOST_TEST(post("/api/v1/reply", kFastBody, k.api_key).status == 200);
  // A timeout is refunded: to the mode, and to the month.
  expectError(post("/api/v1/reply", R"({"mode":"perfect","message":"我们分手吧"})", k.api_key), 504,
              "timed out");
  BOOST_TEST(post("/api/v1/reply", standard, k.api_key).status == 200);
  auto used = [&] {
    return envelope(get("/api/v1/quota", k.api_key))["data"]["monthly"]["used"].GetInt64();
  };
  BOOST_TEST(used() == 2);
  HttpResult refused = post("/api/v1/reply", kFastBody, k.api_key);
  expectError(refused, 402, "monthly volume reached");
  BOOST_TEST(std::string(envelope(refused)["msg"].GetString()).find("commercial arrangement") !=
             std::string::npos);
  expectError(post("/api/v1/reply/async", kFastBody, k.api_key, 1), 402, "monthly volume");
  BOOST_TEST(quotaOf(k, "fast") == 99);  // nothing charged by the refusals
  BOOST_TEST(used() == 2);

  eqctlOk({"quota", "set", k.id, "--monthly", "0"});
  HttpResult lifted = get("/api/v1/quota", k.api_key);
  BOOST_TEST(envelope(lifted)["data"]["monthly"]["limit"].IsNull());
  BOOST_TEST(post("/api/v1/reply", kFastBody, k.api_key).status == 200);
  BOOST_TEST(used() == 3);
}

BOOST_AUTO_TEST_CASE(an_expired_key_is_401_like_a_revoked_one) {
  Key k = createKey("expiring");
  BOOST_TEST(get("/api/v1/quota", k.api_key).status == 200);
  eqctlOk({"key", "set", k.id, "--expire-at", "2020-01-01T00:00:00Z"});
  for (int api = 0; api < 2; ++api) {
    HttpResult r = get("/api/v1/quota", k.api_key, api);
    expectError(r, 401, "invalid API key");
    BOOST_TEST(r.body.find(k.api_key) == std::string::npos);  // never echoed
  }
  eqctlOk({"key", "set", k.id, "--expire-days", "1"});
  BOOST_TEST(get("/api/v1/quota", k.api_key, 1).status == 200);
}

BOOST_AUTO_TEST_CASE(rotation_stops_the_old_key_and_keeps_quota_and_tasks) {
  Key old = createKey("rotating");
  HttpResult created = post("/api/v1/reply/async", kFastBody, old.api_key);
  BOOST_REQUIRE_MESSAGE(created.status == 200, created.body);
  std::string task_id = envelope(created)["data"]["task_id"].GetString();
  int64_t fast = quotaOf(old, "fast");

  int rc = -1;
  std::string out = stack().eqctl({"key", "rotate", old.id, "--json"}, &rc);
  BOOST_REQUIRE_MESSAGE(rc == 0, out);
  rapidjson::Document d = parseJson(out);
  BOOST_REQUIRE_MESSAGE(d.IsObject(), out);
  Key fresh{d["key_id"].GetString(), d["api_key"].GetString()};

  for (int api = 0; api < 2; ++api) {
    expectError(get("/api/v1/quota", old.api_key, api), 401, "invalid API key");
  }
  BOOST_TEST(quotaOf(fresh, "fast") == fast);
  HttpResult t = get("/api/v1/task/" + task_id, fresh.api_key, 1);
  BOOST_REQUIRE_MESSAGE(t.status == 200, t.body);
  BOOST_TEST(std::string(envelope(t)["data"]["task_id"].GetString()) == task_id);
}

BOOST_AUTO_TEST_CASE(media_type_method_and_route_errors) {
  Key k = createKey("errors");
  int64_t fast = quotaOf(k, "fast");
  HttpResult plain = eq::it::httpRequest(
      "POST", stack().url("/api/v1/reply"),
      {"Authorization: Bearer " + k.api_key, "Content-Type: text/plain"}, kFastBody);
  expectError(plain, 415, "Content-Type: application/json");
  // curl sends application/x-www-form-urlencoded when none is given.
  HttpResult form = eq::it::httpRequest("POST", stack().url("/api/v1/reply/async"),
                                        {"Authorization: Bearer " + k.api_key}, kFastBody);
  expectError(form, 415, "unsupported media type");
  BOOST_TEST(quotaOf(k, "fast") == fast);

  HttpResult wrong = get("/api/v1/reply/async", k.api_key);
  expectError(wrong, 405, "method not allowed");
  BOOST_TEST(wrong.headers["allow"] == "POST");
  HttpResult del = eq::it::httpRequest("DELETE", stack().url("/api/v1/quota"),
                                       {"Authorization: Bearer " + k.api_key});
  expectError(del, 405, "use GET");
  BOOST_TEST(del.headers["allow"] == "GET, HEAD");

  expectError(get("/api/v2/reply", k.api_key), 404, "not found");
  expectError(get("/api/v1/task/tsk_nope", k.api_key), 404, "not found");
  expectError(eq::it::httpRequest("GET", stack().url("/nothing/here")), 404, "not found");
}

// Issue 13, finding 1: a lone surrogate escape decodes to bytes that are
// not UTF-8. It used to be accepted and enqueued, and then no worker or
// dispatcher could read the job: sync calls waited for their 504, async
// tasks stayed queued and charged forever. Now it is a 400 at the door,
// charged nothing, and every body we send is valid UTF-8.
BOOST_AUTO_TEST_CASE(lone_surrogates_are_400_and_nothing_is_charged) {
  Key k = createKey("surrogates");
  int64_t standard = quotaOf(k, "standard");
  for (const char* path : {"/api/v1/reply", "/api/v1/reply/async"}) {
    for (const char* body : {R"({"mode":"standard","message":"hi\udc00"})",
                             R"({"mode":"standard","message":"hi","context":"\udfff x"})",
                             R"({"mode":"standard","message":"hi","\udc00":1})"}) {
      expectError(post(path, body, k.api_key), 400, "not valid Unicode");
    }
  }
  expectError(post("/api/v1/analyze", R"({"message":"\udc01"})", k.api_key), 400,
              "not valid Unicode");
  BOOST_TEST(quotaOf(k, "standard") == standard);

  // A path of raw 0xFF bytes (refused as a bad request line or unrouted)
  // is never echoed raw: the answer stays UTF-8.
  std::string raw = eq::it::rawExchange(
      stack().apiPort(), "GET /x\xFF\xFE HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
  size_t body_at = raw.find("\r\n\r\n");
  BOOST_REQUIRE_MESSAGE(body_at != std::string::npos, raw);
  std::string body = raw.substr(body_at + 4);
  BOOST_TEST(eq::utf8::isValid(body), body);
  BOOST_TEST(body.find('\xFF') == std::string::npos, body);
}

BOOST_AUTO_TEST_SUITE_END()
