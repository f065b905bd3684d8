// eq-api's database thread on a disk that fills (tests/unit/faulty_vfs.h
// makes the WAL's writes fail with SQLITE_FULL): the batch's requests get
// 503 marked storage_failed, the /readyz step fails although the write lock
// can be had, and once space returns the instance heartbeat alone (no
// request writes) ends the state within a few heartbeat retries.
#include <sqlite3.h>
#include <uv.h>

#include <boost/test/unit_test.hpp>
#include <memory>
#include <thread>

#include "api/db_thread.h"
#include "tests/unit/faulty_vfs.h"
#include "tests/unit/temp_db.h"

namespace eq::api {
namespace {

struct StorageFixture {
  test::FaultyVfs vfs;  // before the database, whose files it opens
  test::TempDb db{"dbthread-storage"};
  CreatedKey key = db.newKey(100);
  uv_loop_t loop;
  SystemClock clock;
  std::unique_ptr<DbThread> thread;
  int answered = 0;

  StorageFixture() {
    BOOST_REQUIRE(db.store->registerInstance("instance-1", 1, nowMs()).isOk());
    uv_loop_init(&loop);
    thread = std::make_unique<DbThread>(&loop, std::move(db.store), &clock, "instance-1");
    thread->start();
  }
  ~StorageFixture() {
    thread->stop();
    uv_run(&loop, UV_RUN_DEFAULT);
    thread->join();
    thread.reset();
    uv_loop_close(&loop);
  }

  // Submits one request and turns the loop until it is answered.
  DbRequest runOne(std::unique_ptr<DbRequest> r) {
    DbRequest out;
    int want = ++answered;
    int got = 0;
    r->now_ms = nowMs();
    r->deadline_ms = r->now_ms + 5'000;
    r->done = [&](DbRequest& d) {
      out.status = d.status;
      out.storage_failed = d.storage_failed;
      ++got;
    };
    thread->submit(std::move(r));
    while (got == 0) uv_run(&loop, UV_RUN_ONCE);
    BOOST_TEST(got == 1, "request " << want << " answered once");
    return out;
  }
  DbRequest charge() {
    auto r = std::make_unique<DbRequest>();
    std::string account = key.account_id;
    r->work = [account](Store& s, const AuthContext*) -> Status {
      Result<ChargeOutcome> c = s.chargeQuota(account, "fast", nowMs());
      return c.isOk() ? Status::ok() : c.status();
    };
    return runOne(std::move(r));
  }
  // What /readyz submits (api/router.cc).
  DbRequest ready() {
    auto r = std::make_unique<DbRequest>();
    r->writes = false;
    r->work = [](Store& s, const AuthContext*) { return s.storageStatus(); };
    return runOne(std::move(r));
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(db_thread_storage_tests)

BOOST_FIXTURE_TEST_CASE(full_disk_answers_503_and_recovers_by_the_heartbeat, StorageFixture) {
  BOOST_TEST(charge().status.isOk());
  BOOST_TEST(ready().status.isOk());

  vfs.failWrites(SQLITE_FULL, test::FaultyVfs::kWal);
  DbRequest refused = charge();
  BOOST_TEST(refused.status.code() == 503);
  BOOST_TEST(refused.storage_failed, "the 503 says the disk, not a busy lock");
  DbRequest not_ready = ready();
  BOOST_TEST(!not_ready.status.isOk(), "/readyz fails while nothing can be written");
  BOOST_TEST(not_ready.storage_failed);
  // Later batches try again and fail the same way; the thread lives on.
  BOOST_TEST(charge().storage_failed);

  // Space returns; no request writes: the heartbeat (retried every
  // kHeartbeatRetryMs while it fails) is what makes the database ready.
  vfs.heal();
  int64_t healed = nowMs();
  bool ok = false;
  while (!ok && nowMs() - healed < 2'000) {
    ok = ready().status.isOk();
    if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  BOOST_TEST(ok, "ready again within 2 s of the fault's end, by the heartbeat alone");
  BOOST_TEST_MESSAGE("ready " << nowMs() - healed << " ms after space returned");
  DbRequest again = charge();
  BOOST_TEST(again.status.isOk());
  BOOST_TEST(!again.storage_failed);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace eq::api
