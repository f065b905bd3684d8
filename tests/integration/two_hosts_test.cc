// Two hosts on one PostgreSQL and one RabbitMQ (issue 23, item 5;
// docs/scaling.md, "Several hosts"). Each host is a loopback address of its
// own, 127.0.0.1 (A) and 127.0.0.2 (B), with its own eq-api and
// eq-dispatcher; the workers are shared, as a broker's consumers are. What
// the store must keep exact across hosts is shown from outside, through the
// API and the database:
//   - 200 concurrent calls over both hosts on a key with 100 units: exactly
//     100 answered, 100 refused for quota;
//   - one rate count: 60 calls over both hosts on a key limited to 30 a
//     minute, exactly 30 admitted;
//   - one Idempotency-Key used on both hosts at once: one task;
//   - a key revoked while host B has it in its cache: B's next request is
//     refused;
//   - every webhook delivered once with both dispatchers running, the
//     receiver failing half the first attempts;
//   - host A's processes SIGKILLed with calls in flight: host B's dispatcher
//     settles each of A's charges once, no unit lost or charged twice;
//   - PostgreSQL stopped and started under load: 503 with Retry-After
//     meanwhile, the same processes serve again after, and every call
//     answered 200 has its task, which succeeds.
// Runs only on PostgreSQL (ctest two_hosts sets EQ_TEST_STORE=postgres).
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/stack.h"

namespace {

using eq::it::HookReply;
using eq::it::HookServer;
using eq::it::HttpResult;
using eq::it::Key;
using eq::it::nowMs;
using eq::it::queryInt;
using eq::it::ReceivedWebhook;
using eq::it::sleepMs;
using eq::it::Stack;
using eq::it::StackOptions;
using eq::it::taskIdOf;

constexpr int kHostA = 0;
constexpr int kHostB = 1;

// The stack of two hosts: eq-api "api-0" on A and "api-1" on B, dispatcher
// "dispatcher" on A and "dispatcher-b" on B.
StackOptions twoHosts(std::map<std::string, std::string> env = {},
                      std::vector<std::string> modes = {"fast"}) {
  StackOptions o;
  o.api_processes = 2;
  o.api_hosts = {"127.0.0.1", "127.0.0.2"};
  o.worker_modes = std::move(modes);
  o.env = std::move(env);
  return o;
}

void startDispatcherB(Stack& stack) {
  BOOST_REQUIRE_MESSAGE(stack.onPostgres(), "two hosts share a PostgreSQL: EQ_TEST_STORE=postgres");
  stack.spawn("dispatcher-b", {"eq-dispatcher"}, {{"EQ_AMQP_URL", stack.roleUrl("eq-dispatcher")}})
      ->waitForLog("consuming", 20000);
}

HttpResult call(Stack& stack, int host, const std::string& method, const std::string& path,
                const Key& key, const std::string& body = "",
                const std::vector<std::string>& extra = {}) {
  std::vector<std::string> headers = {"Authorization: Bearer " + key.api_key};
  if (!body.empty()) headers.push_back("Content-Type: application/json; charset=utf-8");
  headers.insert(headers.end(), extra.begin(), extra.end());
  return eq::it::httpRequest(method, stack.url(path, host), headers, body);
}

std::string asyncBody(const std::string& webhook_url, int n) {
  return R"({"mode":"fast","message":"两台主机 )" + std::to_string(n) +
         R"(","reply_count":1,"webhook_url":")" + webhook_url + "\"}";
}

// Statuses of `n` calls made at once, spread over both hosts (even on A,
// odd on B).
std::map<long, int> concurrently(int n, const std::function<HttpResult(int i)>& one) {
  std::vector<long> statuses(static_cast<size_t>(n));
  std::vector<std::jthread> threads;
  std::atomic<bool> go{false};
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      statuses[static_cast<size_t>(i)] = one(i).status;
    });
  }
  go = true;
  threads.clear();  // joins
  std::map<long, int> by_status;
  for (long s : statuses) ++by_status[s];
  return by_status;
}

std::string describe(const std::map<long, int>& by_status) {
  std::string out;
  for (const auto& [status, n] : by_status) {
    out += std::to_string(n) + " x " + std::to_string(status) + "; ";
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(two_hosts)

BOOST_AUTO_TEST_CASE(quota_rate_idempotency_and_revocation_hold_across_hosts) {
  Stack stack(twoHosts());

  // 200 calls at once over both hosts, 100 units: exactly 100 answered.
  Key quota_key =
      eq::it::createKey(stack, "two-hosts-quota", {"--quota-fast", "100", "--rate", "100000"});
  std::map<long, int> by_status = concurrently(200, [&](int i) {
    return call(stack, i % 2, "POST", "/api/v1/reply", quota_key,
                R"({"mode":"fast","message":"今天被老板骂了 )" + std::to_string(i) +
                    R"(","reply_count":1})");
  });
  BOOST_TEST(by_status[200] == 100, describe(by_status));
  BOOST_TEST(by_status[402] == 100, describe(by_status));
  BOOST_TEST(eq::it::quotaOf(stack, quota_key, "fast") == 0);

  // One rate count: 60 calls over both hosts, 30 a minute. The calls stay
  // within one minute's window (started early in a minute).
  Key rate_key =
      eq::it::createKey(stack, "two-hosts-rate", {"--quota-fast", "1000", "--rate", "30"});
  while (std::time(nullptr) % 60 > 40) sleepMs(200);
  by_status =
      concurrently(60, [&](int i) { return call(stack, i % 2, "GET", "/api/v1/quota", rate_key); });
  BOOST_TEST(by_status[200] == 30, describe(by_status));
  BOOST_TEST(by_status[429] == 30, describe(by_status));

  // One Idempotency-Key on both hosts at once: one task; every call that
  // is answered gets that task, the others are told it is in progress.
  Key idem_key =
      eq::it::createKey(stack, "two-hosts-idem", {"--quota-fast", "100", "--rate", "100000"});
  std::mutex mu;
  std::set<std::string> tasks;
  by_status = concurrently(20, [&](int i) {
    HttpResult r = call(stack, i % 2, "POST", "/api/v1/reply/async", idem_key,
                        R"({"mode":"fast","message":"同一个请求","reply_count":1})",
                        {"Idempotency-Key: two-hosts-one"});
    if (r.status == 200) {
      std::lock_guard<std::mutex> lock(mu);
      tasks.insert(taskIdOf(r));
    }
    return r;
  });
  BOOST_TEST(by_status[200] + by_status[409] == 20, describe(by_status));
  BOOST_TEST(by_status[200] >= 1, describe(by_status));
  BOOST_TEST(tasks.size() == 1u);
  BOOST_TEST(queryInt(stack,
                      "SELECT count(*) FROM tasks t JOIN api_keys k ON k.account_id = "
                      "t.account_id WHERE k.id = '" +
                          idem_key.id + "'") == 1);
  BOOST_TEST(eq::it::quotaOf(stack, idem_key, "fast") == 99, "charged once");

  // Revoked while host B knows the key (its cache holds it): the next
  // request B serves after the revocation committed is refused.
  Key revoked = eq::it::createKey(stack, "two-hosts-revoke", {"--quota-fast", "10"});
  for (int i = 0; i < 3; ++i) {
    BOOST_REQUIRE(call(stack, kHostB, "GET", "/api/v1/quota", revoked).status == 200);
  }
  int rc = -1;
  std::string out = stack.eqctl({"key", "revoke", revoked.id}, &rc);
  BOOST_REQUIRE_MESSAGE(rc == 0, out);
  int64_t revoked_at = nowMs();
  HttpResult after = call(stack, kHostB, "GET", "/api/v1/quota", revoked);
  BOOST_TEST(after.status == 401, "host B still served a revoked key: " << after.body);
  BOOST_TEST_MESSAGE("host B refused the revoked key " << nowMs() - revoked_at
                                                       << " ms after the revocation committed");
  BOOST_TEST(call(stack, kHostA, "GET", "/api/v1/quota", revoked).status == 401);
}

BOOST_AUTO_TEST_CASE(each_webhook_is_delivered_once_with_a_dispatcher_on_each_host) {
  // Half the first attempts fail (even-numbered requests of each task's
  // first try), so both dispatchers' retry loops have due deliveries to
  // claim at the same time.
  std::mutex mu;
  std::map<std::string, int> attempts;  // by webhook-id
  std::map<std::string, int> accepted;  // answered 2xx, by webhook-id
  std::map<std::string, int> refused;   // answered 503, by webhook-id
  HookServer receiver([&](const ReceivedWebhook& w, size_t n) {
    std::lock_guard<std::mutex> lock(mu);
    const std::string& id = w.headers.at("webhook-id");
    const int seen = ++attempts[id];
    HookReply reply;
    if (seen == 1 && n % 2 == 0) reply.status = 503;
    ++(reply.status == 200 ? accepted : refused)[id];
    return reply;
  });
  Stack stack(twoHosts({{"EQ_WEBHOOK_RETRY_SCHEDULE", "0.2,0.2,0.2"}}));
  startDispatcherB(stack);
  Key key =
      eq::it::createKey(stack, "two-hosts-hooks", {"--quota-fast", "1000", "--rate", "100000"});
  constexpr int kTasks = 60;
  std::vector<std::string> ids;
  for (int i = 0; i < kTasks; ++i) {
    HttpResult r =
        call(stack, i % 2, "POST", "/api/v1/reply/async", key, asyncBody(receiver.url(), i));
    BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
    ids.push_back(taskIdOf(r));
  }
  int64_t until = nowMs() + 60000;
  auto delivered = [&] {
    return queryInt(stack, "SELECT count(*) FROM deliveries WHERE status = 'delivered'");
  };
  while (delivered() < kTasks && nowMs() < until) sleepMs(100);
  BOOST_REQUIRE_MESSAGE(delivered() == kTasks, "delivered " << delivered() << " of " << kTasks);
  sleepMs(1000);  // a second attempt made twice would arrive by now
  std::lock_guard<std::mutex> lock(mu);
  BOOST_TEST(attempts.size() == static_cast<size_t>(kTasks));
  // Each webhook answered 2xx exactly once, and tried again only after a
  // refusal: a duplicate of a delivered webhook shows as a second 2xx.
  for (const auto& [id, n] : attempts) {
    BOOST_TEST(accepted[id] == 1, id << " answered 2xx " << accepted[id] << " times");
    BOOST_TEST(n == 1 + refused[id], id << ": " << n << " attempts, " << refused[id] << " refused");
  }
  BOOST_TEST(!refused.empty(), "no first attempt failed: the test did not exercise the retries");
  BOOST_TEST(queryInt(stack, "SELECT count(*) FROM delivery_attempts") ==
             static_cast<int64_t>(receiver.received().size()));
}

BOOST_AUTO_TEST_CASE(host_a_killed_mid_calls_is_settled_by_host_b) {
  constexpr int kSync = 10;
  constexpr int kAsync = 10;
  constexpr int kQuota = 1000;
  eq::it::TaskWebhookReceiver receiver;
  Stack stack(twoHosts());
  startDispatcherB(stack);
  Key key = eq::it::createKey(stack, "two-hosts-kill",
                              {"--quota-fast", std::to_string(kQuota), "--rate", "100000"});
  // The worker stopped: calls stay in flight on host A.
  eq::it::Process* worker = stack.process("worker-fast");
  BOOST_REQUIRE(::kill(worker->pid(), SIGSTOP) == 0);
  std::vector<std::string> async_ids;
  for (int i = 0; i < kAsync; ++i) {
    HttpResult r =
        call(stack, kHostA, "POST", "/api/v1/reply/async", key, asyncBody(receiver.url(), i));
    BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
    async_ids.push_back(taskIdOf(r));
  }
  std::vector<std::jthread> sync_callers;  // their calls end when host A dies
  for (int i = 0; i < kSync; ++i) {
    sync_callers.emplace_back([&, i] {
      call(stack, kHostA, "POST", "/api/v1/reply", key,
           R"({"mode":"fast","message":"同步 )" + std::to_string(i) + R"(","reply_count":1})");
    });
  }
  // The async calls were answered (their jobs confirmed, their charges
  // closed); the sync ones wait for replies, their charges open.
  int64_t until = nowMs() + 20000;
  auto open = [&] { return queryInt(stack, "SELECT count(*) FROM open_charges"); };
  while (open() < kSync && nowMs() < until) sleepMs(50);
  BOOST_REQUIRE_MESSAGE(open() == kSync, "open charges before the kill: " << open());

  // Host A goes: its eq-api and its dispatcher, at once.
  stack.process("api-0")->kill9();
  stack.process("dispatcher")->kill9();
  sync_callers.clear();
  BOOST_REQUIRE(::kill(worker->pid(), SIGCONT) == 0);

  // Host B's dispatcher settles every charge A left open: the sync calls,
  // never answered, refunded once each; the async tasks run, their events
  // taken by B's dispatcher, their units kept.
  until = nowMs() + 60000;
  while (open() > 0 && nowMs() < until) sleepMs(200);
  BOOST_REQUIRE_MESSAGE(open() == 0, open() << " charges still open a minute after the kill");
  BOOST_REQUIRE(receiver.waitForAll(async_ids, 30000));
  BOOST_TEST(queryInt(stack,
                      "SELECT quota_fast FROM accounts a JOIN api_keys k ON "
                      "k.account_id = a.id WHERE k.id = '" +
                          key.id + "'") == kQuota - kAsync);
  BOOST_TEST(queryInt(stack, "SELECT count(*) FROM settlements") == kSync);
  BOOST_TEST(queryInt(stack, "SELECT count(*) FROM settlements WHERE action = 'refunded'") ==
             kSync);
  BOOST_TEST(queryInt(stack, "SELECT count(*) FROM tasks WHERE status = 'succeeded'") == kAsync);
  for (const auto& [task, n] : receiver.countsByTask()) {
    BOOST_TEST(n == 1, task << " delivered " << n << " times");
  }
  // Host B served all along.
  BOOST_TEST(call(stack, kHostB, "GET", "/api/v1/quota", key).status == 200);
}

BOOST_AUTO_TEST_CASE(postgresql_restarted_under_load_answers_503_meanwhile_and_loses_nothing) {
  eq::it::TaskWebhookReceiver receiver;
  Stack stack(twoHosts());
  Key key = eq::it::createKey(stack, "two-hosts-pg-restart",
                              {"--quota-fast", "100000", "--rate", "1000000"});
  // Four callers, two a host, submitting async calls back to back.
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::map<long, int> by_status;
  std::vector<std::string> accepted;
  bool every_503_says_when = true;
  std::vector<std::jthread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      for (int i = 0; !stop.load(); ++i) {
        HttpResult r = call(stack, c % 2, "POST", "/api/v1/reply/async", key,
                            asyncBody(receiver.url(), c * 100000 + i));
        std::lock_guard<std::mutex> lock(mu);
        ++by_status[r.status];
        if (r.status == 200) accepted.push_back(taskIdOf(r));
        if (r.status == 503 && r.headers.count("retry-after") == 0) every_503_says_when = false;
        if (r.status == 503) sleepMs(50);
      }
    });
  }
  sleepMs(1500);
  BOOST_REQUIRE_EQUAL(eq::it::postgresCtl("stop"), 0);
  sleepMs(2000);
  // While it is down, both hosts say they are not ready.
  BOOST_TEST(eq::it::httpRequest("GET", stack.url("/readyz", kHostA)).status == 503);
  BOOST_TEST(eq::it::httpRequest("GET", stack.url("/readyz", kHostB)).status == 503);
  BOOST_REQUIRE_EQUAL(eq::it::postgresCtl("start"), 0);
  // The same processes serve again, without a restart.
  int64_t until = nowMs() + 20000;
  while (nowMs() < until &&
         (eq::it::httpRequest("GET", stack.url("/readyz", kHostA)).status != 200 ||
          eq::it::httpRequest("GET", stack.url("/readyz", kHostB)).status != 200)) {
    sleepMs(100);
  }
  sleepMs(1500);
  stop = true;
  callers.clear();
  BOOST_TEST_MESSAGE("calls while PostgreSQL restarted: " << describe(by_status));
  BOOST_TEST(by_status[503] > 0, "no call saw the database down: " << describe(by_status));
  BOOST_TEST(
      by_status[200] + by_status[503] ==
          [&] {
            int n = 0;
            for (const auto& [s, k] : by_status) n += k;
            return n;
          }(),
      "every call answered 200 or 503: " << describe(by_status));
  BOOST_TEST(every_503_says_when, "a 503 without Retry-After");
  for (int host : {kHostA, kHostB}) {
    BOOST_TEST(call(stack, host, "GET", "/api/v1/quota", key).status == 200);
  }
  // Nothing accepted is lost: every task answered 200 succeeds and its
  // webhook arrives; units charged are exactly the tasks admitted.
  BOOST_REQUIRE(receiver.waitForAll(accepted, 60000));
  BOOST_TEST(queryInt(stack, "SELECT count(*) FROM tasks WHERE status = 'succeeded'") ==
             static_cast<int64_t>(accepted.size()));
  BOOST_TEST(eq::it::quotaOf(stack, key, "fast") == 100000 - static_cast<int64_t>(accepted.size()));
}

// `eqctl store copy` (issue 23, item 6): a SQLite deployment with keys,
// quota spent, tasks, deliveries and a developer-center invitation, stopped
// and copied into a new PostgreSQL schema, reads back the same through the
// API and eqctl once the stack runs on the copy.
BOOST_AUTO_TEST_CASE(store_copy_moves_a_stopped_sqlite_deployment_onto_postgresql) {
  char tmpl[] = "/tmp/eq-copy-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string server = std::getenv("EQ_TEST_PG_URL");
  const std::string schema = "copy_" + dir.substr(dir.size() - 6);
  std::string lowered;
  for (char c : schema) lowered += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto admin = eq::store::Db::open(eq::store::DbUrl::parse(server).value());
  BOOST_REQUIRE(admin.isOk());
  BOOST_REQUIRE(admin.value()->script("CREATE SCHEMA " + lowered).isOk());
  const std::string copy_url = server + "?options=-csearch_path%3D" + lowered;

  eq::it::TaskWebhookReceiver receiver;
  std::vector<Key> keys;
  std::vector<std::string> tasks;
  std::map<std::string, std::string> quota_before, task_before;
  std::vector<std::string> listings = {"key list", "task list", "delivery list", "account list"};
  std::map<std::string, std::string> eqctl_before;
  const auto split = [](const std::string& words) {
    std::vector<std::string> out;
    size_t at = 0;
    for (size_t sp; (sp = words.find(' ', at)) != std::string::npos; at = sp + 1) {
      out.push_back(words.substr(at, sp - at));
    }
    out.push_back(words.substr(at));
    return out;
  };
  const auto dataOf = [](const HttpResult& r) {
    rapidjson::Document d = eq::it::parse(r);
    rapidjson::StringBuffer b;
    rapidjson::Writer<rapidjson::StringBuffer> w(b);
    d["data"].Accept(w);
    return std::string(b.GetString());
  };
  {
    StackOptions o;
    o.worker_modes = {"fast"};
    o.env["EQ_DB_URL"] = "sqlite:" + dir + "/eq.db";
    Stack sqlite(o);
    BOOST_REQUIRE(!sqlite.onPostgres());
    for (int k = 0; k < 2; ++k) {
      keys.push_back(eq::it::createKey(sqlite, "copy-" + std::to_string(k),
                                       {"--quota-fast", "50", "--rate", "100000"}));
      for (int i = 0; i < 3; ++i) {
        BOOST_REQUIRE(
            eq::it::post(sqlite, "/api/v1/reply",
                         R"({"mode":"fast","message":"搬家 )" + std::to_string(i) + R"("})",
                         keys.back())
                .status == 200);
        HttpResult r = eq::it::post(sqlite, "/api/v1/reply/async",
                                    asyncBody(receiver.url(), k * 10 + i), keys.back());
        BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
        tasks.push_back(taskIdOf(r));
      }
    }
    BOOST_REQUIRE(receiver.waitForAll(tasks, 30000));
    int rc = -1;
    std::string invite = sqlite.eqctl({"account", "invite", "mover@example.com"}, &rc);
    BOOST_REQUIRE_MESSAGE(rc == 0, invite);
    for (const Key& k : keys) quota_before[k.id] = dataOf(eq::it::get(sqlite, "/api/v1/quota", &k));
    for (size_t i = 0; i < tasks.size(); ++i) {
      task_before[tasks[i]] = dataOf(eq::it::get(sqlite, "/api/v1/task/" + tasks[i], &keys[i / 3]));
    }
    BOOST_REQUIRE(sqlite.stopAll());
    for (const std::string& l : listings) eqctl_before[l] = sqlite.eqctl(split(l));
    // Into a database that is not empty: refused, nothing changed.
    std::string out = sqlite.eqctl({"store", "copy", "--to", copy_url}, &rc);
    BOOST_REQUIRE_MESSAGE(rc == 0, out);
    BOOST_TEST(out.find("copied ") != std::string::npos, out);
    BOOST_TEST(out.find(lowered) != std::string::npos);
    out = sqlite.eqctl({"store", "copy", "--to", copy_url}, &rc);
    BOOST_TEST(rc == 2, out);
    BOOST_TEST(out.find("already holds data") != std::string::npos, out);
  }
  {
    StackOptions o;
    o.worker_modes = {"fast"};
    o.env["EQ_DB_URL"] = copy_url;
    Stack copied(o);
    for (const Key& k : keys) {
      BOOST_TEST(dataOf(eq::it::get(copied, "/api/v1/quota", &k)) == quota_before[k.id]);
    }
    for (size_t i = 0; i < tasks.size(); ++i) {
      BOOST_TEST(dataOf(eq::it::get(copied, "/api/v1/task/" + tasks[i], &keys[i / 3])) ==
                 task_before[tasks[i]]);
    }
    for (const std::string& l : listings) {
      BOOST_TEST(copied.eqctl(split(l)) == eqctl_before[l], "eqctl " << l);
    }
    // The copy takes new writes: another call is charged there.
    BOOST_TEST(eq::it::post(copied, "/api/v1/reply", R"({"mode":"fast","message":"新家"})", keys[0])
                   .status == 200);
    BOOST_TEST(copied.eqctl({"account", "invite", "second@example.com"}).find("rror") ==
               std::string::npos);
  }
  (void)admin.value()->script("DROP SCHEMA " + lowered + " CASCADE");
  int ignored = std::system(("rm -rf '" + dir + "'").c_str());
  (void)ignored;
}

BOOST_AUTO_TEST_SUITE_END()
