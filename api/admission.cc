// Admission of the two reply endpoints (Idempotency-Key, charge, the task
// row) and their way through the broker; finish() settles what admission
// started (the stored response, a refund, a failed task) before answering.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "api/handlers.h"
#include "api/request_util.h"
#include "api/validation.h"
#include "common/crypto.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/log.h"
#include "common/messages.h"

namespace eq::api {
using util::isJsonContentType;
using util::kTaskPrefix;
using util::putString;
using util::putTime;
using util::syncDeadlineMs;
using util::Writer;

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
  int64_t charged_at_ms = 0;   // the admission's clock: the month the unit counts in
  std::string task_id;         // async: the row inserted with the charge
  std::string job;             // async: the encoded job, kept with the open charge
};

namespace {

// The job of a reply call, as a worker reads it (common/messages.h).
msg::Job replyJob(const ReplyRequest& r, const std::string& request_id) {
  msg::Job job;
  job.kind = jobKindName(JobKind::kReply);
  job.request_id = request_id;
  job.mode = r.mode;
  job.message = r.message;
  job.context = r.context;
  job.scene = r.scene;
  job.reply_count = r.reply_count;
  return job;
}

// The 402's words for a call that was not charged (docs/contract.md §4,
// §11): each says which limit it met and what lifts it.
std::string notChargedMessage(ChargeOutcome why, const std::string& mode) {
  switch (why) {
    case ChargeOutcome::kExpired:
      return "quota expired: the " + mode +
             " quota of this key has passed its expire_at (see GET /api/v1/quota); ask for a "
             "renewal";
    case ChargeOutcome::kMonthlyLimit:
      return "monthly volume reached: this account has used its units for this calendar month "
             "(UTC; see monthly in GET /api/v1/quota); more than that needs a commercial "
             "arrangement";
    case ChargeOutcome::kCharged:
    case ChargeOutcome::kExhausted:
      break;
  }
  return "quota exhausted: no " + mode +
         " units left for this key (see GET /api/v1/quota); use another mode or ask for more "
         "units";
}

}  // namespace

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
    if (async && a->parsed.isOk()) {
      a->task_id = ids::newTaskId();
      // Encoded here, before admission, because the open charge keeps it
      // until the broker has confirmed it: should this process die before
      // it closes the charge, eq-dispatcher publishes the job again rather
      // than guess whether it reached the queue (Store::claimOrphanedJobs).
      msg::Job job = replyJob(a->parsed.value(), c->info->request_id);
      job.task_id = a->task_id;
      a->job = msg::encodeJob(job);
    }
  }
  if (!a->bad_media && a->idem_error.empty()) {
    int64_t now = ctx_.clock->nowMs();
    std::string request_id = c->info->request_id;
    // When the call must have ended: a sync call at its deadline, an async
    // one when its publish would have timed out. Only a sweeper reads it.
    int64_t deadline = now + (async ? util::kAsyncSettleWindowMs
                                    : (a->parsed.isOk()
                                           ? syncDeadlineMs(*ctx_.config, a->parsed.value().mode)
                                           : 0));
    std::string instance = ctx_.instance_id;
    if (!c->portal && !a->idem && a->parsed.isOk()) {
      // A key's call without an Idempotency-Key: charged with the batch's
      // others of its account and mode in one statement
      // (Store::chargeAndOpenAll), its account and key filled in there.
      const ReplyRequest& r = a->parsed.value();
      Store::ChargeCall charge{
          OpenCharge{request_id, instance, "", r.mode, a->task_id, deadline, now, a->job, ""}, "",
          r.webhook_url};
      authorizeCharge(c, std::move(charge),
                      [this, async, a, now](const CallPtr& call, ChargeOutcome outcome) {
                        a->charge = outcome;
                        a->charged = outcome == ChargeOutcome::kCharged;
                        a->charged_at_ms = now;
                        replyAdmitted(call, async, *a);
                      });
      return;
    }
    work = [a, now, request_id, deadline, instance](Store& store,
                                                    const AuthContext* who) -> Status {
      if (a->idem) {
        a->idem->account_id = who->account_id;
        Result<IdempotencyBegin> b = store.beginIdempotent(*a->idem, now);
        if (!b.isOk()) return b.status();
        a->begun = b.value();
        if (a->begun.state != IdempotencyState::kStarted) return Status::ok();
      }
      if (!a->parsed.isOk()) return Status::ok();  // 400, recorded by finish()
      const ReplyRequest& r = a->parsed.value();
      // Charged, the charge stays open until finish() settles it; if this
      // process dies first, eq-dispatcher settles it
      // (Store::settleOrphanedCharges). An async call's task is made with it.
      Result<ChargeOutcome> ch =
          store.chargeAndOpen(OpenCharge{request_id, instance, who->account_id, r.mode, a->task_id,
                                         deadline, now, a->job, a->idem ? a->idem->key : ""},
                              who->key_id, r.webhook_url);
      if (!ch.isOk()) return ch.status();
      a->charge = ch.value();
      a->charged = ch.value() == ChargeOutcome::kCharged;
      a->charged_at_ms = now;
      return Status::ok();
    };
  }
  authorize(c, std::move(work), true, [this, async, a](const CallPtr& call) {
    replyAdmitted(call, async, *a);
  });
}

void ApiService::replyAdmitted(const CallPtr& c, bool async, ReplyAdmission& a) {
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
    sendError(info, res, 402, notChargedMessage(a.charge, r.mode));
    return;
  }
  info->account_id = c->auth->account_id;
  info->charged_at_ms = a.charged_at_ms;
  info->open_charge = info->request_id;
  if (!async) {
    msg::Job job = replyJob(r, info->request_id);
    job.deadline_ms = ctx_.clock->nowMs() + syncDeadlineMs(*ctx_.config, r.mode);
    std::string mode = r.mode;
    ctx_.broker->call(job, [this, info, res, mode](Result<msg::SyncResult> out) {
      if (out.isOk() && out.value().ok) {
        // The unit is kept: its open charge is closed after the answer
        // (finish()), not before, so a sync reply waits for no database.
        info->close_charge_after_answer = true;
        info->tokens_used = out.value().tokens_used;  // for the usage record
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
  std::string task_id = a.task_id;
  // Answer only once the broker has the message: a task id we hand out must
  // never belong to a job that was lost.
  ctx_.broker->publishPersistent(
      msg::queueForMode(r.mode), std::move(a.job), [this, info, res, task_id](Status s) {
        if (s.isOk()) {
          // The same body a sweeper records for the Idempotency-Key should
          // this process die before it answers (json::asyncAcceptedBody).
          sendBody(info, res, 200, json::asyncAcceptedBody(task_id));
          return;
        }
        // Not accepted: the task fails at once, which also refunds its unit
        // (finish() runs it before answering).
        info->failed_task_id = task_id;
        info->failed_task_msg = "not accepted: " + s.msg();
        unavailable(info, res, "message broker unavailable");
      });
}

void ApiService::finish(const Info& info, const Responder& res, HttpResponse r) {
  bool has_id = false;
  for (const auto& [k, v] : r.headers) has_id = has_id || k == "X-Request-Id";
  if (!has_id) r.headers.emplace_back("X-Request-Id", info->request_id);
  for (const auto& h : info->extra_headers) r.headers.push_back(h);
  if (info->hsts) r.headers.emplace_back("Strict-Transport-Security", "max-age=31536000");
  if (!info->idempotency && info->refund_mode.empty() && info->failed_task_id.empty() &&
      info->open_charge.empty()) {
    send(info, res, std::move(r));
    return;
  }
  if (info->close_charge_after_answer && !info->idempotency && info->refund_mode.empty() &&
      info->failed_task_id.empty()) {
    // A sync call answered 200 keeps its unit; all that is left is to close
    // its open charge, which need not hold the answer: if this process dies
    // before the close commits, the sweeper refunds a call that was
    // answered (a free call, never a lost unit), a window of milliseconds.
    // The closes of one loop iteration go to the database as one step
    // (closeAnsweredCharges()).
    answered_.push_back(AnsweredCharge{std::move(info->open_charge), info->account_id,
                                       info->mode, info->tokens_used});
    info->open_charge.clear();
    if (answered_.size() >= kMaxClosesPerStep) closeAnsweredCharges();
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
    std::string account, refund_mode, task_id, task_msg, open_charge;
    int64_t charged_at_ms = 0;
    std::vector<std::string> errors;
  };
  auto st = std::make_shared<Settle>();
  st->idem = std::move(info->idempotency);
  info->idempotency.reset();
  st->status = r.status;
  st->body = r.body;
  st->account = info->account_id;
  st->refund_mode = std::move(info->refund_mode);
  st->charged_at_ms = info->charged_at_ms;
  st->task_id = std::move(info->failed_task_id);
  st->task_msg = std::move(info->failed_task_msg);
  st->open_charge = std::move(info->open_charge);
  auto req = std::make_unique<DbRequest>();
  int64_t now = ctx_.clock->nowMs();
  req->now_ms = now;
  req->deadline_ms = dbDeadline();
  // A refund (of the call, or of its failed task) writes the account's row.
  if (!st->account.empty() && (!st->refund_mode.empty() || !st->task_id.empty())) {
    req->accounts.push_back(st->account);
  }
  req->work = [st, now](Store& store, const AuthContext*) -> Status {
    // The charge is settled here, or was already by a sweeper that took this
    // process for dead: only the one that closes the open charge refunds.
    bool close_charge = !st->open_charge.empty();
    if (!st->task_id.empty()) {
      // Not accepted: the job kept with the open charge goes first, so that
      // a sweeper which finds the charge open fails the task (and refunds
      // it) rather than publishing the job again. Failing the task here
      // refunds it (and is a no-op if a sweeper settled it first). If it
      // cannot be written, the open charge stays open for the sweeper; if
      // even the job could not be dropped, the sweeper publishes it and the
      // task runs, charged once, although this answer said 503
      // (docs/architecture.md, "Crash-safe accounting").
      if (!st->open_charge.empty()) {
        if (Status f = store.forgetChargeJob(st->open_charge); !f.isOk()) {
          st->errors.push_back("could not drop the unaccepted job from its open charge: " +
                               f.msg());
        }
      }
      Result<bool> failed = store.markTaskFailed(st->task_id, 503, st->task_msg, now);
      if (!failed.isOk()) {
        st->errors.push_back("could not fail unaccepted task; left to the sweeper: " +
                             failed.status().msg());
        close_charge = false;
      } else if (!failed.value()) {
        // The task had already left `queued`: a sweeper took this process
        // for dead and published the job again, and a worker has it. The
        // unit is the task's to settle; this answer's 503 is out of date.
        st->errors.push_back(
            "unaccepted task already taken by a worker (published again by "
            "a sweeper); it will run, charged once");
      }
    }
    bool still_open = true;
    if (close_charge) {
      Result<bool> closed = store.closeCharge(st->open_charge);
      if (!closed.isOk()) {
        st->errors.push_back("open charge not closed: " + closed.status().msg());
      } else {
        still_open = closed.value();
      }
    }
    if (!st->refund_mode.empty() && still_open) {
      // Not refunded: undo this step (the charge reopens) and leave the
      // refund to the sweeper, which settles it after the call's deadline.
      if (Status s = store.refundQuota(st->account, st->refund_mode, st->charged_at_ms, now);
          !s.isOk()) {
        return s;
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

void ApiService::closeAnsweredCharges() {
  if (answered_.empty()) return;
  auto closes = std::make_shared<std::vector<AnsweredCharge>>();
  closes->swap(answered_);
  auto close = std::make_unique<DbRequest>();
  close->now_ms = ctx_.clock->nowMs();
  close->deadline_ms = close->now_ms + util::kCloseChargeWaitMs;
  for (const AnsweredCharge& a : *closes) {
    if (a.tokens > 0) close->accounts.push_back(a.account_id);  // usage rows of their tokens
  }
  close->work = [closes, now = close->now_ms](Store& store, const AuthContext*) -> Status {
    // The usage record's tokens, summed per account and mode, counted only
    // for the charges this process closed (a sweeper that closed one first
    // refunded it).
    std::vector<std::string> ids;
    ids.reserve(closes->size());
    for (const AnsweredCharge& a : *closes) ids.push_back(a.request_id);
    Result<std::vector<std::string>> closed = store.closeCharges(ids);
    if (!closed.isOk()) return closed.status();
    const std::set<std::string> mine(closed.value().begin(), closed.value().end());
    std::map<std::pair<std::string, std::string>, int64_t> tokens;
    for (const AnsweredCharge& a : *closes) {
      if (a.tokens > 0 && mine.contains(a.request_id)) tokens[{a.account_id, a.mode}] += a.tokens;
    }
    for (const auto& [who, n] : tokens) {
      if (Status s = store.recordTokens(who.first, who.second, n, now); !s.isOk()) return s;
    }
    return Status::ok();
  };
  close->done = [closes](DbRequest& done) {
    if (!done.status.isOk()) {
      log::warn("open charges not closed; the sweeper will refund them after their deadline",
                {{"charges", static_cast<long long>(closes->size())},
                 {"first_request_id", closes->front().request_id},
                 {"error", done.status.msg()}});
    }
  };
  ctx_.db->submit(std::move(close));
}

}  // namespace eq::api
