// Each enum's parse/name pair round-trips, refuses anything else, and the
// SQL CHECK constraints of tasks and deliveries refuse what the parse
// functions refuse.
#include "common/enums.h"

#include <sqlite3.h>

#include <boost/test/unit_test.hpp>

#include "tests/unit/temp_db.h"

using namespace eq;

namespace {

int execRaw(const std::string& path, const std::string& sql) {
  sqlite3* raw = nullptr;
  sqlite3_open(path.c_str(), &raw);
  int rc = sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr);
  sqlite3_close(raw);
  return rc;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(enums_tests)

BOOST_AUTO_TEST_CASE(names_round_trip) {
  for (Mode m : {Mode::kFast, Mode::kStandard, Mode::kPerfect}) {
    BOOST_TEST((parseMode(modeName(m)) == m));
  }
  for (TaskStatus s : {TaskStatus::kQueued, TaskStatus::kRunning, TaskStatus::kSucceeded,
                       TaskStatus::kFailed}) {
    BOOST_TEST((parseTaskStatus(taskStatusName(s)) == s));
  }
  for (DeliveryStatus s :
       {DeliveryStatus::kPending, DeliveryStatus::kDelivered, DeliveryStatus::kFailed}) {
    BOOST_TEST((parseDeliveryStatus(deliveryStatusName(s)) == s));
  }
  for (JobKind k : {JobKind::kReply, JobKind::kAnalyze}) {
    BOOST_TEST((parseJobKind(jobKindName(k)) == k));
  }
  BOOST_TEST(!parseMode("slow").has_value());
  BOOST_TEST(!parseMode("Fast").has_value());
  BOOST_TEST(!parseMode("").has_value());
  BOOST_TEST(!parseTaskStatus("lost").has_value());
  BOOST_TEST(!parseDeliveryStatus("retry").has_value());
  BOOST_TEST(!parseJobKind("poison").has_value());
}

BOOST_AUTO_TEST_CASE(sql_checks_refuse_what_the_enums_refuse) {
  test::TempDb db("enums");
  CreatedKey k = db.newKey();
  TaskRecord t;
  t.task_id = "tsk_enum";
  t.account_id = k.account_id;
  t.key_id = k.key_id;
  t.request_id = "req_enum";
  t.mode = modeName(Mode::kFast);
  t.created_at = 1;
  BOOST_REQUIRE(db.store->createTask(t).isOk());
  // Every named value is accepted...
  for (TaskStatus s : {TaskStatus::kQueued, TaskStatus::kRunning, TaskStatus::kSucceeded,
                       TaskStatus::kFailed}) {
    BOOST_TEST(execRaw(db.path, std::string("UPDATE tasks SET status = '") + taskStatusName(s) +
                                    "'") == SQLITE_OK);
  }
  for (Mode m : {Mode::kFast, Mode::kStandard, Mode::kPerfect}) {
    BOOST_TEST(execRaw(db.path, std::string("UPDATE tasks SET mode = '") + modeName(m) + "'") ==
               SQLITE_OK);
  }
  BOOST_REQUIRE(
      db.store->createDelivery(t.task_id, "https://example.com/hook", "task.succeeded", 1).isOk());
  for (DeliveryStatus s :
       {DeliveryStatus::kPending, DeliveryStatus::kDelivered, DeliveryStatus::kFailed}) {
    BOOST_TEST(execRaw(db.path, std::string("UPDATE deliveries SET status = '") +
                                    deliveryStatusName(s) + "'") == SQLITE_OK);
  }
  // ...and anything else is refused by the database itself.
  BOOST_TEST(execRaw(db.path, "UPDATE deliveries SET status = 'retry'") == SQLITE_CONSTRAINT);
  BOOST_TEST(execRaw(db.path, "UPDATE tasks SET status = 'lost'") == SQLITE_CONSTRAINT);
  BOOST_TEST(execRaw(db.path, "UPDATE tasks SET mode = 'slow'") == SQLITE_CONSTRAINT);
  t.task_id = "tsk_enum2";
  t.mode = "slow";
  BOOST_TEST(!db.store->createTask(t).isOk());
}

BOOST_AUTO_TEST_SUITE_END()
