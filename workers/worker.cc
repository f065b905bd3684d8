#include "workers/worker.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/defaults.h"
#include "common/log.h"
#include "common/messages.h"
#include "common/timefmt.h"

namespace eq::worker {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

constexpr int kConfirmTimeoutMs = 10'000;
// A sync call published right after the broker returns waits for a worker to
// reconnect: see defaults::kReconnectBackoffMaxMs.
constexpr int kMaxBackoffMs = defaults::kReconnectBackoffMaxMs;

engine::Mode toMode(const std::string& m) {
  if (m == "standard") return engine::Mode::kStandard;
  if (m == "perfect") return engine::Mode::kPerfect;
  return engine::Mode::kFast;
}

void putString(Writer& w, const char* key, const std::string& v) {
  w.Key(key);
  w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
}

// Sleeps in short steps so a stop request is noticed quickly.
void sleepUnlessStopped(int ms, const std::atomic<bool>& stop) {
  for (int slept = 0; slept < ms && !stop.load(); slept += 50) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
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
  int backoff_ms = defaults::kReconnectBackoffInitialMs;
  while (!stop_.load()) {
    std::string name = "eq-worker " + (opts_.mode.empty() ? std::string("analyze") : opts_.mode);
    Result<std::unique_ptr<amqp::Connection>> c =
        amqp::Connection::open(opts_.amqp_url, name, defaults::kAmqpHeartbeatSeconds);
    if (!c.isOk()) {
      log::warn("broker connect failed; retrying",
                {{"error", c.status().msg()}, {"backoff_ms", static_cast<long long>(backoff_ms)}});
      sleepUnlessStopped(backoff_ms, stop_);
      backoff_ms = std::min(backoff_ms * 2, kMaxBackoffMs);
      continue;
    }
    backoff_ms = defaults::kReconnectBackoffInitialMs;
    ++generation_;
    Status s = serve(*c.value());
    if (opts_.metrics != nullptr) opts_.metrics->brokerLost();
    // Jobs of that connection that have not started cannot be acked any
    // more and the broker is redelivering them: running them would only
    // spend model time on results nobody can publish.
    if (size_t dropped = pool_.takeQueued().size(); dropped > 0) {
      log::warn("dropped jobs of the lost connection before they started",
                {{"jobs", static_cast<long long>(dropped)}});
    }
    if (!s.isOk()) log::warn("broker connection lost; reconnecting", {{"error", s.msg()}});
  }
  log::info("worker stopped");
  return 0;
}

Status Worker::serve(amqp::Connection& conn) {
  if (Status s = conn.declareTopology(); !s.isOk()) return s;
  // Prefetch equals this worker's concurrency: every job the broker hands
  // over can start at once, and the rest of the backlog stays with the
  // broker for other workers. RabbitMQ applies it per consumer (quorum
  // queues do not support a channel-wide prefetch), so a worker that also
  // consumes the analyze queue may hold twice as many; the extra ones wait
  // in the pool's queue.
  if (Status s = conn.qos(static_cast<uint16_t>(opts_.concurrency)); !s.isOk()) return s;
  if (Status s = conn.enableConfirms(); !s.isOk()) return s;
  if (!opts_.mode.empty()) {
    if (Status s = conn.consume(msg::queueForMode(opts_.mode)); !s.isOk()) return s;
  }
  if (opts_.analyze) {
    if (Status s = conn.consume(msg::kQueueAnalyze); !s.isOk()) return s;
  }
  log::info("worker consuming", {{"mode", opts_.mode},
                                 {"analyze", static_cast<long long>(opts_.analyze)},
                                 {"concurrency", static_cast<long long>(opts_.concurrency)}});
  if (opts_.metrics != nullptr) opts_.metrics->brokerConnected();
  while (!stop_.load()) {
    if (Status s = pump(conn, 1000); !s.isOk()) return s;
    if (Status s = publishFinished(conn); !s.isOk()) return s;
  }

  // Graceful stop: no new deliveries; what was sent to us but not started
  // goes back to the queue for another worker; what runs may finish.
  stopping_ = true;
  if (Status s = conn.cancelAll(); !s.isOk()) return s;
  for (const JobSlot& slot : pool_.takeQueued()) {
    if (slot.generation == generation_) conn.reject(slot.tag, true);
  }
  int64_t give_up = nowMs() + opts_.stop_grace_ms;
  if (pool_.outstanding() > 0) {
    log::info("worker stopping: finishing jobs in hand",
              {{"jobs", static_cast<long long>(pool_.outstanding())},
               {"grace_ms", static_cast<long long>(opts_.stop_grace_ms)}});
  }
  while (pool_.outstanding() > 0 && nowMs() < give_up) {
    if (Status s = pump(conn, 200); !s.isOk()) return s;
    if (Status s = publishFinished(conn); !s.isOk()) return s;
  }
  if (Status s = pump(conn, 0); !s.isOk()) return s;  // hands back late deliveries
  if (size_t left = pool_.outstanding(); left > 0) {
    log::warn("worker stopping with jobs unfinished; the broker redelivers them",
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
  // rabbitmq-c send a heartbeat that is due.
  while (true) {
    Result<amqp::Event> ev = conn.next(0);
    if (!ev.isOk()) return ev.status();
    if (std::holds_alternative<amqp::Timeout>(ev.value())) return Status::ok();
    if (auto* d = std::get_if<amqp::Delivery>(&ev.value())) {
      if (Status s = accept(conn, *d); !s.isOk()) return s;
    }
  }
}

Status Worker::accept(amqp::Connection& conn, const amqp::Delivery& d) {
  if (stopping_) return conn.reject(d.tag, true);  // sent before our cancel reached the broker
  Result<msg::Job> decoded = msg::decodeJob(d.body);
  if (!decoded.isOk()) {
    // Retrying cannot fix a malformed message: dead-letter it at once.
    log::error("malformed job dead-lettered",
               {{"error", decoded.status().msg()}, {"queue", d.queue_hint}});
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
    log::info("job skipped: caller gave up", {{"request_id", job.request_id}});
    Status acked = conn.ack(d.tag);
    if (acked.isOk() && opts_.metrics != nullptr) {
      opts_.metrics->jobFinished(job.mode, job.kind, kJobExpired, -1, 0);
    }
    return acked;
  }
  if (async) {
    amqp::PublishOptions event_opts;
    event_opts.persistent = true;
    msg::TaskEvent running{"task.running", job.task_id, job.request_id, job.mode, now, "", 0, ""};
    if (Status s = conn.publishConfirmed(msg::kQueueTaskEvents, msg::encodeTaskEvent(running),
                                         event_opts, kConfirmTimeoutMs);
        !s.isOk()) {
      return s;
    }
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
  log::info("job done", {{"request_id", job.request_id},
                         {"kind", job.kind},
                         {"mode", job.mode},
                         {"ok", static_cast<long long>(result.ok)},
                         {"duration_ms", static_cast<long long>(done.finished_ms - done.started_ms)}});
  if (!result.ok) {
    log::error("engine failed", {{"request_id", job.request_id}, {"error", result.msg}});
  }

  // Publish the outcome, wait for the broker's confirm, then ack the job.
  Status published;
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
    published = conn.publishConfirmed(msg::kQueueTaskEvents, msg::encodeTaskEvent(ev), event_opts,
                                      kConfirmTimeoutMs);
  } else if (!done.slot.reply_to.empty()) {
    amqp::PublishOptions reply_opts;
    reply_opts.correlation_id = job.request_id;
    if (!result.ok) result.msg = "generation failed";  // no internals to the caller
    published = conn.publishConfirmed(done.slot.reply_to, msg::encodeSyncResult(result),
                                      reply_opts, kConfirmTimeoutMs);
  }
  if (!published.isOk()) return published;
  Status acked = conn.ack(done.slot.tag);
  // Counted once the job is acked: a job redelivered after a lost
  // connection is counted by the worker that finishes it.
  if (acked.isOk() && opts_.metrics != nullptr) {
    opts_.metrics->jobFinished(job.mode, job.kind, result.ok ? kJobSucceeded : kJobFailed,
                               done.seconds, done.tokens_used);
  }
  return acked;
}

}  // namespace eq::worker
