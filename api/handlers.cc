#include "api/handlers.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <strings.h>

#include <array>
#include <cstdio>

#include "api/validation.h"
#include "common/defaults.h"
#include "common/embedded.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/log.h"
#include "common/messages.h"

namespace eq::api {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

constexpr std::string_view kTaskPrefix = "/api/v1/task/";
constexpr std::array<int, 10> kLatencyBucketsMs = {5, 10, 25, 50, 100, 250, 500, 1000, 5000, 30000};

// The routes and their one allowed method. The route label is what logs and
// metrics show (task ids are folded into one label).
struct Route {
  std::string_view path;
  std::string_view method;
  bool authenticated;
};
constexpr std::array<Route, 9> kRoutes = {{
    {"/api/v1/reply", "POST", true},
    {"/api/v1/reply/async", "POST", true},
    {"/api/v1/analyze", "POST", true},
    {"/api/v1/quota", "GET", true},
    {"/api/v1/task/{task_id}", "GET", true},
    {"/healthz", "GET", false},
    {"/readyz", "GET", false},
    {"/metrics", "GET", false},
    {"/openapi.yaml", "GET", false},
}};

const Route* matchRoute(std::string_view path) {
  if (path.size() > kTaskPrefix.size() && path.substr(0, kTaskPrefix.size()) == kTaskPrefix &&
      path.find('/', kTaskPrefix.size()) == std::string_view::npos) {
    return &kRoutes[4];
  }
  for (const Route& r : kRoutes) {
    if (r.path == path) return &r;
  }
  return nullptr;
}

// "application/json", optionally with parameters such as charset=utf-8.
bool isJsonContentType(const std::string* ct) {
  if (ct == nullptr) return false;
  std::string_view v = *ct;
  std::string_view media = v.substr(0, v.find(';'));
  while (!media.empty() && media.back() == ' ') media.remove_suffix(1);
  return media.size() == 16 && strncasecmp(media.data(), "application/json", 16) == 0;
}

// Extracts the key from "Bearer <key>"; empty when the header is malformed.
std::string bearerToken(const std::string* header) {
  if (header == nullptr || header->size() < 7 || strncasecmp(header->c_str(), "Bearer ", 7) != 0) {
    return "";
  }
  std::string token = header->substr(7);
  while (!token.empty() && token.front() == ' ') token.erase(0, 1);
  while (!token.empty() && token.back() == ' ') token.pop_back();
  return token;
}

// eq_live_/eq_test_ + 43 base64url characters. Anything else is refused
// before it reaches the database.
bool wellFormedKey(const std::string& key, const std::string& prefix) {
  if (key.size() != prefix.size() + 43 || key.compare(0, prefix.size(), prefix) != 0) return false;
  for (size_t i = prefix.size(); i < key.size(); ++i) {
    char c = key[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

void putString(Writer& w, const char* key, std::string_view v) {
  w.Key(key);
  w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
}

void putTime(Writer& w, const char* key, int64_t ms) {
  w.Key(key);
  if (ms == 0) {
    w.Null();
  } else {
    std::string t = iso8601(ms);
    w.String(t.c_str(), static_cast<rapidjson::SizeType>(t.size()));
  }
}

int64_t syncDeadlineMs(const Config& cfg, const std::string& mode) {
  if (cfg.sync_deadline_ms > 0) return cfg.sync_deadline_ms;
  if (mode == "fast") return defaults::kSyncDeadlineFastMs;
  if (mode == "standard") return defaults::kSyncDeadlineStandardMs;
  if (mode == "perfect") return defaults::kSyncDeadlinePerfectMs;
  return defaults::kAnalyzeDeadlineMs;
}

}  // namespace

void ApiService::handle(HttpRequest&& req, Responder res) {
  auto info = std::make_shared<RequestInfo>();
  info->request_id = req.request_id;
  info->method = req.method;
  info->started_ms = req.received_ms;
  ++in_flight_;

  const Route* route = matchRoute(req.path);
  if (route == nullptr) {
    info->route = "unmatched";
    sendError(info, res, 404, "not found: no route " + req.path);
    return;
  }
  info->route = std::string(route->path);
  if (req.method != route->method) {
    HttpResponse r = HttpServer::errorResponse(405, "method not allowed: use " +
                                                        std::string(route->method),
                                               info->request_id);
    r.headers.emplace_back("Allow", std::string(route->method));
    finish(info, res, std::move(r));
    return;
  }

  if (!route->authenticated) {
    if (route->path == "/healthz") {
      sendJson(info, res, 200, "{\"status\":\"alive\"}", "ok");
    } else if (route->path == "/readyz") {
      readyz(info, res);
    } else if (route->path == "/metrics") {
      HttpResponse r;
      r.headers.emplace_back("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
      r.body = renderMetrics();
      finish(info, res, std::move(r));
    } else {
      HttpResponse r;
      r.headers.emplace_back("Content-Type", "application/yaml; charset=utf-8");
      r.body = std::string(embedded::file("schema/openapi.yaml"));
      finish(info, res, std::move(r));
    }
    return;
  }

  // Authentication: 401 for anything but an active key of this environment.
  std::string key = bearerToken(req.header("authorization"));
  if (!wellFormedKey(key, ctx_.config->keyPrefix())) {
    unauthorized(info, res);
    return;
  }
  Result<std::optional<AuthContext>> auth = ctx_.store->authenticate(key, ctx_.config->env);
  if (!auth.isOk()) {
    log::error("auth lookup failed", {{"error", auth.status().msg()}});
    HttpResponse r = HttpServer::errorResponse(503, "temporarily unavailable", info->request_id);
    r.headers.emplace_back("Retry-After", "1");
    finish(info, res, std::move(r));
    return;
  }
  if (!auth.value()) {
    unauthorized(info, res);
    return;
  }
  const AuthContext& who = *auth.value();
  info->key_prefix = who.display_prefix;

  // Rate limit: every authenticated request counts.
  Result<RateDecision> rate = ctx_.store->countRequest(who, ctx_.clock->nowMs());
  if (!rate.isOk()) {
    log::error("rate count failed", {{"error", rate.status().msg()}});
    HttpResponse r = HttpServer::errorResponse(503, "temporarily unavailable", info->request_id);
    r.headers.emplace_back("Retry-After", "1");
    finish(info, res, std::move(r));
    return;
  }
  const RateDecision& d = rate.value();
  info->extra_headers = {{"X-RateLimit-Limit", std::to_string(d.limit)},
                         {"X-RateLimit-Remaining", std::to_string(d.remaining)},
                         {"X-RateLimit-Reset", std::to_string(d.reset_seconds)}};
  if (!d.allowed) {
    info->extra_headers.emplace_back("Retry-After", std::to_string(d.reset_seconds));
    sendError(info, res, 429, "rate limit exceeded: " + std::to_string(d.limit) +
                                  " requests per minute for this key");
    return;
  }

  if (req.method == "POST" && !isJsonContentType(req.header("content-type"))) {
    sendError(info, res, 415, "unsupported media type: send Content-Type: application/json");
    return;
  }

  if (route->path == "/api/v1/reply") {
    replySync(req, who, info, res);
  } else if (route->path == "/api/v1/reply/async") {
    replyAsync(req, who, info, res);
  } else if (route->path == "/api/v1/analyze") {
    analyze(req, info, res);
  } else if (route->path == "/api/v1/quota") {
    quota(who, info, res);
  } else {
    task(req.path.substr(kTaskPrefix.size()), who, info, res);
  }
}

// Charges one unit; on refusal answers 402/503 itself and returns false.
static bool chargeOrRefuse(Store* store, const AuthContext& who, const std::string& mode,
                           int64_t now, std::string* refusal, int* status) {
  Result<ChargeOutcome> c = store->chargeQuota(who.account_id, mode, now);
  if (!c.isOk()) {
    log::error("quota charge failed", {{"error", c.status().msg()}});
    *status = 503;
    *refusal = "temporarily unavailable";
    return false;
  }
  if (c.value() == ChargeOutcome::kCharged) return true;
  *status = 402;
  *refusal = c.value() == ChargeOutcome::kExpired
                 ? "quota expired: the quota of this key has passed its expire_at"
                 : "quota exhausted: no " + mode + " units left for this key";
  return false;
}

void ApiService::replySync(const HttpRequest& req, const AuthContext& who, const Info& info,
                           Responder res) {
  Result<ReplyRequest> parsed = parseReplyRequest(req.body, false, *ctx_.webhook_allow);
  if (!parsed.isOk()) {
    sendError(info, res, 400, parsed.status().msg());
    return;
  }
  const ReplyRequest& r = parsed.value();
  std::string refusal;
  int status = 0;
  if (!chargeOrRefuse(ctx_.store, who, r.mode, ctx_.clock->nowMs(), &refusal, &status)) {
    sendError(info, res, status, refusal);
    return;
  }
  msg::Job job;
  job.kind = "reply";
  job.request_id = info->request_id;
  job.mode = r.mode;
  job.message = r.message;
  job.context = r.context;
  job.scene = r.scene;
  job.reply_count = r.reply_count;
  job.deadline_ms = ctx_.clock->nowMs() + syncDeadlineMs(*ctx_.config, r.mode);
  std::string account = who.account_id, mode = r.mode;
  ctx_.broker->call(job, [this, info, res, account, mode](Result<msg::SyncResult> out) {
    if (out.isOk() && out.value().ok) {
      sendJson(info, res, 200, out.value().data_json, "ok");
      return;
    }
    // Anything but a result refunds the unit charged at admission.
    refund(info, account, mode);
    if (!out.isOk()) {
      int code = out.status().code();
      if (code == 503) info->extra_headers.emplace_back("Retry-After", "1");
      sendError(info, res, code, code == 504 ? "generation timed out" : out.status().msg());
    } else {
      int code = out.value().code == 503 ? 503 : 500;
      if (code == 503) info->extra_headers.emplace_back("Retry-After", "1");
      sendError(info, res, code, code == 503 ? out.value().msg : "generation failed");
    }
  });
}

void ApiService::replyAsync(const HttpRequest& req, const AuthContext& who, const Info& info,
                            Responder res) {
  Result<ReplyRequest> parsed = parseReplyRequest(req.body, true, *ctx_.webhook_allow);
  if (!parsed.isOk()) {
    sendError(info, res, 400, parsed.status().msg());
    return;
  }
  const ReplyRequest& r = parsed.value();
  int64_t now = ctx_.clock->nowMs();
  std::string refusal;
  int status = 0;
  if (!chargeOrRefuse(ctx_.store, who, r.mode, now, &refusal, &status)) {
    sendError(info, res, status, refusal);
    return;
  }
  TaskRecord t;
  t.task_id = ids::newTaskId();
  t.account_id = who.account_id;
  t.key_id = who.key_id;
  t.request_id = info->request_id;
  t.mode = r.mode;
  t.webhook_url = r.webhook_url;
  t.created_at = now;
  if (Status s = ctx_.store->createTask(t); !s.isOk()) {
    log::error("create task failed", {{"error", s.msg()}});
    refund(info, who.account_id, r.mode);
    info->extra_headers.emplace_back("Retry-After", "1");
    sendError(info, res, 503, "temporarily unavailable");
    return;
  }
  msg::Job job;
  job.kind = "reply";
  job.request_id = info->request_id;
  job.task_id = t.task_id;
  job.mode = r.mode;
  job.message = r.message;
  job.context = r.context;
  job.scene = r.scene;
  job.reply_count = r.reply_count;
  std::string task_id = t.task_id;
  // Answer only once the broker has the message: a task id we hand out must
  // never belong to a job that was lost.
  ctx_.broker->publishPersistent(
      msg::queueForMode(r.mode), msg::encodeJob(job), [this, info, res, task_id](Status s) {
        if (s.isOk()) {
          sendJson(info, res, 200,
                   "{\"task_id\":\"" + task_id + "\",\"status\":\"queued\"}", "ok");
          return;
        }
        // Not accepted: the task fails at once, which also refunds its unit.
        Result<bool> failed =
            ctx_.store->markTaskFailed(task_id, 503, "not accepted: " + s.msg(), ctx_.clock->nowMs());
        if (!failed.isOk()) {
          // TODO(issue 4): a sweeper for tasks left queued without a message.
          log::error("could not fail unaccepted task; its unit stays charged",
                     {{"request_id", info->request_id},
                      {"task_id", task_id},
                      {"error", failed.status().msg()}});
        }
        info->extra_headers.emplace_back("Retry-After", "1");
        sendError(info, res, 503, "temporarily unavailable: message broker unavailable");
      });
}

void ApiService::analyze(const HttpRequest& req, const Info& info, Responder res) {
  Result<AnalyzeRequest> parsed = parseAnalyzeRequest(req.body);
  if (!parsed.isOk()) {
    sendError(info, res, 400, parsed.status().msg());
    return;
  }
  msg::Job job;
  job.kind = "analyze";
  job.request_id = info->request_id;
  job.message = parsed.value().message;
  job.context = parsed.value().context;
  job.deadline_ms = ctx_.clock->nowMs() + syncDeadlineMs(*ctx_.config, "");
  ctx_.broker->call(job, [this, info, res](Result<msg::SyncResult> out) {
    if (out.isOk() && out.value().ok) {
      sendJson(info, res, 200, out.value().data_json, "ok");
    } else if (!out.isOk()) {
      if (out.status().code() == 503) info->extra_headers.emplace_back("Retry-After", "1");
      sendError(info, res, out.status().code(), out.status().msg());
    } else {
      sendError(info, res, 500, "analysis failed");
    }
  });
}

void ApiService::quota(const AuthContext& who, const Info& info, Responder res) {
  Result<AccountQuota> q = ctx_.store->quota(who.account_id);
  if (!q.isOk()) {
    info->extra_headers.emplace_back("Retry-After", "1");
    sendError(info, res, 503, "temporarily unavailable");
    return;
  }
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("quota");
  w.StartObject();
  w.Key("standard");
  w.Int64(q.value().remaining.standard);
  w.Key("fast");
  w.Int64(q.value().remaining.fast);
  w.Key("perfect");
  w.Int64(q.value().remaining.perfect);
  w.EndObject();
  putString(w, "expire_at", iso8601Offset(q.value().expire_at_ms));
  putString(w, "tier", q.value().tier);
  w.EndObject();
  sendJson(info, res, 200, std::string_view(sb.GetString(), sb.GetSize()), "ok");
}

void ApiService::task(const std::string& task_id, const AuthContext& who, const Info& info,
                      Responder res) {
  if (!ids::looksLike(task_id, "tsk_")) {
    sendError(info, res, 404, "not found: no task " + task_id);
    return;
  }
  Result<std::optional<TaskRecord>> t = ctx_.store->task(task_id);
  if (!t.isOk()) {
    info->extra_headers.emplace_back("Retry-After", "1");
    sendError(info, res, 503, "temporarily unavailable");
    return;
  }
  // Another account's task is indistinguishable from a missing one.
  if (!t.value() || t.value()->account_id != who.account_id) {
    sendError(info, res, 404, "not found: no task " + task_id);
    return;
  }
  const TaskRecord& task = *t.value();
  Result<std::optional<DeliveryRecord>> d = ctx_.store->deliveryForTask(task_id);

  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  putString(w, "task_id", task.task_id);
  putString(w, "status", task.status);
  putString(w, "mode", task.mode);
  putTime(w, "created_at", task.created_at);
  putTime(w, "started_at", task.started_at);
  putTime(w, "finished_at", task.finished_at);
  w.Key("result");
  if (task.status == "succeeded" && !task.result_json.empty()) {
    w.RawValue(task.result_json.data(), task.result_json.size(), rapidjson::kObjectType);
  } else {
    w.Null();
  }
  w.Key("error");
  if (task.status == "failed") {
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
    const DeliveryRecord* rec = (d.isOk() && d.value()) ? &*d.value() : nullptr;
    putString(w, "status", rec != nullptr ? rec->status : "none");
    w.Key("attempts");
    w.Int(rec != nullptr ? rec->attempts : 0);
    putTime(w, "last_attempt_at", rec != nullptr ? rec->last_attempt_at : 0);
    w.Key("last_status");
    if (rec != nullptr && rec->last_status > 0) w.Int(rec->last_status); else w.Null();
    w.EndObject();
  }
  w.EndObject();
  sendJson(info, res, 200, std::string_view(sb.GetString(), sb.GetSize()), "ok");
}

void ApiService::readyz(const Info& info, Responder res) {
  bool broker = ctx_.broker->connected();
  bool db = ctx_.store->ping().isOk();
  std::string data = std::string("{\"broker\":") + (broker ? "true" : "false") +
                     ",\"database\":" + (db ? "true" : "false") + "}";
  if (broker && db) {
    sendJson(info, res, 200, data, "ready");
    return;
  }
  HttpResponse r;
  r.status = 503;
  r.headers.emplace_back("Content-Type", "application/json; charset=utf-8");
  r.headers.emplace_back("Retry-After", "1");
  r.body = json::envelope(503, data, "not ready");
  finish(info, res, std::move(r));
}

void ApiService::sendJson(const Info& info, const Responder& res, int status,
                          std::string_view data_json, std::string_view msg) {
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json; charset=utf-8");
  r.body = json::envelope(status == 200 ? 0 : status, data_json, msg);
  finish(info, res, std::move(r));
}

void ApiService::refund(const Info& info, const std::string& account, const std::string& mode) {
  if (Status s = ctx_.store->refundQuota(account, mode); !s.isOk()) {
    // The unit stays charged; the log line is what an operator reconciles from.
    log::error("refund failed", {{"request_id", info->request_id},
                                 {"mode", mode},
                                 {"error", s.msg()}});
  }
}

void ApiService::unauthorized(const Info& info, const Responder& res) {
  HttpResponse r = HttpServer::errorResponse(
      401, "invalid API key: send Authorization: Bearer <API_KEY>", info->request_id);
  r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"eq-reply\"");
  finish(info, res, std::move(r));
}

void ApiService::sendError(const Info& info, const Responder& res, int status,
                           std::string_view msg) {
  finish(info, res, HttpServer::errorResponse(status, msg, info->request_id));
}

void ApiService::finish(const Info& info, const Responder& res, HttpResponse r) {
  bool has_id = false;
  for (const auto& [k, v] : r.headers) has_id = has_id || k == "X-Request-Id";
  if (!has_id) r.headers.emplace_back("X-Request-Id", info->request_id);
  for (const auto& h : info->extra_headers) r.headers.push_back(h);

  int64_t latency = ctx_.clock->nowMs() - info->started_ms;
  --in_flight_;
  ++answered_[{info->route, r.status}];
  ++latency_count_;
  latency_sum_ms_ += static_cast<double>(latency);
  for (int b : kLatencyBucketsMs) {
    if (latency <= b) ++latency_buckets_[b];
  }
  log::info("request", {{"request_id", info->request_id},
                        {"key_prefix", info->key_prefix},
                        {"method", info->method},
                        {"route", info->route},
                        {"status", static_cast<long long>(r.status)},
                        {"latency_ms", static_cast<long long>(latency)}});
  res.send(std::move(r));
}

std::string ApiService::renderMetrics() const {
  std::string out;
  out += "# HELP eq_api_requests_total HTTP requests answered, by route and status.\n";
  out += "# TYPE eq_api_requests_total counter\n";
  for (const auto& [k, n] : answered_) {
    out += "eq_api_requests_total{route=\"" + k.first + "\",status=\"" + std::to_string(k.second) +
           "\"} " + std::to_string(n) + "\n";
  }
  out += "# HELP eq_api_request_duration_ms Time from request received to response queued.\n";
  out += "# TYPE eq_api_request_duration_ms histogram\n";
  for (int b : kLatencyBucketsMs) {
    auto it = latency_buckets_.find(b);
    out += "eq_api_request_duration_ms_bucket{le=\"" + std::to_string(b) + "\"} " +
           std::to_string(it == latency_buckets_.end() ? 0 : it->second) + "\n";
  }
  out += "eq_api_request_duration_ms_bucket{le=\"+Inf\"} " + std::to_string(latency_count_) + "\n";
  char sum[64];
  std::snprintf(sum, sizeof sum, "%.3f", latency_sum_ms_);
  out += "eq_api_request_duration_ms_sum " + std::string(sum) + "\n";
  out += "eq_api_request_duration_ms_count " + std::to_string(latency_count_) + "\n";
  out += "# HELP eq_api_in_flight Requests received and not yet answered.\n";
  out += "# TYPE eq_api_in_flight gauge\n";
  out += "eq_api_in_flight " + std::to_string(in_flight_) + "\n";
  out += "# HELP eq_api_broker_connected 1 while the broker connection is up.\n";
  out += "# TYPE eq_api_broker_connected gauge\n";
  out += "eq_api_broker_connected " + std::string(ctx_.broker->connected() ? "1" : "0") + "\n";
  out += "# HELP eq_api_broker_reconnects_total Broker reconnections since start.\n";
  out += "# TYPE eq_api_broker_reconnects_total counter\n";
  out += "eq_api_broker_reconnects_total " + std::to_string(ctx_.broker->reconnects()) + "\n";
  return out;
}

}  // namespace eq::api
