// The retention purger's schedule: at start, in bounded batches, then once
// per interval.
#include "dispatcher/retention.h"

#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include "common/timefmt.h"
#include "tests/unit/temp_db.h"

using namespace eq;
using namespace eq::dispatch;

namespace {

struct Db : test::TempDb {
  CreatedKey key = newKey(10);
  Db() : TempDb("retention") {}
  void task(const std::string& id, int64_t created_at) {
    TaskRecord t{id, key.account_id, key.key_id, "req", "fast", TaskStatus::kQueued, "", "", 0,
                 "", created_at,     0,          0};
    BOOST_REQUIRE(store->createTask(t).isOk());
  }
  int64_t count(const char* table) {
    return std::stoll(scalar(std::string("SELECT count(*) FROM ") + table));
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(retention)

EQ_STORE_TEST_CASE(purges_at_start_in_batches_then_once_per_interval) {
  Db db;
  const int64_t day = 86'400'000;
  const int64_t now = 1'800'000'000'000;
  for (int i = 0; i < 7; ++i) db.task("tsk_old" + std::to_string(i), now - 8 * day);
  db.task("tsk_recent", now - day);
  AuthContext auth{db.key.key_id, db.key.account_id, db.key.display_prefix, 60};
  BOOST_REQUIRE(db.store->countRequest(auth, now - 2 * 3'600'000).isOk());
  BOOST_REQUIRE(db.store->countRequest(auth, now).isOk());

  RetentionOptions opts;
  opts.task_retention_ms = 7 * day;
  opts.interval_ms = 3'600'000;
  opts.batch = 3;
  RetentionPurger purger(*db.store, opts);

  // Batches of 3: 3, 3, 1 tasks, then idempotency keys, then rate windows.
  int steps = 0;
  while (purger.step(now)) {
    ++steps;
    BOOST_REQUIRE(steps < 20);
  }
  BOOST_TEST(steps >= 3);
  BOOST_TEST(purger.purgesFinished() == 1);
  BOOST_TEST(purger.lastPurge().tasks == 7);
  BOOST_TEST(purger.lastPurge().rate_counters == 1);
  BOOST_TEST(db.count("tasks") == 1);
  BOOST_TEST(db.count("rate_counters") == 1);

  // Nothing until the interval has passed, even with new old rows.
  db.task("tsk_old_again", now - 8 * day);
  BOOST_TEST(!purger.step(now + opts.interval_ms - 1));
  BOOST_TEST(purger.purgesFinished() == 1);
  BOOST_TEST(db.count("tasks") == 2);
  while (purger.step(now + opts.interval_ms)) {
  }
  BOOST_TEST(purger.purgesFinished() == 2);
  BOOST_TEST(purger.lastPurge().tasks == 1);
  BOOST_TEST(db.count("tasks") == 1);
}

BOOST_AUTO_TEST_SUITE_END()
