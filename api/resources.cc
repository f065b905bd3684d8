// The handlers of the other resources: analysis, quota and tasks.
#include "api/handlers.h"

#include "api/request_util.h"
#include "api/validation.h"
#include "common/ids.h"
#include "common/messages.h"

namespace eq::api {
using util::isJsonContentType;
using util::kTaskPrefix;
using util::putQuota;
using util::putString;
using util::putTime;
using util::syncDeadlineMs;
using util::Writer;

// ---------------------------------------------------------------- other resources

void ApiService::analyze(const CallPtr& c) {
  authorize(c, nullptr, false, [this](const CallPtr& call) {
    const Info& info = call->info;
    const Responder& res = call->res;
    if (!isJsonContentType(call->req.header("content-type"))) {
      sendError(info, res, 415, "unsupported media type: send Content-Type: application/json");
      return;
    }
    Result<AnalyzeRequest> parsed = parseAnalyzeRequest(call->req.body);
    if (!parsed.isOk()) {
      sendError(info, res, 400, parsed.status().msg());
      return;
    }
    msg::Job job;
    job.kind = jobKindName(JobKind::kAnalyze);
    job.request_id = info->request_id;
    job.message = parsed.value().message;
    job.context = parsed.value().context;
    job.deadline_ms = ctx_.clock->nowMs() + syncDeadlineMs(*ctx_.config, "");
    ctx_.broker->call(job, [this, info, res](Result<msg::SyncResult> out) {
      if (out.isOk() && out.value().ok) {
        sendJson(info, res, 200, out.value().data_json, "ok");
      } else if (!out.isOk() && out.status().code() == 503) {
        unavailable(info, res, out.status().msg());
      } else if (!out.isOk() && out.status().code() == 504) {
        sendError(info, res, 504, "analysis timed out: retry later");
      } else {
        sendError(info, res, 500, "analysis failed; retry later");
      }
    });
  });
}

void ApiService::quota(const CallPtr& c) {
  authorizeQuotaRead(c, [this](const CallPtr& call, const AccountQuota& q) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    putQuota(w, q, ctx_.clock->nowMs());
    w.EndObject();
    sendJson(call->info, call->res, 200, std::string_view(sb.GetString(), sb.GetSize()), "ok");
  });
}

namespace {
struct TaskLookup {
  std::optional<TaskRecord> task;
  std::optional<DeliveryRecord> delivery;
};
}  // namespace

void ApiService::task(const CallPtr& c) {
  std::string prefix(kTaskPrefix);
  std::string task_id = c->req.path.substr(prefix.size());
  auto found = std::make_shared<TaskLookup>();
  DbWork work;
  if (ids::looksLike(task_id, "tsk_")) {
    work = [found, task_id](Store& store, const AuthContext* who) -> Status {
      Result<std::optional<TaskRecord>> t = store.task(task_id);
      if (!t.isOk()) return t.status();
      // Another account's task is indistinguishable from a missing one.
      if (!t.value() || t.value()->account_id != who->account_id) return Status::ok();
      found->task = t.value();
      Result<std::optional<DeliveryRecord>> d = store.deliveryForTask(task_id);
      if (d.isOk()) found->delivery = d.value();
      return Status::ok();
    };
  }
  authorize(c, std::move(work), false, [this, found, task_id](const CallPtr& call) {
    if (!found->task) {
      sendError(call->info, call->res, 404, "not found: no task " + task_id);
      return;
    }
    std::string data =
        taskJson(*found->task, found->delivery ? &*found->delivery : nullptr);
    sendJson(call->info, call->res, 200, data, "ok");
  });
}

std::string taskJson(const TaskRecord& task, const DeliveryRecord* rec) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  putString(w, "task_id", task.task_id);
  putString(w, "status", taskStatusName(task.status));
  putString(w, "mode", task.mode);
  putTime(w, "created_at", task.created_at);
  putTime(w, "started_at", task.started_at);
  putTime(w, "finished_at", task.finished_at);
  w.Key("result");
  if (task.status == TaskStatus::kSucceeded && !task.result_json.empty()) {
    w.RawValue(task.result_json.data(), task.result_json.size(), rapidjson::kObjectType);
  } else {
    w.Null();
  }
  w.Key("error");
  if (task.status == TaskStatus::kFailed) {
    w.StartObject();
    w.Key("code");
    w.Int(task.error_code);
    putString(w, "msg", task.error_msg);
    w.EndObject();
  } else {
    w.Null();
  }
  w.Key("webhook");
  if (task.webhook_url.empty()) {
    w.Null();
  } else {
    w.StartObject();
    putString(w, "url", task.webhook_url);
    putString(w, "status", rec != nullptr ? deliveryStatusName(rec->status) : "none");
    w.Key("attempts");
    w.Int(rec != nullptr ? rec->attempts : 0);
    putTime(w, "last_attempt_at", rec != nullptr ? rec->last_attempt_at : 0);
    w.Key("last_status");
    if (rec != nullptr && rec->last_status > 0) w.Int(rec->last_status); else w.Null();
    w.EndObject();
  }
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

}  // namespace eq::api
