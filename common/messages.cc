#include "common/messages.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <climits>
#include <optional>

#include "common/enums.h"
#include "common/ids.h"
#include "common/json.h"

namespace eq::msg {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void put(Writer& w, const char* key, std::string_view v) {
  w.Key(key);
  w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
}

void putRaw(Writer& w, const char* key, std::string_view raw_json) {
  w.Key(key);
  w.RawValue(raw_json.data(), raw_json.size(), rapidjson::kObjectType);
}

// Broker messages are ours, but a queue is an input like any other: a body
// that is not what we produce is rejected with a reason, never trusted.
constexpr int kMaxDepth = 16;

Status parseObject(std::string_view body, rapidjson::Document* doc) {
  if (Status s = json::parse(body, doc, kMaxDepth); !s.isOk()) return s;
  if (!doc->IsObject()) return Status(400, "message is not a JSON object");
  return Status::ok();
}

// SAX reader of a SyncResult ({"ok":true,"data":{...}} or
// {"ok":false,"code":N,"msg":"..."}): checks what json::parse checks (the
// encoding, and json::SaxChecks: decoded text, depth) and notes the members, the data object as
// the byte range it spans in the body. A member's first occurrence counts,
// as with FindMember.
class SyncResultScanner
    : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, SyncResultScanner> {
 public:
  SyncResultScanner(const rapidjson::MemoryStream& in, int max_depth)
      : in_(in), checks_(max_depth) {}

  // Any value the cases below do not take: a member of no interest.
  bool Default() {
    key_.clear();
    return true;
  }
  bool Bool(bool b) {
    if (checks_.depth() == 1 && key_ == "ok" && !ok_) ok_ = b;
    return Default();
  }
  bool Int(int i) { return number(i); }
  bool Uint(unsigned u) { return number(u); }
  bool Int64(int64_t i) { return number(i); }
  bool Uint64(uint64_t u) {
    return number(u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u));
  }
  bool Double(double) { return Default(); }
  // Numbers come as text (json::kReaderFlags): converted by the shared
  // checks, then handed to the typed events above.
  bool RawNumber(const char* s, rapidjson::SizeType n, bool) {
    json::Number number;
    return checks_.number(s, n, &number) && json::forwardNumber(number, *this);
  }
  bool String(const char* s, rapidjson::SizeType n, bool) {
    if (!checks_.text(s, n)) return false;
    if (checks_.depth() == 1 && key_ == "msg" && !msg_) msg_ = std::string(s, n);
    return Default();
  }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    if (!checks_.key(s, n)) return false;
    if (checks_.depth() == 1 || (checks_.depth() == 2 && in_data_)) key_.assign(s, n);
    return true;
  }
  bool StartObject() {
    if (checks_.depth() == 0) is_object_ = true;
    if (checks_.depth() == 1 && key_ == "data" && !data_) {
      in_data_ = true;
      data_begin_ = in_.Tell() - 1;  // the reader has taken the '{'
    }
    key_.clear();
    return checks_.enter();
  }
  bool EndObject(rapidjson::SizeType) {
    checks_.leave();
    if (checks_.depth() == 1 && in_data_) {
      in_data_ = false;
      data_ = std::string_view(in_.begin_ + data_begin_, in_.Tell() - data_begin_);
    }
    return true;
  }
  bool StartArray() {
    key_.clear();
    return checks_.enter();
  }
  bool EndArray(rapidjson::SizeType) {
    checks_.leave();
    return true;
  }

  const json::SaxChecks& checks() const { return checks_; }
  bool isObject() const { return is_object_; }
  const std::optional<bool>& ok() const { return ok_; }
  const std::optional<std::string_view>& data() const { return data_; }
  int64_t tokensUsed() const { return tokens_used_.value_or(0); }
  const std::optional<int64_t>& code() const { return code_; }
  const std::optional<std::string>& msg() const { return msg_; }

 private:
  bool number(int64_t v) {
    int depth = checks_.depth();
    if (depth == 1 && key_ == "code" && !code_) code_ = v;
    if (depth == 2 && in_data_ && key_ == "tokens_used" && !tokens_used_) tokens_used_ = v;
    return Default();
  }

  const rapidjson::MemoryStream& in_;
  json::SaxChecks checks_;
  std::string key_;  // the member whose value comes next (depth 1, or 2 in data)
  bool is_object_ = false;
  bool in_data_ = false;
  std::size_t data_begin_ = 0;
  std::optional<bool> ok_;
  std::optional<std::string_view> data_;
  std::optional<int64_t> tokens_used_;
  std::optional<int64_t> code_;
  std::optional<std::string> msg_;
};

}  // namespace

bool isMode(std::string_view mode) { return isModeName(mode); }

std::string queueForMode(std::string_view mode) {
  std::optional<Mode> m = parseMode(mode);
  if (!m) return kQueueAnalyze;
  switch (*m) {
    case Mode::kFast: return kQueueFast;
    case Mode::kStandard: return kQueueStandard;
    case Mode::kPerfect: return kQueuePerfect;
  }
  return kQueueAnalyze;
}

std::string syncQueueForMode(std::string_view mode) {
  std::optional<Mode> m = parseMode(mode);
  if (!m) return kQueueSyncAnalyze;
  switch (*m) {
    case Mode::kFast: return kQueueSyncFast;
    case Mode::kStandard: return kQueueSyncStandard;
    case Mode::kPerfect: return kQueueSyncPerfect;
  }
  return kQueueSyncAnalyze;
}

bool isSyncQueue(std::string_view queue) {
  return queue == kQueueSyncFast || queue == kQueueSyncStandard || queue == kQueueSyncPerfect ||
         queue == kQueueSyncAnalyze;
}

std::string encodeJob(const Job& job) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("v");
  w.Int(1);
  put(w, "kind", job.kind);
  put(w, "request_id", job.request_id);
  if (!job.task_id.empty()) put(w, "task_id", job.task_id);
  if (!job.mode.empty()) put(w, "mode", job.mode);
  put(w, "message", job.message);
  put(w, "context", job.context);
  put(w, "scene", job.scene);
  w.Key("reply_count");
  w.Int(job.reply_count);
  w.Key("deadline_ms");
  w.Int64(job.deadline_ms);
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

Result<Job> decodeJob(std::string_view body) {
  rapidjson::Document doc;
  if (Status s = parseObject(body, &doc); !s.isOk()) return s;
  Job job;
  job.kind = json::getString(doc, "kind");
  job.request_id = json::getString(doc, "request_id");
  job.task_id = json::getString(doc, "task_id");
  job.mode = json::getString(doc, "mode");
  job.message = json::getString(doc, "message");
  job.context = json::getString(doc, "context");
  job.scene = json::getString(doc, "scene");
  job.reply_count = static_cast<int>(json::getInt(doc, "reply_count", 1));
  job.deadline_ms = json::getInt(doc, "deadline_ms", 0);
  if (json::getInt(doc, "v", 0) != 1) return Status(400, "job: unsupported version");
  if (job.kind != "reply" && job.kind != "analyze") return Status(400, "job: bad kind");
  if (job.request_id.empty()) return Status(400, "job: no request_id");
  if (job.message.empty()) return Status(400, "job: empty message");
  if (job.kind == "reply" && !isMode(job.mode)) return Status(400, "job: bad mode");
  if (job.reply_count < 1 || job.reply_count > 5) return Status(400, "job: bad reply_count");
  return job;
}

std::string salvageTaskId(std::string_view body) {
  rapidjson::Document doc;
  if (!json::parse(body, &doc, kMaxDepth, json::TextCheck::kAnyBytes).isOk() || !doc.IsObject()) {
    return "";
  }
  std::string id = json::getString(doc, "task_id");
  return ids::looksLike(id, "tsk_") ? id : "";
}

std::string encodeSyncResult(const SyncResult& r) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("ok");
  w.Bool(r.ok);
  if (r.ok) {
    putRaw(w, "data", r.data_json);
  } else {
    w.Key("code");
    w.Int(r.code);
    put(w, "msg", r.msg);
  }
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

Result<SyncResult> decodeSyncResult(std::string_view body) {
  // Read without building a document: a worker's data object is the
  // response's data, so it is handed on as the bytes the worker wrote,
  // after the whole body was checked as strictly as parseObject() would.
  rapidjson::MemoryStream in(body.data(), body.size());
  SyncResultScanner scan(in, kMaxDepth);
  rapidjson::ParseResult parsed = json::scan(in, scan);
  const json::SaxChecks& checks = scan.checks();
  if (checks.tooDeep()) return Status(400, "message nests too deeply");
  if (checks.badText()) return Status(400, "message has a string that is not valid Unicode text");
  if (!checks.numberError().empty()) return Status(400, "message: " + checks.numberError());
  if (parsed.IsError()) return json::readerError(parsed, checks);
  if (!scan.isObject()) return Status(400, "message is not a JSON object");
  if (!scan.ok()) return Status(400, "result: no ok flag");
  SyncResult r;
  r.ok = *scan.ok();
  if (r.ok) {
    if (!scan.data()) return Status(400, "result: no data object");
    r.data_json = std::string(*scan.data());
    // Read here, in the same pass, so nobody parses data_json again for it
    // (eq-api's usage record).
    r.tokens_used = scan.tokensUsed();
  } else {
    r.code = scan.code() ? static_cast<int>(*scan.code()) : 500;
    r.msg = scan.msg() ? *scan.msg() : "generation failed";
  }
  return r;
}

std::string encodeTaskEvent(const TaskEvent& e) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  put(w, "event", e.event);
  put(w, "task_id", e.task_id);
  put(w, "request_id", e.request_id);
  put(w, "mode", e.mode);
  w.Key("at_ms");
  w.Int64(e.at_ms);
  if (!e.result_json.empty()) putRaw(w, "result", e.result_json);
  if (e.event == "task.failed") {
    w.Key("error");
    w.StartObject();
    w.Key("code");
    w.Int(e.error_code);
    put(w, "msg", e.error_msg);
    w.EndObject();
  }
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

Result<TaskEvent> decodeTaskEvent(std::string_view body) {
  rapidjson::Document doc;
  if (Status s = parseObject(body, &doc); !s.isOk()) return s;
  TaskEvent e;
  e.event = json::getString(doc, "event");
  e.task_id = json::getString(doc, "task_id");
  e.request_id = json::getString(doc, "request_id");
  e.mode = json::getString(doc, "mode");
  e.at_ms = json::getInt(doc, "at_ms", 0);
  // The result is the worker's data object, handed on as JSON text: anything
  // else (a string, a number) would be written back raw by encodeTaskEvent
  // and make an event nobody can read (found by tests/fuzz/messages).
  auto result = doc.FindMember("result");
  if (result != doc.MemberEnd() && !result->value.IsNull()) {
    if (!result->value.IsObject()) return Status(400, "event: result is not an object");
    e.result_json = json::toString(result->value);
  }
  auto err = doc.FindMember("error");
  if (err != doc.MemberEnd() && err->value.IsObject()) {
    e.error_code = static_cast<int>(json::getInt(err->value, "code", 500));
    e.error_msg = json::getString(err->value, "msg");
  }
  if (e.event != "task.running" && e.event != "task.succeeded" && e.event != "task.failed") {
    return Status(400, "event: unknown kind '" + e.event + "'");
  }
  if (e.task_id.empty()) return Status(400, "event: no task_id");
  if (e.event == "task.succeeded" && e.result_json.empty()) {
    return Status(400, "event: succeeded without result");
  }
  return e;
}

}  // namespace eq::msg
