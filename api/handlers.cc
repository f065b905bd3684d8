#include "api/handlers.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <strings.h>

#include <array>
#include <cstdio>

#include "api/validation.h"
#include "common/crypto.h"
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
// Rendered in seconds (eq_api_request_duration_seconds): promtool refuses
// abbreviated units in metric names.
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
  Result<std::optional<AuthContext>> auth =
      ctx_.store->authenticate(key, ctx_.config->env, ctx_.clock->nowMs());
  if (!auth.isOk()) {
    log::error("auth lookup failed", {{"error", auth.status().msg()}});
    unavailable(info, res, "the database is busy");
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
    unavailable(info, res, "the database is busy");
    return;
  }
  const RateDecision& d = rate.value();
  info->extra_headers = {{"X-RateLimit-Limit", std::to_string(d.limit)},
                         {"X-RateLimit-Remaining", std::to_string(d.remaining)},
                         {"X-RateLimit-Reset", std::to_string(d.reset_seconds)}};
  if (!d.allowed) {
    ++rate_limited_;
    info->extra_headers.emplace_back("Retry-After", std::to_string(d.reset_seconds));
    sendError(info, res, 429, "rate limit exceeded: " + std::to_string(d.limit) +
                                  " requests per minute for this key; retry after " +
                                  std::to_string(d.reset_seconds) + " s");
    return;
  }

  if (req.method == "POST" && !isJsonContentType(req.header("content-type"))) {
    sendError(info, res, 415, "unsupported media type: send Content-Type: application/json");
    return;
  }

  bool reply_route = route->path == "/api/v1/reply" || route->path == "/api/v1/reply/async";
  if (reply_route && !admitIdempotent(req, who, info, res)) return;

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

bool ApiService::admitIdempotent(const HttpRequest& req, const AuthContext& who,
                                 const Info& info, const Responder& res) {
  const std::string* key = req.header("idempotency-key");
  if (key == nullptr) return true;
  if (Status s = checkIdempotencyKey(*key); !s.isOk()) {
    sendError(info, res, 400, s.msg());
    return false;
  }
  // The digest covers the raw bytes: two bodies that parse to the same JSON
  // but differ in spacing are different requests, as a client resending the
  // same request never produces them.
  IdempotencyRequest ir{who.account_id, *key, info->route, crypto::sha256(req.body),
                        info->request_id};
  Result<IdempotencyBegin> begun = ctx_.store->beginIdempotent(ir, ctx_.clock->nowMs());
  if (!begun.isOk()) {
    log::error("idempotency lookup failed", {{"error", begun.status().msg()}});
    unavailable(info, res, "the database is busy");
    return false;
  }
  const IdempotencyBegin& b = begun.value();
  switch (b.state) {
    case IdempotencyState::kStarted:
      info->idempotency = std::move(ir);
      return true;
    case IdempotencyState::kReplay: {
      ++idempotent_replays_;
      HttpResponse r;
      r.status = b.http_status;
      r.headers.emplace_back("Content-Type", "application/json; charset=utf-8");
      r.headers.emplace_back("Idempotent-Replayed", "true");
      r.body = b.response_body;
      finish(info, res, std::move(r));
      return false;
    }
    case IdempotencyState::kConflict:
      sendError(info, res, 409,
                b.other_route
                    ? "conflict: Idempotency-Key already used on another endpoint; use a new "
                      "key for a new request"
                    : "conflict: Idempotency-Key reused with a different request body; use a "
                      "new key for a new request");
      return false;
    case IdempotencyState::kInProgress:
      // Answering 409 rather than waiting keeps the loop free of parked
      // requests; the client retries and then gets the stored response.
      info->extra_headers.emplace_back("Retry-After", "1");
      sendError(info, res, 409,
                "conflict: a request with this Idempotency-Key is still in progress; retry "
                "after it completes");
      return false;
  }
  return true;
}

bool ApiService::charge(const AuthContext& who, const std::string& mode, const Info& info,
                        const Responder& res) {
  Result<ChargeOutcome> c = ctx_.store->chargeQuota(who.account_id, mode, ctx_.clock->nowMs());
  if (!c.isOk()) {
    log::error("quota charge failed", {{"error", c.status().msg()}});
    unavailable(info, res, "the database is busy");
    return false;
  }
  if (c.value() == ChargeOutcome::kCharged) return true;
  ++quota_rejected_;
  sendError(info, res, 402,
            c.value() == ChargeOutcome::kExpired
                ? "quota expired: the " + mode +
                      " quota of this key has passed its expire_at (see GET /api/v1/quota); "
                      "ask for a renewal"
                : "quota exhausted: no " + mode +
                      " units left for this key (see GET /api/v1/quota); use another mode or "
                      "ask for more units");
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
  info->mode = r.mode;
  if (!charge(who, r.mode, info, res)) return;
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
    int code = !out.isOk() ? out.status().code() : out.value().code == 503 ? 503 : 500;
    if (code == 503) {
      unavailable(info, res, !out.isOk() ? out.status().msg() : out.value().msg);
    } else if (code == 504) {
      sendError(info, res, 504,
                "generation timed out: retry, or use POST /api/v1/reply/async for long modes");
    } else {
      sendError(info, res, 500, "generation failed; the unit was refunded, retry later");
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
  info->mode = r.mode;
  int64_t now = ctx_.clock->nowMs();
  if (!charge(who, r.mode, info, res)) return;
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
    unavailable(info, res, "the database is busy");
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
        unavailable(info, res, "message broker unavailable");
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
    } else if (!out.isOk() && out.status().code() == 503) {
      unavailable(info, res, out.status().msg());
    } else if (!out.isOk() && out.status().code() == 504) {
      sendError(info, res, 504, "analysis timed out: retry later");
    } else {
      sendError(info, res, 500, "analysis failed; retry later");
    }
  });
}

void ApiService::quota(const AuthContext& who, const Info& info, Responder res) {
  Result<AccountQuota> q = ctx_.store->quota(who.account_id);
  if (!q.isOk()) {
    unavailable(info, res, "the database is busy");
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
    unavailable(info, res, "the database is busy");
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
  // Like every error, data is null (PRODUCT.md §2); msg names what is down.
  std::string msg = "not ready:";
  if (!broker) msg += " broker unavailable";
  if (!db) msg += std::string(broker ? "" : ",") + " database unavailable";
  HttpResponse r = HttpServer::errorResponse(503, msg, info->request_id);
  r.headers.emplace_back("Retry-After", "1");
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

void ApiService::unavailable(const Info& info, const Responder& res, std::string_view what) {
  // One second is a guess that matches how these clear up: the write lock
  // is held for milliseconds, and the broker bridge reconnects within ~1 s.
  info->extra_headers.emplace_back("Retry-After", "1");
  sendError(info, res, 503,
            "temporarily unavailable: " + std::string(what) + "; retry after 1 s");
}

void ApiService::settleIdempotent(const Info& info, const HttpResponse& r) {
  if (!info->idempotency) return;
  // Final outcomes are remembered; a 429 or a 5xx says nothing about what
  // the request would do, so its row is dropped and a retry runs afresh.
  bool final = (r.status >= 200 && r.status < 300) ||
               (r.status >= 400 && r.status < 500 && r.status != 429);
  Status s = final ? ctx_.store->completeIdempotent(*info->idempotency, r.status, r.body)
                   : ctx_.store->abandonIdempotent(*info->idempotency);
  if (!s.isOk()) {
    // The row stays pending: retries get 409 "in progress" until the lease
    // (Store::kIdempotencyLeaseMs) lets one take it over.
    log::error("idempotency record not settled", {{"request_id", info->request_id},
                                                 {"status", static_cast<long long>(r.status)},
                                                 {"error", s.msg()}});
  }
  info->idempotency.reset();
}

void ApiService::finish(const Info& info, const Responder& res, HttpResponse r) {
  bool has_id = false;
  for (const auto& [k, v] : r.headers) has_id = has_id || k == "X-Request-Id";
  if (!has_id) r.headers.emplace_back("X-Request-Id", info->request_id);
  for (const auto& h : info->extra_headers) r.headers.push_back(h);
  settleIdempotent(info, r);

  int64_t latency = ctx_.clock->nowMs() - info->started_ms;
  --in_flight_;
  ++answered_[{info->route, r.status}];
  ++latency_count_;
  latency_sum_ms_ += static_cast<double>(latency);
  for (int b : kLatencyBucketsMs) {
    if (latency <= b) ++latency_buckets_[b];
  }
  if (!info->mode.empty()) {
    replies_.with({info->mode, info->route, std::to_string(r.status)}).inc();
    reply_seconds_.with({info->mode, info->route}).observe(static_cast<double>(latency) / 1000.0);
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
  out += "# HELP eq_api_request_duration_seconds Time from request received to response "
         "queued.\n";
  out += "# TYPE eq_api_request_duration_seconds histogram\n";
  for (int b : kLatencyBucketsMs) {
    auto it = latency_buckets_.find(b);
    out += "eq_api_request_duration_seconds_bucket{le=\"" + metrics::formatValue(b / 1000.0) +
           "\"} " + std::to_string(it == latency_buckets_.end() ? 0 : it->second) + "\n";
  }
  out += "eq_api_request_duration_seconds_bucket{le=\"+Inf\"} " + std::to_string(latency_count_) +
         "\n";
  out += "eq_api_request_duration_seconds_sum " + metrics::formatValue(latency_sum_ms_ / 1000.0) +
         "\n";
  out += "eq_api_request_duration_seconds_count " + std::to_string(latency_count_) + "\n";
  out += "# HELP eq_api_rate_limited_total Requests refused with 429 by the per-key rate "
         "limit.\n";
  out += "# TYPE eq_api_rate_limited_total counter\n";
  out += "eq_api_rate_limited_total " + std::to_string(rate_limited_) + "\n";
  out += "# HELP eq_api_quota_rejected_total Reply calls refused with 402 (quota exhausted or "
         "expired).\n";
  out += "# TYPE eq_api_quota_rejected_total counter\n";
  out += "eq_api_quota_rejected_total " + std::to_string(quota_rejected_) + "\n";
  out += "# HELP eq_api_idempotent_replays_total Stored responses replayed for a repeated "
         "Idempotency-Key.\n";
  out += "# TYPE eq_api_idempotent_replays_total counter\n";
  out += "eq_api_idempotent_replays_total " + std::to_string(idempotent_replays_) + "\n";
  out += "# HELP eq_api_in_flight Requests received and not yet answered.\n";
  out += "# TYPE eq_api_in_flight gauge\n";
  out += "eq_api_in_flight " + std::to_string(in_flight_) + "\n";
  out += "# HELP eq_api_broker_connected 1 while the broker connection is up.\n";
  out += "# TYPE eq_api_broker_connected gauge\n";
  out += "eq_api_broker_connected " + std::string(ctx_.broker->connected() ? "1" : "0") + "\n";
  out += "# HELP eq_api_broker_reconnects_total Broker reconnections since start.\n";
  out += "# TYPE eq_api_broker_reconnects_total counter\n";
  out += "eq_api_broker_reconnects_total " + std::to_string(ctx_.broker->reconnects()) + "\n";
  out += registry_.render();
  return out;
}

}  // namespace eq::api
