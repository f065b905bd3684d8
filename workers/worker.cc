#include "workers/worker.h"

#include <poll.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/defaults.h"
#include "common/json.h"
#include "common/log.h"
#include "common/messages.h"
#include "common/msg_auth.h"
#include "common/timefmt.h"

namespace eq::worker {
namespace {

using json::putString;
using json::Writer;

// A healthy broker confirms in milliseconds; one that has not confirmed an
// outcome in 10 s is blocked (a resource alarm) or stuck, and reconnecting
// hands our unacked jobs to whoever can finish them.
constexpr int64_t kConfirmTimeoutMs = 10'000;
// Frames handled per turn of the consumer loop before acks are flushed.
constexpr int kFramesPerTurn = 64;

engine::Mode toMode(const std::string& m) {
  if (m == "standard") return engine::Mode::kStandard;
  if (m == "perfect") return engine::Mode::kPerfect;
  return engine::Mode::kFast;
}

}  // namespace

std::string Worker::replyDataJson(const engine::ReplyOutput& out, const std::string& request_id,
                                  const std::string& mode) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("replies");
  w.StartArray();
  for (const engine::Reply& r : out.replies) {
    w.StartObject();
    putString(w, "text", r.text);
    w.Key("score");
    w.Double(std::clamp(r.score, 0.0, 1.0));
    putString(w, "eq_analysis", r.eq_analysis);
    w.EndObject();
  }
  w.EndArray();
  putString(w, "request_id", request_id);
  putString(w, "mode", mode);
  w.Key("tokens_used");
  w.Int64(out.tokens_used);
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

std::string Worker::analysisJson(const engine::Analysis& a) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  putString(w, "emotion", a.emotion);
  w.Key("intensity");
  w.Double(std::clamp(a.intensity, 0.0, 1.0));
  putString(w, "underlying_need", a.underlying_need);
  putString(w, "relationship_stage", a.relationship_stage);
  putString(w, "suggested_strategy", a.suggested_strategy);
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

int Worker::run() {
  const std::string name =
      "eq-worker " + (opts_.mode.empty() ? std::string("analyze") : opts_.mode);
  amqp::serveUntilStopped(
      opts_.amqp_url, name, stop_,
      [this](amqp::Connection& conn) {
        ++generation_;
        ledger_ = OutcomeLedger{};
        finished_.clear();
        return serve(conn);
      },
      [this](const Status& s) { connectionLost(s); });
  log::info("worker stopped");
  return 0;
}

void Worker::connectionLost(const Status& s) {
  if (opts_.metrics != nullptr) opts_.metrics->brokerLost();
  // Jobs of that connection that have not started cannot be acked any
  // more and the broker is redelivering them: running them would only
  // spend model time on results nobody can publish.
  if (size_t dropped = pool_.takeQueued().size(); dropped > 0) {
    log::warn("dropped jobs of the lost connection before they started",
              {{"jobs", static_cast<long long>(dropped)}});
  }
  if (!s.isOk()) {
    log::warn("broker connection lost; reconnecting",
              {{"error", s.msg()}, {"unacked_jobs", static_cast<long long>(ledger_.held())}});
  }
}

Status Worker::serve(amqp::Connection& conn) {
  if (Status s = conn.declareTopology(); !s.isOk()) return s;
  // RabbitMQ applies the prefetch per consumer (quorum queues do not
  // support a channel-wide one), so a worker that also consumes the analyze
  // queue may hold twice as many; the extra ones wait in the pool's queue.
  if (Status s = conn.qos(static_cast<uint16_t>(opts_.prefetch)); !s.isOk()) return s;
  if (Status s = conn.enableConfirms(); !s.isOk()) return s;
  // Each kind of work has two queues: the classic one that sync jobs arrive
  // on, and the quorum one for async jobs and for sync jobs moved there
  // after a redelivery (common/messages.h).
  if (!opts_.mode.empty()) {
    if (Status s = conn.consume(msg::syncQueueForMode(opts_.mode)); !s.isOk()) return s;
    if (Status s = conn.consume(msg::queueForMode(opts_.mode)); !s.isOk()) return s;
  }
  if (opts_.analyze) {
    if (Status s = conn.consume(msg::kQueueSyncAnalyze); !s.isOk()) return s;
    if (Status s = conn.consume(msg::kQueueAnalyze); !s.isOk()) return s;
  }
  log::info("worker consuming", {{"mode", opts_.mode},
                                 {"analyze", static_cast<long long>(opts_.analyze)},
                                 {"concurrency", static_cast<long long>(opts_.concurrency)},
                                 {"prefetch", static_cast<long long>(opts_.prefetch)},
                                 {"inline", static_cast<long long>(opts_.inline_jobs)}});
  if (opts_.metrics != nullptr) opts_.metrics->brokerConnected();
  auto turn = [&](int wait_ms) -> Status {
    if (Status s = pump(conn, wait_ms); !s.isOk()) return s;
    if (Status s = publishFinished(conn); !s.isOk()) return s;
    if (Status s = flushAcks(conn); !s.isOk()) return s;
    return checkConfirmTimeout();
  };
  while (!stop_.load()) {
    if (Status s = turn(1000); !s.isOk()) return s;
  }

  // Graceful stop: no new deliveries; what was sent to us but not started
  // goes back to the queue for another worker; what runs may finish, and
  // every outcome published waits for its confirm, then its ack.
  stopping_ = true;
  if (Status s = conn.cancelAll(); !s.isOk()) return s;
  for (const JobSlot& slot : pool_.takeQueued()) {
    if (slot.generation != generation_) continue;
    ledger_.released(slot.tag);
    if (Status s = conn.reject(slot.tag, true); !s.isOk()) return s;
  }
  int64_t give_up = nowMs() + opts_.stop_grace_ms;
  if (ledger_.held() > 0) {
    log::info("worker stopping: finishing jobs in hand",
              {{"jobs", static_cast<long long>(ledger_.held())},
               {"grace_ms", static_cast<long long>(opts_.stop_grace_ms)}});
  }
  while ((pool_.outstanding() > 0 || ledger_.held() > 0) && nowMs() < give_up) {
    if (Status s = turn(200); !s.isOk()) return s;
  }
  if (Status s = turn(0); !s.isOk()) return s;  // hands back late deliveries
  if (size_t left = ledger_.held(); left > 0) {
    log::warn("worker stopping with jobs unacked; the broker redelivers them",
              {{"jobs", static_cast<long long>(left)}});
  }
  return Status::ok();
}

Status Worker::pump(amqp::Connection& conn, int wait_ms) {
  if (!conn.hasBuffered() && wait_ms > 0) {
    pollfd fds[2] = {{conn.fd(), POLLIN, 0}, {pool_.wakeFd(), POLLIN, 0}};
    ::poll(fds, 2, wait_ms);  // EINTR (a signal) just ends the wait early
  }
  // Drain without blocking. Even when nothing arrived, one call lets
  // rabbitmq-c send a heartbeat that is due. The turn ends after a bounded
  // number of frames so that acks (and with them new deliveries) keep
  // flowing while the broker streams to us.
  // The outcomes published (and acks sent) in this turn leave together.
  amqp::Connection::Cork cork(conn);
  for (int frames = 0; frames < kFramesPerTurn; ++frames) {
    Result<amqp::Event> ev = conn.next(0);
    if (!ev.isOk()) return ev.status();
    if (std::holds_alternative<amqp::Timeout>(ev.value())) return Status::ok();
    if (auto* d = std::get_if<amqp::Delivery>(&ev.value())) {
      if (Status s = accept(conn, *d); !s.isOk()) return s;
    } else if (auto* c = std::get_if<amqp::Confirm>(&ev.value())) {
      if (Status s = onConfirm(conn, *c); !s.isOk()) return s;
    }
  }
  return Status::ok();
}

Status Worker::onConfirm(amqp::Connection& conn, const amqp::Confirm& c) {
  for (uint64_t tag : ledger_.confirmed(c.tag, c.multiple, c.ack)) {
    // The broker did not take this job's outcome (basic.nack: an internal
    // error of the target queue). The job goes back to its queue: the
    // outcome is recomputed wherever it lands next, and the work queue's
    // delivery limit (common/amqp.cc) ends it in eq.dead, failed and
    // refunded, should the broker keep refusing.
    auto it = finished_.find(tag);
    log::warn("broker refused a job's outcome (nack); job requeued",
              {{"kind", it != finished_.end() ? it->second.kind : std::string()}});
    finished_.erase(tag);
    if (Status s = conn.reject(tag, true); !s.isOk()) return s;
  }
  return Status::ok();
}

Status Worker::flushAcks(amqp::Connection& conn) {
  std::vector<uint64_t> covered;
  for (const AckFrame& a : ledger_.takeAcks(&covered)) {
    if (Status s = conn.ack(a.tag, a.multiple); !s.isOk()) return s;
  }
  // Counted once the job is acked: a job redelivered after a lost
  // connection is counted by the worker that finishes it.
  for (uint64_t tag : covered) {
    auto it = finished_.find(tag);
    if (it == finished_.end()) continue;
    if (opts_.metrics != nullptr) {
      const Finished& f = it->second;
      opts_.metrics->jobFinished(f.mode, f.kind, f.outcome, f.seconds, f.tokens);
    }
    finished_.erase(it);
  }
  return Status::ok();
}

Status Worker::checkConfirmTimeout() const {
  int64_t oldest = ledger_.oldestUnconfirmedMs();
  if (oldest >= 0 && nowMs() - oldest > kConfirmTimeoutMs) {
    // The confirm may still come; we cannot tell, so start over: the
    // broker redelivers every job we did not ack.
    return Status(503, "amqp: outcome publishes not confirmed in time");
  }
  return Status::ok();
}

Status Worker::accept(amqp::Connection& conn, const amqp::Delivery& d) {
  ledger_.delivered(d.tag);
  if (stopping_ && !opts_.inline_jobs) {
    // Sent before our cancel reached the broker.
    ledger_.released(d.tag);
    return conn.reject(d.tag, true);
  }
  msg::Verdict verdict =
      msg::verifyMessage(opts_.internal_key, msg::SignedKind::kJob, "", d.body, d.signature);
  if (verdict != msg::Verdict::kValid) {
    // Not from eq-api or eq-dispatcher: running it could put a signed
    // task event for any task id, or a reply, in the hands of whoever
    // published it. Dead-lettered unread (eq-dispatcher refuses it there
    // too) and its sender, if it gave a reply address, gets no answer.
    log::warn("job refused: signature does not verify",
              {{"reason", msg::verdictName(verdict)},
               {"queue", d.queue_hint},
               {"correlation_id", d.correlation_id}});
    ledger_.released(d.tag);
    Status rejected = conn.reject(d.tag, false);
    if (rejected.isOk() && opts_.metrics != nullptr) {
      opts_.metrics->messageRefused(msg::verdictName(verdict));
    }
    return rejected;
  }
  Result<msg::Job> decoded = msg::decodeJob(d.body);
  if (!decoded.isOk()) {
    // Retrying cannot fix a malformed message: dead-letter it at once.
    log::error("malformed job dead-lettered",
               {{"error", decoded.status().msg()}, {"queue", d.queue_hint}});
    // A sync caller still waits: its reply address and correlation id are
    // message properties, readable when the body is not, so it gets its
    // 500 (and its refund) now instead of a 504 at the deadline. An async
    // job's task is failed by the dispatcher from the dead letter.
    if (!d.reply_to.empty() && !d.correlation_id.empty()) {
      amqp::PublishOptions reply_opts;
      reply_opts.correlation_id = d.correlation_id;
      std::string body = msg::encodeSyncResult({false, "", 500, "generation failed"});
      reply_opts.signature = msg::signMessage(opts_.internal_key, msg::SignedKind::kSyncResult,
                                              d.correlation_id, body);
      Result<uint64_t> seq = conn.publish(d.reply_to, body, reply_opts);
      if (!seq.isOk()) return seq.status();
      ledger_.published(seq.value(), 0, nowMs());
    }
    ledger_.released(d.tag);
    Status rejected = conn.reject(d.tag, false);
    if (rejected.isOk() && opts_.metrics != nullptr) {
      opts_.metrics->jobFinished("unknown", "unknown", kJobMalformed, -1, 0);
    }
    return rejected;
  }
  msg::Job& job = decoded.value();
  int64_t now = nowMs();
  bool async = !job.task_id.empty();
  if (!async && job.deadline_ms > 0 && now >= job.deadline_ms) {
    log::debug("job skipped: caller gave up", {{"request_id", job.request_id}});
    finished_[d.tag] = Finished{job.mode, job.kind, kJobExpired, -1, 0};
    ledger_.ready(d.tag);
    return Status::ok();
  }
  if (!async && d.redelivered && msg::isSyncQueue(d.queue_hint)) {
    return moveToCountingQueue(conn, d, job, now);
  }
  if (async) {
    // Not waited for: it is confirmed (or not) like any publish, and the
    // job's own outcome follows it on this channel into the same queue, so
    // the dispatcher never sees them out of order.
    amqp::PublishOptions event_opts;
    event_opts.persistent = true;
    msg::TaskEvent running{"task.running", job.task_id, job.request_id, job.mode, now, "", 0, ""};
    std::string body = msg::encodeTaskEvent(running);
    event_opts.signature =
        msg::signMessage(opts_.internal_key, msg::SignedKind::kTaskEvent, "", body);
    Result<uint64_t> seq = conn.publish(msg::kQueueTaskEvents, body, event_opts);
    if (!seq.isOk()) return seq.status();
    ledger_.published(seq.value(), 0, now);
  }
  // One line per delivery, before any work: with EQ_LOG_LEVEL=debug an
  // operator can tell which job a worker held when it died, and how often
  // the broker has handed this job out already (delivery_count counts the
  // earlier deliveries that were never acked; the queue's delivery limit
  // dead-letters the job after the third, see common/amqp.cc).
  log::debug("job started", {{"request_id", job.request_id},
                             {"task_id", job.task_id},
                             {"kind", job.kind},
                             {"mode", job.mode},
                             {"redelivered", static_cast<long long>(d.redelivered)},
                             {"delivery_count", static_cast<long long>(d.delivery_count)}});
  JobSlot slot{generation_, d.tag, d.reply_to, std::move(job)};
  if (opts_.inline_jobs) {
    // A CPU-bound engine one job at a time: run it here, sparing the two
    // thread handoffs per job that a saturated 2-core host makes costly.
    return publishOutcome(
        conn, runTimed(std::move(slot), [this](const msg::Job& j) { return runJob(j); }));
  }
  pool_.submit(std::move(slot));
  return Status::ok();
}

Status Worker::moveToCountingQueue(amqp::Connection& conn, const amqp::Delivery& d,
                                   const msg::Job& job, int64_t now) {
  // A sync job comes back only when the worker that held it died, lost its
  // connection or stopped before finishing it. The classic queue cannot
  // tell the second return from the tenth, so the job continues on the
  // quorum queue of its kind, whose delivery limit ends a job that keeps
  // killing workers in eq.dead. Same body and reply address, the remaining
  // deadline as its TTL; our delivery is acked once the move is confirmed,
  // like any outcome (a lost connection before that redelivers it here).
  amqp::PublishOptions opts;
  opts.correlation_id = d.correlation_id;
  opts.message_id = job.request_id;
  opts.reply_to = d.reply_to;
  // The same body, so the same signature: the job stays eq-api's.
  opts.signature = d.signature;
  if (job.deadline_ms > 0) opts.expiration_ms = std::max<int64_t>(1, job.deadline_ms - now);
  std::string queue = msg::queueForMode(job.kind == "analyze" ? "" : job.mode);
  Result<uint64_t> seq = conn.publish(queue, d.body, opts);
  if (!seq.isOk()) return seq.status();
  ledger_.published(seq.value(), d.tag, now);
  finished_[d.tag] = Finished{job.mode, job.kind, kJobMoved, -1, 0};
  log::info("redelivered sync job moved to the counting queue",
            {{"request_id", job.request_id}, {"from", d.queue_hint}, {"to", queue}});
  return Status::ok();
}

JobOutcome Worker::runJob(const msg::Job& job) const {
  JobOutcome out;
  if (job.kind == "analyze") {
    Result<engine::Analysis> a =
        engine_.analyze({job.message, job.context, job.scene, job.deadline_ms});
    if (a.isOk()) out.result = {true, analysisJson(a.value()), 0, ""};
    else out.result = {false, "", 500, a.status().msg()};
  } else {
    engine::ReplyInput in{toMode(job.mode), job.message,     job.context,
                          job.scene,        job.reply_count, job.deadline_ms};
    Result<engine::ReplyOutput> r = engine_.reply(in);
    if (r.isOk()) {
      out.result = {true, replyDataJson(r.value(), job.request_id, job.mode), 0, ""};
      out.tokens_used = r.value().tokens_used;
    } else {
      out.result = {false, "", 500, r.status().msg()};
    }
  }
  return out;
}

Status Worker::publishFinished(amqp::Connection& conn) {
  for (const FinishedJob& done : pool_.takeFinished()) {
    if (done.slot.generation != generation_) {
      // Its delivery tag belonged to a connection that is gone; the broker
      // has already put the job back in the queue.
      log::warn("job finished after its broker connection was lost; it will be redelivered",
                {{"request_id", done.slot.job.request_id}});
      continue;
    }
    if (Status s = publishOutcome(conn, done); !s.isOk()) return s;
  }
  return Status::ok();
}

Status Worker::publishOutcome(amqp::Connection& conn, const FinishedJob& done) {
  const msg::Job& job = done.slot.job;
  msg::SyncResult result = done.result;
  // Debug, not info: one line per job costs more than the job itself at the
  // built-in engine's rates. EQ_LOG_LEVEL=debug traces every job.
  log::debug("job done", {{"request_id", job.request_id},
                          {"kind", job.kind},
                          {"mode", job.mode},
                          {"ok", static_cast<long long>(result.ok)},
                          {"duration_ms", static_cast<long long>(done.finished_ms - done.started_ms)}});
  if (!result.ok) {
    log::error("engine failed", {{"request_id", job.request_id}, {"error", result.msg}});
  }
  finished_[done.slot.tag] = Finished{job.mode, job.kind, result.ok ? kJobSucceeded : kJobFailed,
                                      done.seconds, done.tokens_used};

  // Publish the outcome; the job is acked when its confirm arrives.
  Result<uint64_t> seq = uint64_t{0};
  if (!job.task_id.empty()) {
    amqp::PublishOptions event_opts;
    event_opts.persistent = true;
    msg::TaskEvent ev;
    ev.event = result.ok ? "task.succeeded" : "task.failed";
    ev.task_id = job.task_id;
    ev.request_id = job.request_id;
    ev.mode = job.mode;
    ev.at_ms = done.finished_ms;
    ev.result_json = result.data_json;
    ev.error_code = result.ok ? 0 : 500;
    ev.error_msg = result.ok ? "" : "generation failed";
    std::string body = msg::encodeTaskEvent(ev);
    event_opts.signature =
        msg::signMessage(opts_.internal_key, msg::SignedKind::kTaskEvent, "", body);
    seq = conn.publish(msg::kQueueTaskEvents, body, event_opts);
  } else if (!done.slot.reply_to.empty()) {
    amqp::PublishOptions reply_opts;
    reply_opts.correlation_id = job.request_id;
    if (!result.ok) result.msg = "generation failed";  // no internals to the caller
    std::string body = msg::encodeSyncResult(result);
    reply_opts.signature = msg::signMessage(opts_.internal_key, msg::SignedKind::kSyncResult,
                                            reply_opts.correlation_id, body);
    seq = conn.publish(done.slot.reply_to, body, reply_opts);
  } else {
    ledger_.ready(done.slot.tag);  // a sync job nobody waits for: nothing to publish
    return Status::ok();
  }
  if (!seq.isOk()) return seq.status();
  ledger_.published(seq.value(), done.slot.tag, nowMs());
  return Status::ok();
}

}  // namespace eq::worker
