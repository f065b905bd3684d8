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
  std::optional<Mode> m = parseMode(mode);
  if (!m) return defaults::kAnalyzeDeadlineMs;  // analyze calls have no mode
  switch (*m) {
    case Mode::kFast: return defaults::kSyncDeadlineFastMs;
    case Mode::kStandard: return defaults::kSyncDeadlineStandardMs;
    case Mode::kPerfect: return defaults::kSyncDeadlinePerfectMs;
  }
  return defaults::kAnalyzeDeadlineMs;
}

}  // namespace

// What the reply endpoints' database step decided, read on the loop once the
// batch committed.
struct ReplyAdmission {
  bool bad_media = false;      // 415: no database work ran
  std::string idem_error;      // 400 for a malformed Idempotency-Key
  std::optional<IdempotencyRequest> idem;
  IdempotencyBegin begun;      // when idem is set
  Result<ReplyRequest> parsed = Status(400, "not parsed");
  bool charged = false;
  ChargeOutcome charge = ChargeOutcome::kExhausted;
  std::string task_id;         // async: the row inserted with the charge
};

// The route table. Every route and its handler is one row; the route label
// of logs and metrics is the row's path.
const std::array<ApiService::Route, 9> ApiService::kRoutes = {{
    {"/api/v1/reply", "POST", false, &ApiService::replySync},
    {"/api/v1/reply/async", "POST", false, &ApiService::replyAsync},
    {"/api/v1/analyze", "POST", false, &ApiService::analyze},
    {"/api/v1/quota", "GET", false, &ApiService::quota},
    {"/api/v1/task/{task_id}", "GET", true, &ApiService::task},
    {"/healthz", "GET", false, &ApiService::healthz},
    {"/readyz", "GET", false, &ApiService::readyz},
    {"/metrics", "GET", false, &ApiService::metrics},
    {"/openapi.yaml", "GET", false, &ApiService::openapi},
}};

const ApiService::Route* ApiService::matchRoute(std::string_view path) {
  for (const Route& r : kRoutes) {
    if (!r.prefix) {
      if (r.path == path) return &r;
      continue;
    }
    // "/api/v1/task/{task_id}": the prefix, then one non-empty segment.
    std::string_view prefix = r.path.substr(0, r.path.find('{'));
    if (path.size() > prefix.size() && path.substr(0, prefix.size()) == prefix &&
        path.find('/', prefix.size()) == std::string_view::npos) {
      return &r;
    }
  }
  return nullptr;
}

void ApiService::handle(HttpRequest&& req, Responder res) {
  auto c = std::make_shared<Call>(Call{std::move(req), res, std::make_shared<RequestInfo>(), {}});
  const Info& info = c->info;
  info->request_id = c->req.request_id;
  info->method = c->req.method;
  info->started_ms = c->req.received_ms;
  in_flight_.add(1);

  const Route* route = matchRoute(c->req.path);
  if (route == nullptr) {
    info->route = "unmatched";
    sendError(info, res, 404, "not found: no route " + c->req.path);
    return;
  }
  info->route = std::string(route->path);
  if (c->req.method != route->method) {
    HttpResponse r = HttpServer::errorResponse(405, "method not allowed: use " +
                                                        std::string(route->method),
                                               info->request_id);
    r.headers.emplace_back("Allow", std::string(route->method));
    finish(info, res, std::move(r));
    return;
  }
  (this->*route->handler)(c);
}

int64_t ApiService::dbDeadline() const {
  return ctx_.clock->nowMs() + ctx_.config->api_db_wait_ms;
}

// ---------------------------------------------------------------- public routes

void ApiService::healthz(const CallPtr& c) {
  sendJson(c->info, c->res, 200, "{\"status\":\"alive\"}", "ok");
}

void ApiService::metrics(const CallPtr& c) {
  HttpResponse r;
  r.headers.emplace_back("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
  r.body = renderMetrics();
  finish(c->info, c->res, std::move(r));
}

void ApiService::openapi(const CallPtr& c) {
  HttpResponse r;
  r.headers.emplace_back("Content-Type", "application/yaml; charset=utf-8");
  r.body = std::string(embedded::file("schema/openapi.yaml"));
  finish(c->info, c->res, std::move(r));
}

void ApiService::readyz(const CallPtr& c) {
  // An empty database step: it succeeds when its batch got the write lock
  // (BEGIN IMMEDIATE) within the deadline, because every request eq-api
  // serves writes (the rate counter); a database that can be read but not
  // written is not ready. The loop thread itself never waits for the lock.
  auto r = std::make_unique<DbRequest>();
  r->now_ms = ctx_.clock->nowMs();
  r->deadline_ms = dbDeadline();
  r->done = [this, c](DbRequest& done) {
    bool broker = ctx_.broker->connected();
    bool db = done.status.isOk();
    std::string data = std::string("{\"broker\":") + (broker ? "true" : "false") +
                       ",\"database\":" + (db ? "true" : "false") + "}";
    if (broker && db) {
      sendJson(c->info, c->res, 200, data, "ready");
      return;
    }
    // Like every error, data is null (PRODUCT.md §2); msg names what is down.
    std::string msg = "not ready:";
    if (!broker) msg += " broker unavailable";
    if (!db) msg += std::string(broker ? "" : ",") + " database unavailable";
    HttpResponse resp = HttpServer::errorResponse(503, msg, c->info->request_id);
    resp.headers.emplace_back("Retry-After", "1");
    finish(c->info, c->res, std::move(resp));
  };
  ctx_.db->submit(std::move(r));
}

// ---------------------------------------------------------------- authentication

void ApiService::authorize(const CallPtr& c, DbWork work, bool writes, Then then) {
  // 401 for anything but a well-formed key, before any database step: a
  // malformed key never waits for the database.
  std::string key = bearerToken(c->req.header("authorization"));
  if (!wellFormedKey(key, ctx_.config->keyPrefix())) {
    unauthorized(c->info, c->res);
    return;
  }
  auto r = std::make_unique<DbRequest>();
  r->now_ms = ctx_.clock->nowMs();
  r->deadline_ms = dbDeadline();
  r->key_digest = crypto::sha256(key);
  r->env = ctx_.config->env;
  if (const AuthCache::Entry* e = auth_cache_.find(r->key_digest, r->now_ms)) {
    r->auth = e->auth;
    r->auth_epoch = e->epoch;
  }
  r->count_rate = true;  // every authenticated request counts
  r->writes = writes;
  r->work = std::move(work);
  r->done = [this, c, then = std::move(then)](DbRequest& done) {
    const Info& info = c->info;
    auth_cache_.sawEpoch(done.key_epoch);
    if (done.looked_up) {
      if (done.authenticated) {
        auth_cache_.put(done.key_digest, *done.auth, done.key_epoch, done.now_ms);
      } else {
        auth_cache_.forget(done.key_digest);
      }
    }
    if (!done.status.isOk()) {
      log::error("database step failed", {{"request_id", info->request_id},
                                          {"error", done.status.msg()}});
      unavailable(info, c->res, "the database is busy");
      return;
    }
    if (!done.authenticated) {
      unauthorized(info, c->res);
      return;
    }
    c->auth = done.auth;
    info->key_prefix = done.auth->display_prefix;
    const RateDecision& d = done.rate;
    info->extra_headers = {{"X-RateLimit-Limit", std::to_string(d.limit)},
                           {"X-RateLimit-Remaining", std::to_string(d.remaining)},
                           {"X-RateLimit-Reset", std::to_string(d.reset_seconds)}};
    if (!d.allowed) {
      rate_limited_.inc();
      info->extra_headers.emplace_back("Retry-After", std::to_string(d.reset_seconds));
      sendError(info, c->res, 429,
                "rate limit exceeded: " + std::to_string(d.limit) +
                    " requests per minute for this key; retry after " +
                    std::to_string(d.reset_seconds) + " s");
      return;
    }
    then(c);
  };
  ctx_.db->submit(std::move(r));
}

// ---------------------------------------------------------------- reply calls

void ApiService::replySync(const CallPtr& c) { reply(c, false); }
void ApiService::replyAsync(const CallPtr& c) { reply(c, true); }

void ApiService::reply(const CallPtr& c, bool async) {
  // Everything that needs no database is decided here, on the loop; what
  // does (Idempotency-Key, charge, task row) is one database step, in one
  // savepoint: if its last statement fails, none of it happened.
  auto a = std::make_shared<ReplyAdmission>();
  a->bad_media = !isJsonContentType(c->req.header("content-type"));
  DbWork work;
  if (!a->bad_media) {
    if (const std::string* key = c->req.header("idempotency-key")) {
      if (Status s = checkIdempotencyKey(*key); !s.isOk()) {
        a->idem_error = s.msg();
      } else {
        // The digest covers the raw bytes: two bodies that parse to the same
        // JSON but differ in spacing are different requests, as a client
        // resending the same request never produces them.
        a->idem = IdempotencyRequest{"", *key, c->info->route, crypto::sha256(c->req.body),
                                     c->info->request_id};
      }
    }
    a->parsed = parseReplyRequest(c->req.body, async, *ctx_.webhook_allow);
    if (async && a->parsed.isOk()) a->task_id = ids::newTaskId();
  }
  if (!a->bad_media && a->idem_error.empty()) {
    int64_t now = ctx_.clock->nowMs();
    std::string request_id = c->info->request_id;
    work = [a, now, request_id](Store& store, const AuthContext* who) -> Status {
      if (a->idem) {
        a->idem->account_id = who->account_id;
        Result<IdempotencyBegin> b = store.beginIdempotent(*a->idem, now);
        if (!b.isOk()) return b.status();
        a->begun = b.value();
        if (a->begun.state != IdempotencyState::kStarted) return Status::ok();
      }
      if (!a->parsed.isOk()) return Status::ok();  // 400, recorded by finish()
      const ReplyRequest& r = a->parsed.value();
      Result<ChargeOutcome> ch = store.chargeQuota(who->account_id, r.mode, now);
      if (!ch.isOk()) return ch.status();
      a->charge = ch.value();
      a->charged = ch.value() == ChargeOutcome::kCharged;
      if (!a->charged || a->task_id.empty()) return Status::ok();
      TaskRecord t;
      t.task_id = a->task_id;
      t.account_id = who->account_id;
      t.key_id = who->key_id;
      t.request_id = request_id;
      t.mode = r.mode;
      t.webhook_url = r.webhook_url;
      t.created_at = now;
      return store.createTask(t);
    };
  }
  authorize(c, std::move(work), true, [this, async, a](const CallPtr& call) {
    replyAdmitted(call, async, *a);
  });
}

void ApiService::replyAdmitted(const CallPtr& c, bool async, const ReplyAdmission& a) {
  const Info& info = c->info;
  const Responder& res = c->res;
  if (a.bad_media) {
    sendError(info, res, 415, "unsupported media type: send Content-Type: application/json");
    return;
  }
  if (!a.idem_error.empty()) {
    sendError(info, res, 400, a.idem_error);
    return;
  }
  if (a.idem) {
    const IdempotencyBegin& b = a.begun;
    switch (b.state) {
      case IdempotencyState::kStarted:
        info->idempotency = a.idem;
        break;
      case IdempotencyState::kReplay: {
        idempotent_replays_.inc();
        HttpResponse r;
        r.status = b.http_status;
        r.headers.emplace_back("Content-Type", "application/json; charset=utf-8");
        r.headers.emplace_back("Idempotent-Replayed", "true");
        r.body = b.response_body;
        finish(info, res, std::move(r));
        return;
      }
      case IdempotencyState::kConflict:
        sendError(info, res, 409,
                  b.other_route
                      ? "conflict: Idempotency-Key already used on another endpoint; use a new "
                        "key for a new request"
                      : "conflict: Idempotency-Key reused with a different request body; use a "
                        "new key for a new request");
        return;
      case IdempotencyState::kInProgress:
        // Answering 409 rather than waiting keeps the loop free of parked
        // requests; the client retries and then gets the stored response.
        info->extra_headers.emplace_back("Retry-After", "1");
        sendError(info, res, 409,
                  "conflict: a request with this Idempotency-Key is still in progress; retry "
                  "after it completes");
        return;
    }
  }
  if (!a.parsed.isOk()) {
    sendError(info, res, 400, a.parsed.status().msg());
    return;
  }
  const ReplyRequest& r = a.parsed.value();
  info->mode = r.mode;
  if (!a.charged) {
    quota_rejected_.inc();
    sendError(info, res, 402,
              a.charge == ChargeOutcome::kExpired
                  ? "quota expired: the " + r.mode +
                        " quota of this key has passed its expire_at (see GET /api/v1/quota); "
                        "ask for a renewal"
                  : "quota exhausted: no " + r.mode +
                        " units left for this key (see GET /api/v1/quota); use another mode or "
                        "ask for more units");
    return;
  }
  info->account_id = c->auth->account_id;
  msg::Job job;
  job.kind = jobKindName(JobKind::kReply);
  job.request_id = info->request_id;
  job.mode = r.mode;
  job.message = r.message;
  job.context = r.context;
  job.scene = r.scene;
  job.reply_count = r.reply_count;
  if (!async) {
    job.deadline_ms = ctx_.clock->nowMs() + syncDeadlineMs(*ctx_.config, r.mode);
    std::string mode = r.mode;
    ctx_.broker->call(job, [this, info, res, mode](Result<msg::SyncResult> out) {
      if (out.isOk() && out.value().ok) {
        sendJson(info, res, 200, out.value().data_json, "ok");
        return;
      }
      // Anything but a result refunds the unit charged at admission, in the
      // database step finish() runs before answering.
      info->refund_mode = mode;
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
    return;
  }
  job.task_id = a.task_id;
  std::string task_id = a.task_id;
  // Answer only once the broker has the message: a task id we hand out must
  // never belong to a job that was lost.
  ctx_.broker->publishPersistent(
      msg::queueForMode(r.mode), msg::encodeJob(job), [this, info, res, task_id](Status s) {
        if (s.isOk()) {
          sendJson(info, res, 200,
                   "{\"task_id\":\"" + task_id + "\",\"status\":\"" +
                       taskStatusName(TaskStatus::kQueued) + "\"}",
                   "ok");
          return;
        }
        // Not accepted: the task fails at once, which also refunds its unit
        // (finish() runs it before answering).
        info->failed_task_id = task_id;
        info->failed_task_msg = "not accepted: " + s.msg();
        unavailable(info, res, "message broker unavailable");
      });
}

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
  auto q = std::make_shared<AccountQuota>();
  DbWork work = [q](Store& store, const AuthContext* who) -> Status {
    Result<AccountQuota> r = store.quota(who->account_id);
    if (!r.isOk()) return r.status();
    *q = r.value();
    return Status::ok();
  };
  authorize(c, std::move(work), false, [this, q](const CallPtr& call) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    w.Key("quota");
    w.StartObject();
    w.Key("standard");
    w.Int64(q->remaining.standard);
    w.Key("fast");
    w.Int64(q->remaining.fast);
    w.Key("perfect");
    w.Int64(q->remaining.perfect);
    w.EndObject();
    putString(w, "expire_at", iso8601Offset(q->expire_at_ms));
    putString(w, "tier", q->tier);
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
    const TaskRecord& task = *found->task;
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
    std::optional<TaskStatus> status = parseTaskStatus(task.status);
    if (status == TaskStatus::kSucceeded && !task.result_json.empty()) {
      w.RawValue(task.result_json.data(), task.result_json.size(), rapidjson::kObjectType);
    } else {
      w.Null();
    }
    w.Key("error");
    if (status == TaskStatus::kFailed) {
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
      const DeliveryRecord* rec = found->delivery ? &*found->delivery : nullptr;
      putString(w, "status", rec != nullptr ? rec->status : "none");
      w.Key("attempts");
      w.Int(rec != nullptr ? rec->attempts : 0);
      putTime(w, "last_attempt_at", rec != nullptr ? rec->last_attempt_at : 0);
      w.Key("last_status");
      if (rec != nullptr && rec->last_status > 0) w.Int(rec->last_status); else w.Null();
      w.EndObject();
    }
    w.EndObject();
    sendJson(call->info, call->res, 200, std::string_view(sb.GetString(), sb.GetSize()), "ok");
  });
}

// ---------------------------------------------------------------- answers

void ApiService::sendJson(const Info& info, const Responder& res, int status,
                          std::string_view data_json, std::string_view msg) {
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json; charset=utf-8");
  r.body = json::envelope(status == 200 ? 0 : status, data_json, msg);
  finish(info, res, std::move(r));
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

void ApiService::finish(const Info& info, const Responder& res, HttpResponse r) {
  bool has_id = false;
  for (const auto& [k, v] : r.headers) has_id = has_id || k == "X-Request-Id";
  if (!has_id) r.headers.emplace_back("X-Request-Id", info->request_id);
  for (const auto& h : info->extra_headers) r.headers.push_back(h);
  if (!info->idempotency && info->refund_mode.empty() && info->failed_task_id.empty()) {
    send(info, res, std::move(r));
    return;
  }
  // The request's last writes, committed before the answer leaves: a client
  // that retries with the same Idempotency-Key, or reads its quota, right
  // after the answer sees them. Each write is one statement (or its own
  // savepoint) and correct alone, so one failing does not undo another.
  struct Settle {
    std::optional<IdempotencyRequest> idem;
    int status = 0;
    std::string body;
    std::string account, refund_mode, task_id, task_msg;
    std::vector<std::string> errors;
  };
  auto st = std::make_shared<Settle>();
  st->idem = std::move(info->idempotency);
  info->idempotency.reset();
  st->status = r.status;
  st->body = r.body;
  st->account = info->account_id;
  st->refund_mode = std::move(info->refund_mode);
  st->task_id = std::move(info->failed_task_id);
  st->task_msg = std::move(info->failed_task_msg);
  auto req = std::make_unique<DbRequest>();
  int64_t now = ctx_.clock->nowMs();
  req->now_ms = now;
  req->deadline_ms = dbDeadline();
  req->work = [st, now](Store& store, const AuthContext*) -> Status {
    if (!st->refund_mode.empty()) {
      if (Status s = store.refundQuota(st->account, st->refund_mode); !s.isOk()) {
        st->errors.push_back("refund failed: " + s.msg());
      }
    }
    if (!st->task_id.empty()) {
      Result<bool> failed = store.markTaskFailed(st->task_id, 503, st->task_msg, now);
      if (!failed.isOk()) {
        // TODO(issue 4): a sweeper for tasks left queued without a message.
        st->errors.push_back("could not fail unaccepted task; its unit stays charged: " +
                             failed.status().msg());
      }
    }
    if (st->idem) {
      // Final outcomes are remembered; a 429 or a 5xx says nothing about
      // what the request would do, so its row is dropped and a retry runs
      // afresh.
      bool final = (st->status >= 200 && st->status < 300) ||
                   (st->status >= 400 && st->status < 500 && st->status != 429);
      Status s = final ? store.completeIdempotent(*st->idem, st->status, st->body)
                       : store.abandonIdempotent(*st->idem);
      if (!s.isOk()) {
        // The row stays pending: retries get 409 "in progress" until the
        // lease (Store::kIdempotencyLeaseMs) lets one take it over.
        st->errors.push_back("idempotency record not settled: " + s.msg());
      }
    }
    return Status::ok();
  };
  req->done = [this, info, res, st, r = std::move(r)](DbRequest& done) mutable {
    if (!done.status.isOk()) st->errors.push_back(done.status.msg());
    for (const std::string& e : st->errors) {
      // What is not written here is what an operator reconciles from this line.
      log::error("settling the request failed", {{"request_id", info->request_id},
                                                 {"mode", st->refund_mode},
                                                 {"task_id", st->task_id},
                                                 {"error", e}});
    }
    send(info, res, std::move(r));
  };
  ctx_.db->submit(std::move(req));
}

void ApiService::send(const Info& info, const Responder& res, HttpResponse r) {
  int64_t latency = ctx_.clock->nowMs() - info->started_ms;
  in_flight_.add(-1);
  requests_.with({info->route, std::to_string(r.status)}).inc();
  request_seconds_.observe(static_cast<double>(latency) / 1000.0);
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

std::string ApiService::renderMetrics() {
  broker_connected_.set(ctx_.broker->connected() ? 1 : 0);
  uint64_t reconnects = ctx_.broker->reconnects();
  if (reconnects > reconnects_seen_) {
    broker_reconnects_.inc(static_cast<double>(reconnects - reconnects_seen_));
    reconnects_seen_ = reconnects;
  }
  auto batches = static_cast<uint64_t>(ctx_.db->batches());
  if (batches > db_batches_seen_) {
    db_batches_.inc(static_cast<double>(batches - db_batches_seen_));
    db_batches_seen_ = batches;
  }
  return registry_.render();
}

}  // namespace eq::api
