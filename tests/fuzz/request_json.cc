// Fuzz target: the JSON bodies eq-api accepts. Beyond not crashing, every
// body it accepts must become a job that a worker decodes back to the same
// fields: the class of bug where eq-api accepted a lone surrogate that no
// worker could read (issue 13, finding 1). Every body it refuses must get a
// 400 whose response body is valid UTF-8 and JSON and carries the message,
// whatever bytes the message quotes from the input.
#include <rapidjson/document.h>

#include <cstdint>
#include <string_view>

#include "api/validation.h"
#include "common/http_server.h"
#include "common/messages.h"
#include "common/utf8.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// The 400 eq-api sends for a refused body (HttpServer::errorResponse, as
// ApiService::sendError builds it): valid UTF-8, a JSON envelope with code
// 400, and a non-empty msg that reads back as the message, with any bytes
// that are not UTF-8 replaced (U+FFFD) rather than passed through.
void refusal(const std::string& msg) {
  FUZZ_CHECK(!msg.empty());
  eq::http::HttpResponse r = eq::http::HttpServer::errorResponse(400, msg, "req_fuzz");
  FUZZ_CHECK(r.status == 400);
  FUZZ_CHECK(eq::utf8::isValid(r.body));
  rapidjson::Document d;
  d.Parse(r.body.data(), r.body.size());
  FUZZ_CHECK(!d.HasParseError() && d.IsObject());
  FUZZ_CHECK(d.HasMember("code") && d["code"].IsInt() && d["code"].GetInt() == 400);
  FUZZ_CHECK(d.HasMember("msg") && d["msg"].IsString());
  std::string_view got(d["msg"].GetString(), d["msg"].GetStringLength());
  FUZZ_CHECK(got == eq::utf8::sanitize(msg));
}

void roundTrip(const eq::msg::Job& job) {
  eq::Result<eq::msg::Job> back = eq::msg::decodeJob(eq::msg::encodeJob(job));
  FUZZ_CHECK(back.isOk());
  FUZZ_CHECK(back.value().message == job.message);
  FUZZ_CHECK(back.value().context == job.context);
  FUZZ_CHECK(back.value().scene == job.scene);
  FUZZ_CHECK(back.value().mode == job.mode);
  FUZZ_CHECK(back.value().reply_count == job.reply_count);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  static const eq::net::CidrSet allow = eq::net::CidrSet::parse("").value();
  for (bool async : {false, true}) {
    eq::Result<eq::api::ReplyRequest> r = eq::api::parseReplyRequest(body, async, allow);
    if (!r.isOk()) {
      FUZZ_CHECK(r.status().code() == 400);
      refusal(r.status().msg());
      continue;
    }
    const eq::api::ReplyRequest& req = r.value();
    FUZZ_CHECK(eq::msg::isMode(req.mode));
    FUZZ_CHECK(!req.message.empty() && eq::utf8::isValid(req.message));
    FUZZ_CHECK(eq::utf8::isValid(req.context) && eq::utf8::isValid(req.scene));
    FUZZ_CHECK(req.reply_count >= 1 && req.reply_count <= 5);
    if (!req.webhook_url.empty()) FUZZ_CHECK(eq::net::checkWebhookUrl(req.webhook_url, allow).isOk());
    eq::msg::Job job;
    job.kind = "reply";
    job.request_id = "req_fuzz";
    job.mode = req.mode;
    job.message = req.message;
    job.context = req.context;
    job.scene = req.scene;
    job.reply_count = req.reply_count;
    roundTrip(job);
  }
  eq::Result<eq::api::AnalyzeRequest> a = eq::api::parseAnalyzeRequest(body);
  if (a.isOk()) {
    FUZZ_CHECK(!a.value().message.empty() && eq::utf8::isValid(a.value().message));
    eq::msg::Job job;
    job.kind = "analyze";
    job.request_id = "req_fuzz";
    job.message = a.value().message;
    job.context = a.value().context;
    roundTrip(job);
  } else {
    FUZZ_CHECK(a.status().code() == 400);
    refusal(a.status().msg());
  }
  return 0;
}
