// The database thread of eq-api (api/db_thread.h) and the key cache in front
// of it (api/auth_cache.h), on a real database (both engines, but for the
// held SQLite write lock) and a real libuv loop.
#include "api/db_thread.h"

#include <sqlite3.h>
#include <uv.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <set>
#include <thread>

#include "api/auth_cache.h"
#include "common/crypto.h"
#include "tests/unit/temp_db.h"

namespace eq::api {
namespace {

// A loop and a DbThread over a TempDb's store; run() turns the loop until
// `n` requests have come back.
struct DbFixture : test::TempDb {
  uv_loop_t loop;
  SystemClock clock;
  std::unique_ptr<DbThread> db;
  int answered = 0;
  CreatedKey key;
  std::string digest;

  DbFixture() : test::TempDb("dbthread") {
    NewKeyRequest req;
    req.name = "t";
    req.quota = QuotaUnits{100, 100, 100};
    req.expire_at_ms = nowMs() + 86'400'000;
    req.rate_limit_per_min = 10;
    auto k = store->createKey(req);
    BOOST_REQUIRE(k.isOk());
    key = k.value();
    digest = crypto::sha256(key.api_key);
    uv_loop_init(&loop);
    db = std::make_unique<DbThread>(&loop, std::move(store), &clock);
    db->start();
  }
  ~DbFixture() {
    db->stop();
    uv_run(&loop, UV_RUN_DEFAULT);  // until the thread closed its handle
    db->join();
    db.reset();
    uv_loop_close(&loop);
  }

  std::unique_ptr<DbRequest> request(int64_t deadline_in_ms = 60'000) {
    auto r = std::make_unique<DbRequest>();
    r->now_ms = nowMs();
    r->deadline_ms = r->now_ms + deadline_in_ms;
    r->done = [this](DbRequest&) { ++answered; };
    return r;
  }
  std::unique_ptr<DbRequest> authed() {
    auto r = request();
    r->key_digest = digest;
    r->env = "production";
    r->count_rate = true;
    return r;
  }
  // GET /quota's request: the key's quota read with the batch's others.
  std::unique_ptr<DbRequest> quotaRead() {
    auto r = authed();
    r->writes = false;
    r->reads_quota = true;
    return r;
  }
  void run(int n) {
    while (answered < n) uv_run(&loop, UV_RUN_ONCE);
  }
  int64_t number(const std::string& sql) { return std::stoll(scalar(sql)); }
  // PostgreSQL: another connection, in a transaction that holds the
  // account's advisory lock (Store::lockAccounts') until its commit.
  std::unique_ptr<store::Db> holdAccountLock(const std::string& account_id) {
    std::unique_ptr<store::Db> holder = raw();
    BOOST_REQUIRE(holder->begin().isOk());
    auto held = holder->exec(store::Sql{"SELECT pg_advisory_xact_lock(1163022657, hashtext(?))"},
                             {account_id});
    BOOST_REQUIRE_MESSAGE(held.isOk(), held.status().msg());
    return holder;
  }
  // Turns the loop until a connection waits for an account's advisory lock
  // (bounded well under the store's lock timeout); how many wait.
  int64_t awaitAccountLockWaiter() {
    const std::string waiting =
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 1163022657 "
        "AND NOT granted";
    const int64_t give_up = nowMs() + 4'000;
    while (number(waiting) == 0 && nowMs() < give_up) {
      uv_run(&loop, UV_RUN_NOWAIT);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return number(waiting);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(db_thread_tests)

EQ_STORE_FIXTURE_TEST_CASE(rate_counts_are_exact_when_batched, DbFixture) {
  // 50 requests of one key submitted at once land in few batches; each must
  // own one count of the window, and exactly the limit (10) is allowed.
  std::vector<DbRequest*> seen;
  std::multiset<int> remaining;
  int allowed = 0;
  for (int i = 0; i < 50; ++i) {
    auto r = authed();
    r->done = [&](DbRequest& d) {
      ++answered;
      BOOST_TEST(d.status.isOk());
      BOOST_TEST(d.authenticated);
      if (d.rate.allowed) {
        ++allowed;
        remaining.insert(d.rate.remaining);
      }
    };
    db->submit(std::move(r));
  }
  run(50);
  BOOST_TEST(allowed == 10);
  BOOST_TEST(remaining.size() == 10u);
  for (int i = 0; i < 10; ++i) BOOST_TEST(remaining.count(i) == 1u, "remaining " << i);
  BOOST_TEST(number("SELECT sum(count) FROM rate_counters") == 50);
}

EQ_STORE_FIXTURE_TEST_CASE(a_failing_request_rolls_back_only_its_own_writes, DbFixture) {
  std::vector<Status> out(3);
  for (int i = 0; i < 3; ++i) {
    auto r = request();
    r->work = [this, i](Store& s, const AuthContext*) -> Status {
      Result<ChargeOutcome> c = s.chargeQuota(key.account_id, "fast", nowMs());
      if (!c.isOk()) return c.status();
      return i == 1 ? Status(503, "the second request fails after charging") : Status::ok();
    };
    r->done = [&out, i, this](DbRequest& d) {
      out[static_cast<std::size_t>(i)] = d.status;
      ++answered;
    };
    db->submit(std::move(r));
  }
  run(3);
  BOOST_TEST(out[0].isOk());
  BOOST_TEST(out[1].code() == 503);
  BOOST_TEST(out[2].isOk());
  BOOST_TEST(number("SELECT quota_fast FROM accounts") == 98, "two charges kept, one undone");
}

EQ_STORE_FIXTURE_TEST_CASE(quota_reads_of_a_batch_each_get_their_own_account, DbFixture) {
  NewKeyRequest req;
  req.name = "other";
  req.quota = QuotaUnits{7, 8, 9};
  req.expire_at_ms = nowMs() + 86'400'000;
  req.rate_limit_per_min = 10;
  std::unique_ptr<Store> other = openAnother();
  Result<CreatedKey> second = other->createKey(req);
  BOOST_REQUIRE(second.isOk());

  // Submitted in one loop turn: one batch, whose reads come before its
  // work (the charge between them is not seen by either read of A).
  std::vector<std::optional<AccountQuota>> read(3);
  const std::string digests[] = {digest, crypto::sha256(second.value().api_key), digest};
  for (std::size_t i = 0; i < 3; ++i) {
    auto r = quotaRead();
    r->key_digest = digests[i];
    r->done = [&read, i, this](DbRequest& d) {
      ++answered;
      BOOST_TEST(d.status.isOk());
      read[i] = d.quota;
    };
    db->submit(std::move(r));
    if (i == 0) {
      auto charge = request();
      charge->work = [this](Store& s, const AuthContext*) -> Status {
        return s.chargeQuota(key.account_id, "fast", nowMs()).status();
      };
      db->submit(std::move(charge));
    }
  }
  run(4);
  BOOST_REQUIRE(read[0] && read[1] && read[2]);
  BOOST_TEST(read[0]->remaining.fast == 100);
  BOOST_TEST(read[2]->remaining.fast == 100);
  BOOST_TEST(read[1]->remaining.fast == 7);
  BOOST_TEST(read[1]->remaining.standard == 8);
  BOOST_TEST(read[1]->remaining.perfect == 9);
  BOOST_TEST(db->batches() == 1);

  // The next batch sees the charge.
  auto after = quotaRead();
  after->done = [&](DbRequest& d) {
    ++answered;
    BOOST_REQUIRE(d.quota.has_value());
    BOOST_TEST(d.quota->remaining.fast == 99);
  };
  db->submit(std::move(after));
  run(5);
}

EQ_STORE_FIXTURE_TEST_CASE(a_quota_read_over_the_rate_limit_reads_nothing, DbFixture) {
  // The key allows 10 a minute: of 12 reads, the two over it get no quota.
  int read = 0, refused = 0;
  for (int i = 0; i < 12; ++i) {
    auto r = quotaRead();
    r->done = [&](DbRequest& d) {
      ++answered;
      BOOST_TEST(d.status.isOk());
      if (d.rate.allowed) {
        BOOST_TEST(d.quota.has_value());
        ++read;
      } else {
        BOOST_TEST(!d.quota.has_value());
        ++refused;
      }
    };
    db->submit(std::move(r));
  }
  run(12);
  BOOST_TEST(read == 10);
  BOOST_TEST(refused == 2);
}

// A call's charge (DbRequest::charge) is made with the batch's others, for
// its key's account and key, and only for an admitted request: of 12 calls
// in one batch on a key allowing 10 a minute, 10 are charged (each with its
// open charge) and the two over the limit are not; a call with a key the
// store does not know is not charged either.
EQ_STORE_FIXTURE_TEST_CASE(calls_are_charged_together_only_when_admitted, DbFixture) {
  const int64_t before =
      number("SELECT quota_fast FROM accounts WHERE id = '" + key.account_id + "'");
  int charged = 0, refused = 0;
  const auto call = [&](int i) {
    auto r = authed();
    const int64_t now = r->now_ms;
    r->charge = Store::ChargeCall{OpenCharge{"req_dt" + std::to_string(i), "api_1", "", "fast", "",
                                             now + 30'000, now, "", ""},
                                  "", ""};
    r->done = [&](DbRequest& d) {
      ++answered;
      BOOST_TEST(d.status.isOk(), d.status.msg());
      if (d.rate.allowed) {
        BOOST_TEST((d.charged && *d.charged == ChargeOutcome::kCharged));
        ++charged;
      } else {
        BOOST_TEST(!d.charged.has_value());
        ++refused;
      }
    };
    return r;
  };
  for (int i = 0; i < 12; ++i) db->submit(call(i));
  auto stranger = call(99);
  stranger->key_digest = crypto::sha256("eq_live_no_such_key_at_all_000000000000");
  stranger->auth.reset();
  stranger->done = [&](DbRequest& d) {
    ++answered;
    BOOST_TEST(!d.authenticated);
    BOOST_TEST(!d.charged.has_value());
  };
  db->submit(std::move(stranger));
  run(13);
  BOOST_TEST(charged == 10);
  BOOST_TEST(refused == 2);
  BOOST_TEST(db->batches() == 1);
  BOOST_TEST(number("SELECT quota_fast FROM accounts WHERE id = '" + key.account_id + "'") ==
             before - 10);
  BOOST_TEST(number("SELECT count(*) FROM open_charges WHERE account_id = '" + key.account_id +
                    "' AND instance_id = 'api_1'") == 10);
  BOOST_TEST(number("SELECT count(*) FROM open_charges WHERE request_id = 'req_dt99'") == 0);
}

EQ_STORE_FIXTURE_TEST_CASE(a_cached_key_is_refused_once_revoked, DbFixture) {
  int64_t epoch = -1;
  std::optional<AuthContext> who;
  auto first = authed();
  first->done = [&](DbRequest& d) {
    ++answered;
    BOOST_TEST(d.looked_up);
    BOOST_TEST(d.authenticated);
    epoch = d.key_epoch;
    who = d.auth;
  };
  db->submit(std::move(first));
  run(1);
  BOOST_REQUIRE(who.has_value());

  // The cache's copy is trusted while the epoch stands...
  auto cached = authed();
  cached->auth = who;
  cached->auth_epoch = epoch;
  cached->done = [&](DbRequest& d) {
    ++answered;
    BOOST_TEST(!d.looked_up);
    BOOST_TEST(d.authenticated);
  };
  db->submit(std::move(cached));
  run(2);

  // ...and not after a revocation by another process (eqctl).
  std::unique_ptr<Store> other = openAnother();
  BOOST_REQUIRE(other->revokeKey(key.key_id).isOk());
  auto stale = authed();
  stale->auth = who;
  stale->auth_epoch = epoch;
  stale->done = [&](DbRequest& d) {
    ++answered;
    BOOST_TEST(d.status.isOk());
    BOOST_TEST(d.looked_up);
    BOOST_TEST(!d.authenticated);
    BOOST_TEST(d.key_epoch > epoch);
  };
  db->submit(std::move(stale));
  run(3);
}

// Issue 23: a developer-center request names its session, not its account;
// the batch finds the session before its account locks and locks the
// session's account with the others (a playground call charges it like a
// key's). On PostgreSQL a connection holding that account's advisory lock
// keeps the request waiting on it (seen in pg_locks) until it lets go; on
// SQLite, whose lock is the whole database's, the session is found and the
// work runs on it. An unknown session runs no work.
EQ_STORE_FIXTURE_TEST_CASE(a_sessions_account_is_locked_before_its_work, DbFixture) {
  const int64_t now = nowMs();
  std::unique_ptr<Store> setup = openAnother();
  Result<Person> person = setup->registerPerson("lock@example.com", "hash", now);
  BOOST_REQUIRE_MESSAGE(person.isOk(), person.status().msg());
  const std::string account = person.value().account_id;
  Result<NewSession> session = setup->createSession(person.value().person_id, now);
  BOOST_REQUIRE(session.isOk());
  const int64_t before = number("SELECT quota_fast FROM accounts WHERE id = '" + account + "'");

  const bool postgres = test::currentEngine() == test::Engine::kPostgres;
  std::unique_ptr<store::Db> holder;
  if (postgres) holder = holdAccountLock(account);

  // The work runs on the database thread, where Boost.Test may not be
  // called (it is not thread-safe): it notes what it saw, and the loop
  // thread checks that once the request is answered.
  bool charged = false, unknown_answered = false, work_had_auth = false, unknown_ran = false;
  auto known = request();
  known->session_id = session.value().session_id;
  const DbRequest* sent = known.get();
  known->work = [&, sent](Store& s, const AuthContext* auth) -> Status {
    work_had_auth = auth != nullptr;
    if (!sent->session) return Status(500, "the work ran without its session");
    return s.chargeQuota(sent->session->account_id, "fast", nowMs()).status();
  };
  known->done = [&](DbRequest& d) {
    ++answered;
    charged = d.status.isOk() && d.work_ran;
    BOOST_TEST(d.status.isOk(), d.status.msg());
    BOOST_TEST(!work_had_auth);
    BOOST_REQUIRE(d.session.has_value());
    BOOST_TEST(d.session->account_id == account);
  };
  auto unknown = request();
  unknown->session_id = "no-such-session";
  unknown->work = [&](Store&, const AuthContext*) -> Status {
    unknown_ran = true;
    return Status::ok();
  };
  unknown->done = [&](DbRequest& d) {
    ++answered;
    unknown_answered = true;
    BOOST_TEST(d.status.isOk());
    BOOST_TEST(!d.session.has_value());
    BOOST_TEST(!d.work_ran);
    BOOST_TEST(!unknown_ran, "work ran for an unknown session");
  };
  db->submit(std::move(unknown));
  run(1);
  BOOST_TEST(unknown_answered);
  db->submit(std::move(known));

  if (postgres) {
    // The batch's connection asks for the held lock and waits; nothing is
    // answered meanwhile.
    BOOST_TEST(awaitAccountLockWaiter() == 1,
               "the session's request never asked for its account's lock");
    BOOST_TEST(answered == 1, "the session's request ran past its account's held lock");
    BOOST_REQUIRE(holder->commit().isOk());
  }
  run(2);
  BOOST_TEST(charged);
  BOOST_TEST(number("SELECT quota_fast FROM accounts WHERE id = '" + account + "'") == before - 1);
}

// A session's idle clock moves at most once a minute, and its move is a
// write of the session's account: taken after the account's lock, as
// every writer of the account's rows takes it, never before (a batch that
// touched the session first and then waited for the account could cross
// another host's batch holding the account and ending its sessions). A
// read-only request of a session seen 5 minutes ago waits for its
// account's held lock (PostgreSQL) and then moves the clock; one seen
// within the minute neither waits nor writes.
EQ_STORE_FIXTURE_TEST_CASE(a_sessions_idle_clock_moves_under_its_accounts_lock, DbFixture) {
  const int64_t now = nowMs();
  std::unique_ptr<Store> setup = openAnother();
  Result<Person> person = setup->registerPerson("idle@example.com", "hash", now);
  BOOST_REQUIRE_MESSAGE(person.isOk(), person.status().msg());
  const std::string account = person.value().account_id;
  Result<NewSession> idle = setup->createSession(person.value().person_id, now - 300'000);
  Result<NewSession> fresh = setup->createSession(person.value().person_id, now - 1'000);
  BOOST_REQUIRE(idle.isOk() && fresh.isOk());
  // The sessions told apart by their creation time.
  const auto lastSeen = [&](int64_t created_at) {
    return number("SELECT last_seen_at FROM portal_sessions WHERE created_at = " +
                  std::to_string(created_at));
  };
  const bool postgres = test::currentEngine() == test::Engine::kPostgres;
  std::unique_ptr<store::Db> holder;
  if (postgres) holder = holdAccountLock(account);
  const auto reader = [&](const NewSession& s) {
    auto r = request();
    r->session_id = s.session_id;
    r->writes = false;
    r->work = [](Store&, const AuthContext*) -> Status { return Status::ok(); };
    r->done = [&](DbRequest& d) {
      ++answered;
      BOOST_TEST(d.status.isOk(), d.status.msg());
      BOOST_TEST(d.session.has_value());
    };
    return r;
  };
  // Seen a second ago: answered at once, held lock or not, and not written.
  db->submit(reader(fresh.value()));
  run(1);
  BOOST_TEST(lastSeen(now - 1'000) == now - 1'000);
  auto stale = reader(idle.value());
  const int64_t asked_at = stale->now_ms;
  db->submit(std::move(stale));
  if (postgres) {
    BOOST_TEST(awaitAccountLockWaiter() == 1, "the idle clock moved without its account's lock");
    BOOST_TEST(answered == 1);
    // The holder, as another host's batch would, writes the session while
    // it holds the account: the waiting batch has not taken the row.
    BOOST_REQUIRE(holder->exec(store::Sql{"SET LOCAL lock_timeout = '300ms'"}, {}).isOk());
    auto ended = holder->exec(
        store::Sql{"UPDATE portal_sessions SET last_seen_at = last_seen_at WHERE created_at = ?"},
        {now - 300'000});
    BOOST_TEST(ended.isOk(), "the batch took the session's row before its account's lock: "
                                 << ended.status().msg());
    BOOST_REQUIRE(holder->commit().isOk());
  }
  run(2);
  BOOST_TEST(lastSeen(now - 300'000) == asked_at);
}

BOOST_FIXTURE_TEST_CASE(a_held_write_lock_delays_then_expires_only_db_requests, DbFixture) {
  sqlite3* lock = nullptr;
  BOOST_REQUIRE(sqlite3_open(path.c_str(), &lock) == SQLITE_OK);
  BOOST_REQUIRE(sqlite3_exec(lock, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);

  bool short_done = false, long_done = false;
  auto quick = request(50);  // gives up while the lock is held
  quick->work = [this](Store& s, const AuthContext*) -> Status {
    return s.chargeQuota(key.account_id, "fast", nowMs()).status();
  };
  quick->done = [&](DbRequest& d) {
    ++answered;
    short_done = true;
    BOOST_TEST(d.status.code() == 503);
    BOOST_TEST(!d.work_ran);
  };
  auto patient = request(60'000);  // waits for the lock
  patient->work = quick->work;
  patient->done = [&](DbRequest& d) {
    ++answered;
    long_done = true;
    BOOST_TEST(d.status.isOk());
    BOOST_TEST(d.work_ran);
  };
  db->submit(std::move(quick));
  db->submit(std::move(patient));
  run(1);
  BOOST_TEST(short_done);
  BOOST_TEST(!long_done, "the patient request cannot have run while the lock is held");
  sqlite3_exec(lock, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(lock);
  run(2);
  BOOST_TEST(long_done);
  BOOST_TEST(number("SELECT quota_fast FROM accounts") == 99, "charged once, by the patient one");
}

BOOST_AUTO_TEST_CASE(auth_cache_drops_old_epochs_and_old_entries) {
  AuthCache cache;
  AuthContext a;
  a.key_id = "key_1";
  cache.put("d1", a, 5, 1000);
  BOOST_REQUIRE(cache.find("d1", 1001) != nullptr);
  BOOST_TEST(cache.find("d1", 1001)->epoch == 5);
  BOOST_TEST(cache.find("d2", 1001) == nullptr);
  BOOST_TEST(cache.find("d1", 1000 + AuthCache::kTtlMs) == nullptr);
  cache.sawEpoch(6);
  BOOST_TEST(cache.find("d1", 1001) == nullptr, "read under an older epoch");
  cache.put("d1", a, 6, 2000);
  BOOST_TEST(cache.find("d1", 2001) != nullptr);
  cache.forget("d1");
  BOOST_TEST(cache.find("d1", 2001) == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace eq::api
