// A Store whose writes fail for want of space (SQLITE_FULL) or with an I/O
// error (SQLITE_IOERR), on its WAL or its database file (tests/unit/
// faulty_vfs.h): the write is refused and nothing of it stays,
// storageFailing() says so and ping() (/readyz) fails although taking the
// write lock still works, reads go on, and the first write that commits
// after the fault ends it.
#include <sqlite3.h>

#include <boost/test/unit_test.hpp>
#include <string>

#include "common/timefmt.h"
#include "store/store.h"
#include "tests/unit/faulty_vfs.h"
#include "tests/unit/temp_db.h"

using namespace eq;

namespace {

// The VFS first: the TempDb's Store opens its files through it.
struct FaultyDb {
  test::FaultyVfs vfs;
  test::TempDb db{"storage"};
  CreatedKey key = db.newKey(100);

  // One charge in its own transaction, as eq-api's database thread writes.
  Status charge() {
    if (Status s = db.store->begin(); !s.isOk()) return s;
    Result<ChargeOutcome> c = db.store->chargeQuota(key.account_id, "fast", nowMs());
    if (!c.isOk()) {
      db.store->rollback();
      return c.status();
    }
    return db.store->commit();
  }
  int64_t fastLeft() {
    Result<AccountQuota> q = db.store->quota(key.account_id);
    BOOST_REQUIRE_MESSAGE(q.isOk(), q.status().msg());
    return q.value().remaining.fast;
  }

  void failThenRecover(int rc, int kinds) {
    BOOST_REQUIRE(charge().isOk());
    BOOST_TEST(!db.store->storageFailing());
    BOOST_TEST(db.store->ping().isOk());

    vfs.failWrites(rc, kinds);
    Status s = charge();
    BOOST_TEST(!s.isOk(), "a write on a failing disk fails");
    BOOST_TEST(s.code() == 503);
    BOOST_TEST(vfs.refused() > 0, "the fault was hit");
    BOOST_TEST(db.store->storageFailing());
    BOOST_TEST(!db.store->inTransaction(), "the failed transaction is gone, its lock released");
    Status p = db.store->ping();
    BOOST_TEST(!p.isOk(), "ping (the /readyz step) fails while writes fail");
    BOOST_TEST(p.msg().find("cannot write") != std::string::npos, p.msg());
    BOOST_TEST(fastLeft() == 99, "reads go on; the refused charge left nothing");
    BOOST_TEST(!charge().isOk(), "and so does every write after it");

    vfs.heal();
    // Nothing has written since: still not ready, until a write commits.
    BOOST_TEST(!db.store->ping().isOk());
    BOOST_TEST(charge().isOk(), "the first write after the fault commits");
    BOOST_TEST(!db.store->storageFailing());
    BOOST_TEST(db.store->ping().isOk());
    BOOST_TEST(fastLeft() == 98);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(storage_failure_tests)

BOOST_FIXTURE_TEST_CASE(full_wal_refuses_writes_until_space_returns, FaultyDb) {
  failThenRecover(SQLITE_FULL, test::FaultyVfs::kWal);
}

BOOST_FIXTURE_TEST_CASE(io_error_on_the_wal_refuses_writes_until_it_clears, FaultyDb) {
  failThenRecover(SQLITE_IOERR_WRITE, test::FaultyVfs::kWal);
}

BOOST_FIXTURE_TEST_CASE(full_database_file_refuses_writes_until_space_returns, FaultyDb) {
  // Every file at once: the WAL, the database file (where checkpoints
  // write) and a journal, should one be used.
  failThenRecover(SQLITE_FULL,
                  test::FaultyVfs::kWal | test::FaultyVfs::kMainDb | test::FaultyVfs::kJournal);
}

BOOST_FIXTURE_TEST_CASE(a_busy_database_is_not_a_storage_failure, FaultyDb) {
  // Another connection holds the write lock: a write fails (busy), but the
  // storage is fine and /readyz's answer is the lock's, not "cannot write".
  sqlite3* other = nullptr;
  BOOST_REQUIRE(sqlite3_open(db.path.c_str(), &other) == SQLITE_OK);
  BOOST_REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  db.store->setBusyTimeout(10);
  BOOST_TEST(!charge().isOk());
  BOOST_TEST(!db.store->storageFailing());
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  BOOST_TEST(db.store->ping().isOk());
}

BOOST_AUTO_TEST_SUITE_END()
