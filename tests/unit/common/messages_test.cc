#include "common/messages.h"

#include <boost/test/unit_test.hpp>

#include "tests/unit/hostile_numbers.h"

using namespace eq;

BOOST_AUTO_TEST_SUITE(message_formats)

BOOST_AUTO_TEST_CASE(job_round_trips) {
  msg::Job j;
  j.kind = "reply";
  j.request_id = "req_1";
  j.task_id = "tsk_1";
  j.mode = "perfect";
  j.message = "他说\"晚安\"\n";
  j.scene = "dating";
  j.reply_count = 4;
  j.deadline_ms = 123;
  auto back = msg::decodeJob(msg::encodeJob(j));
  BOOST_REQUIRE(back.isOk());
  BOOST_TEST(back.value().message == j.message);
  BOOST_TEST(back.value().task_id == "tsk_1");
  BOOST_TEST(back.value().reply_count == 4);
  BOOST_TEST(back.value().deadline_ms == 123);
}

BOOST_AUTO_TEST_CASE(malformed_jobs_are_rejected) {
  BOOST_TEST(!msg::decodeJob("not json").isOk());
  BOOST_TEST(!msg::decodeJob(R"({"v":1,"kind":"reply","request_id":"r","message":"x"})").isOk());
  BOOST_TEST(!msg::decodeJob(R"({"v":2,"kind":"analyze","request_id":"r","message":"x"})").isOk());
}

BOOST_AUTO_TEST_CASE(task_event_carries_result_and_error) {
  msg::TaskEvent e{"task.succeeded", "tsk_1", "req_1", "fast", 5, R"({"replies":[]})", 0, ""};
  auto back = msg::decodeTaskEvent(msg::encodeTaskEvent(e));
  BOOST_REQUIRE(back.isOk());
  BOOST_TEST(back.value().result_json == R"({"replies":[]})");
  msg::TaskEvent f{"task.failed", "tsk_2", "req_2", "fast", 5, "", 500, "generation failed"};
  auto fb = msg::decodeTaskEvent(msg::encodeTaskEvent(f));
  BOOST_REQUIRE(fb.isOk());
  BOOST_TEST(fb.value().error_code == 500);
  BOOST_TEST(!msg::decodeTaskEvent(R"({"event":"task.exploded","task_id":"x"})").isOk());
  // A result that is not an object would be written back raw and could not
  // be read again (tests/fuzz/corpus/messages/regress-string-result).
  BOOST_TEST(!msg::decodeTaskEvent(
                  R"({"event":"task.succeeded","task_id":"tsk_1","result":"task.succeeded"})")
                  .isOk());
  BOOST_TEST(!msg::decodeTaskEvent(R"({"event":"task.succeeded","task_id":"tsk_1","result":7})")
                  .isOk());
}

BOOST_AUTO_TEST_CASE(sync_result_round_trips) {
  auto ok = msg::decodeSyncResult(msg::encodeSyncResult({true, R"({"a":1})", 0, ""}));
  BOOST_REQUIRE(ok.isOk());
  BOOST_TEST(ok.value().data_json == R"({"a":1})");
  BOOST_TEST(ok.value().tokens_used == 0);
  // The tokens of a reply are read while decoding, for the usage record.
  auto reply = msg::decodeSyncResult(
      msg::encodeSyncResult({true, R"({"replies":[],"tokens_used":42})", 0, ""}));
  BOOST_REQUIRE(reply.isOk());
  BOOST_TEST(reply.value().tokens_used == 42);
  auto bad = msg::decodeSyncResult(msg::encodeSyncResult({false, "", 500, "x"}));
  BOOST_REQUIRE(bad.isOk());
  BOOST_TEST(!bad.value().ok);
  BOOST_TEST(bad.value().code == 500);
}

// decodeSyncResult reads without a document and hands the data object on as
// the worker wrote it; it must still refuse everything parseObject() would.
BOOST_AUTO_TEST_CASE(sync_result_data_passes_through_as_written) {
  std::string data = R"({"replies":[{"text":"抱抱你","tokens_used":7,"ok":false}],)"
                     R"("analysis":{"data":{"x":[1,2,{}]}},"tokens_used":42})";
  auto r = msg::decodeSyncResult(std::string(R"({ "ok" : true , "data" : )") + data + " }");
  BOOST_REQUIRE(r.isOk());
  BOOST_TEST(r.value().ok);
  BOOST_TEST(r.value().data_json == data);  // byte for byte, spacing around it left out
  BOOST_TEST(r.value().tokens_used == 42);  // data's own, not a nested one
  // The first occurrence of a member counts, as with FindMember.
  auto twice = msg::decodeSyncResult(R"({"ok":true,"data":{"a":1},"data":{"b":2},"ok":false})");
  BOOST_REQUIRE(twice.isOk());
  BOOST_TEST(twice.value().ok);
  BOOST_TEST(twice.value().data_json == R"({"a":1})");
  auto failed = msg::decodeSyncResult(R"({"ok":false,"code":503,"msg":"busy \u00e9"})");
  BOOST_REQUIRE(failed.isOk());
  BOOST_TEST(failed.value().code == 503);
  BOOST_TEST(failed.value().msg == "busy \xC3\xA9");
  auto bare = msg::decodeSyncResult(R"({"ok":false})");
  BOOST_REQUIRE(bare.isOk());
  BOOST_TEST(bare.value().code == 500);
  BOOST_TEST(bare.value().msg == "generation failed");
}

BOOST_AUTO_TEST_CASE(sync_result_refuses_what_is_not_ours) {
  std::string deep = std::string(R"({"ok":true,"data":)") + std::string(20, '[') +
                     std::string(20, ']') + "}";
  for (const std::string& body : std::vector<std::string>{
           "", "[]", "true", R"("ok")", R"({"ok":true,"data":{"a":1})",  // cut short
           R"({"ok":true,"data":{"a":1}} trailing)", R"({"data":{"a":1}})",  // no ok
           R"({"ok":"yes","data":{}})", R"({"ok":true})", R"({"ok":true,"data":[1]})",
           R"({"ok":true,"data":{"t":"\udc00"}})",  // a lone surrogate escape
           "{\"ok\":true,\"data\":{\"t\":\"\xff\"}}",  // a raw byte that is not UTF-8
           deep}) {
    BOOST_TEST(!msg::decodeSyncResult(body).isOk(), body);
  }
}

// What a worker, eq-api and eq-dispatcher read off the broker goes through
// the same reader: a hostile number is a refused message, never a crash.
BOOST_AUTO_TEST_CASE(hostile_numbers_in_broker_messages_are_refused_or_read) {
  for (const test::HostileNumber& n : test::hostileNumbers()) {
    BOOST_TEST_CONTEXT(n.text.substr(0, 40)) {
      // A number that parses may still be a value the reader refuses or
      // reads as its default: only the refusals are checked here.
      auto job = msg::decodeJob(R"({"v":1,"kind":"analyze","request_id":"r","message":"x",)"
                                R"("reply_count":)" + n.text + "}");
      if (!n.parses) BOOST_TEST(job.status().msg().find("reply_count") != std::string::npos);
      auto event = msg::decodeTaskEvent(R"({"event":"task.succeeded","task_id":"tsk_1",)"
                                        R"("request_id":"r","mode":"fast","at_ms":)" + n.text + "}");
      if (!n.parses) BOOST_TEST(event.status().msg().find("at_ms") != std::string::npos);
      auto failed = msg::decodeSyncResult(R"({"ok":false,"code":)" + n.text + R"(,"msg":"x"})");
      BOOST_TEST(failed.isOk() == n.parses, failed.status().msg());
      if (!failed.isOk()) BOOST_TEST(failed.status().msg().find("code") != std::string::npos);
      auto ok = msg::decodeSyncResult(R"({"ok":true,"data":{"replies":[],"tokens_used":)" +
                                      n.text + "}}");
      BOOST_TEST(ok.isOk() == n.parses, ok.status().msg());
      if (!ok.isOk()) BOOST_TEST(ok.status().msg().find("data.tokens_used") != std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
