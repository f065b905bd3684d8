#include "api/broker_bridge.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "common/defaults.h"
#include "common/log.h"
#include "common/msg_auth.h"
#include "common/reconnect.h"
#include "common/timefmt.h"

namespace eq::api {
namespace {

constexpr int kSweepIntervalMs = 50;
constexpr int kMaxPublishAttempts = 3;
// A healthy broker confirms a quorum-queue publish in milliseconds (tens
// under load); one that has not confirmed in 3 s is blocking us (a resource
// alarm) or stuck. Long enough never to fail a merely busy broker's
// publishes, short enough that clients see a 503 well before their own
// timeouts. Checked once per broker-thread turn, so a publish fails 3 to 4 s
// after it was sent.
constexpr int64_t kConfirmTimeoutMs = 3000;

}  // namespace

BrokerBridge::BrokerBridge(uv_loop_t* loop, std::string amqp_url, std::string conn_name,
                           std::string internal_key)
    : loop_(loop),
      url_(std::move(amqp_url)),
      conn_name_(std::move(conn_name)),
      internal_key_(std::move(internal_key)) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  uv_async_init(loop_, &async_, &BrokerBridge::onAsync);
  async_.data = this;
  uv_prepare_init(loop_, &prepare_);
  prepare_.data = this;
  uv_prepare_start(&prepare_, &BrokerBridge::onPrepare);
  // Never what keeps the loop alive: async_ is, until the thread exits.
  uv_unref(reinterpret_cast<uv_handle_t*>(&prepare_));
  uv_timer_init(loop_, &sweep_);
  sweep_.data = this;
}

BrokerBridge::~BrokerBridge() {
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void BrokerBridge::start() {
  uv_timer_start(&sweep_, &BrokerBridge::onSweep, kSweepIntervalMs, kSweepIntervalMs);
  thread_ = std::thread([this] { run(); });
}

void BrokerBridge::stop() {
  handIn();  // the broker thread still publishes what was handed in
  stop_.store(true);
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
  (void)ignored;
  // Whatever is still waiting cannot be answered by this process any more.
  for (auto& [id, call] : calls_) call.done(Status(503, "service is shutting down"));
  calls_.clear();
  uv_timer_stop(&sweep_);
  uv_close(reinterpret_cast<uv_handle_t*>(&sweep_), nullptr);
  // async_ is closed by onAsync once the thread has said it exited (or now,
  // if it never started): the loop then ends, and join() follows uv_run.
  if (!thread_.joinable()) closeAsync();
}

void BrokerBridge::join() {
  if (thread_.joinable()) thread_.join();
}

void BrokerBridge::closeAsync() {
  if (async_closed_) return;
  async_closed_ = true;
  uv_close(reinterpret_cast<uv_handle_t*>(&async_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&prepare_), nullptr);
}

// ------------------------------------------------------------ loop thread

void BrokerBridge::submit(Outgoing op) { submitted_.push_back(std::move(op)); }

void BrokerBridge::handIn() {
  if (submitted_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (inbox_.empty()) {
      inbox_.swap(submitted_);
    } else {
      for (Outgoing& op : submitted_) inbox_.push_back(std::move(op));
      submitted_.clear();
    }
  }
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
  (void)ignored;
}

void BrokerBridge::onPrepare(uv_prepare_t* handle) {
  static_cast<BrokerBridge*>(handle->data)->handIn();
}

void BrokerBridge::call(const msg::Job& job, CallDone done) {
  if (!connected()) {
    done(Status(503, "message broker unavailable"));
    return;
  }
  Outgoing op;
  op.op_id = next_op_id_++;
  op.queue = msg::syncQueueForMode(job.kind == "analyze" ? "" : job.mode);
  op.body = msg::encodeJob(job);
  op.opts.signature = msg::signMessage(internal_key_, msg::SignedKind::kJob, "", op.body);
  op.opts.correlation_id = job.request_id;
  op.opts.message_id = job.request_id;
  // The message expires from the queue when the caller stops waiting, so a
  // backlog never makes workers compute answers nobody will read.
  op.opts.expiration_ms = std::max<int64_t>(1, job.deadline_ms - nowMs());
  op.wants_reply = true;
  op.deadline_ms = job.deadline_ms;
  calls_[job.request_id] = PendingCall{job.deadline_ms, std::move(done)};
  submit(std::move(op));
}

void BrokerBridge::publishPersistent(const std::string& queue, std::string body,
                                     PublishDone done) {
  if (!connected()) {
    done(Status(503, "message broker unavailable"));
    return;
  }
  Outgoing op;
  op.op_id = next_op_id_++;
  op.queue = queue;
  op.body = std::move(body);
  op.opts.signature = msg::signMessage(internal_key_, msg::SignedKind::kJob, "", op.body);
  op.opts.persistent = true;
  publishes_[op.op_id] = std::move(done);
  submit(std::move(op));
}

void BrokerBridge::onAsync(uv_async_t* handle) {
  auto* self = static_cast<BrokerBridge*>(handle->data);
  std::deque<Outcome> batch;
  {
    std::lock_guard<std::mutex> lock(self->mu_);
    batch.swap(self->outbox_);
  }
  for (Outcome& o : batch) self->handleOutcome(o);
  bool exited = false;
  {
    std::lock_guard<std::mutex> lock(self->mu_);
    exited = self->exited_;
  }
  // The thread's last uv_async_send happened under mu_ before exited_ was
  // seen here, so none can follow this close.
  if (exited) self->closeAsync();
}

void BrokerBridge::handleOutcome(Outcome& o) {
  switch (o.kind) {
    case Outcome::Kind::kConfirmed:
    case Outcome::Kind::kRejected: {
      auto it = publishes_.find(o.op_id);
      if (it == publishes_.end()) return;  // a sync job's confirm: nothing waits on it
      PublishDone done = std::move(it->second);
      publishes_.erase(it);
      done(o.kind == Outcome::Kind::kConfirmed ? Status::ok() : Status(503, o.error));
      return;
    }
    case Outcome::Kind::kReply: {
      auto it = calls_.find(o.correlation_id);
      if (it == calls_.end()) {
        log::debug("late reply dropped", {{"request_id", o.correlation_id}});
        return;
      }
      CallDone done = std::move(it->second.done);
      calls_.erase(it);
      Result<msg::SyncResult> r = msg::decodeSyncResult(o.body);
      if (!r.isOk()) {
        log::error("undecodable worker reply", {{"request_id", o.correlation_id},
                                                {"error", r.status().msg()}});
        done(Status(500, "generation failed"));
        return;
      }
      done(std::move(r));
      return;
    }
    case Outcome::Kind::kCallFailed: {
      auto it = calls_.find(o.correlation_id);
      if (it == calls_.end()) return;  // answered meanwhile (deadline)
      CallDone done = std::move(it->second.done);
      calls_.erase(it);
      done(Status(503, o.error));
      return;
    }
    case Outcome::Kind::kDisconnected: {
      // Direct replies go to the connection that published: the calls
      // published on it can no longer get their answers.
      for (const std::string& id : o.lost_calls) {
        auto it = calls_.find(id);
        if (it == calls_.end()) continue;
        CallDone done = std::move(it->second.done);
        calls_.erase(it);
        done(Status(503, "message broker connection lost"));
      }
      return;
    }
  }
}

void BrokerBridge::onSweep(uv_timer_t* timer) {
  auto* self = static_cast<BrokerBridge*>(timer->data);
  int64_t now = nowMs();
  std::vector<std::string> expired;
  for (auto& [id, call] : self->calls_) {
    if (call.deadline_ms <= now) expired.push_back(id);
  }
  for (const std::string& id : expired) {
    auto it = self->calls_.find(id);
    CallDone done = std::move(it->second.done);
    self->calls_.erase(it);
    done(Status(504, "generation timed out"));
  }
}

// ------------------------------------------------------------ broker thread

void BrokerBridge::emit(Outcome o) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    outbox_.push_back(std::move(o));
  }
  uv_async_send(&async_);
}

bool BrokerBridge::connect() {
  Result<std::unique_ptr<amqp::Connection>> c = amqp::Connection::open(
      url_, conn_name_, defaults::kAmqpHeartbeatSeconds, &first_broker_);
  if (!c.isOk()) {
    // One attempt a second during an outage: log the first failure and then
    // every 30th, so an hour-long outage is 120 lines, not 3600.
    if (failed_attempts_++ % 30 == 0) {
      log::warn("broker connect failed", {{"error", c.status().msg()},
                                          {"attempts", static_cast<long long>(failed_attempts_)}});
    }
    return false;
  }
  std::unique_ptr<amqp::Connection> conn = std::move(c).value();
  // Replies come through RabbitMQ's direct reply-to (see the header): the
  // pseudo-queue must be consumed, with no_ack, before the first publish
  // that names it.
  Status s = conn->declareTopology();
  if (s.isOk()) s = conn->consume(amqp::Connection::kDirectReplyTo, /*no_ack=*/true);
  if (s.isOk()) s = conn->enableConfirms();
  if (!s.isOk()) {
    ++failed_attempts_;
    log::warn("broker setup failed", {{"error", s.msg()}});
    return false;
  }
  conn_ = std::move(conn);
  stalled_.store(false, std::memory_order_release);
  if (ever_connected_) reconnects_.fetch_add(1, std::memory_order_relaxed);
  ever_connected_ = true;
  connected_.store(true, std::memory_order_release);
  log::info("broker connected", {{"reply_to", amqp::Connection::kDirectReplyTo},
                                 {"failed_attempts", static_cast<long long>(failed_attempts_)}});
  failed_attempts_ = 0;
  return true;
}

void BrokerBridge::disconnect(const std::string& why) {
  log::warn("broker connection lost", {{"error", why}});
  connected_.store(false, std::memory_order_release);
  conn_.reset();
  // Unconfirmed persistent publishes go back to the front of the inbox, in
  // their original order, to be published again on the next connection.
  std::deque<Outgoing> retry;
  for (auto& [seq, op] : unconfirmed_) {
    if (op.answered) continue;     // failed already (confirm timeout)
    if (op.wants_reply) continue;  // its call fails below with the others
    if (op.attempts >= kMaxPublishAttempts) {
      emit(Outcome{Outcome::Kind::kRejected, op.op_id, "", "", "message broker connection lost", {}});
    } else {
      retry.push_back(std::move(op));
    }
  }
  unconfirmed_.clear();
  if (!retry.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.insert(inbox_.begin(), std::make_move_iterator(retry.begin()),
                  std::make_move_iterator(retry.end()));
  }
  Outcome lost{Outcome::Kind::kDisconnected, 0, "", "", why, {}};
  for (auto& [id, deadline] : sync_in_flight_) lost.lost_calls.push_back(id);
  sync_in_flight_.clear();
  emit(std::move(lost));
}

void BrokerBridge::pruneExpiredCalls() {
  int64_t now = nowMs();
  if (now - last_prune_ms_ < 1000) return;
  last_prune_ms_ = now;
  std::erase_if(sync_in_flight_, [now](const auto& kv) { return kv.second < now; });
}

void BrokerBridge::expireUnconfirmed() {
  int64_t now = nowMs();
  int expired = 0;
  for (auto& [seq, op] : unconfirmed_) {
    if (op.answered || now - op.published_ms < kConfirmTimeoutMs) continue;
    op.answered = true;
    ++expired;
    const char* why = "message broker is not confirming publishes";
    if (op.wants_reply) {
      sync_in_flight_.erase(op.opts.correlation_id);
      emit(Outcome{Outcome::Kind::kCallFailed, 0, op.opts.correlation_id, "", why, {}});
    } else {
      emit(Outcome{Outcome::Kind::kRejected, op.op_id, "", "", why, {}});
    }
  }
  if (expired > 0 && !stalled_.exchange(true, std::memory_order_acq_rel)) {
    log::warn("broker stopped confirming publishes (resource alarm?); answering 503",
              {{"unconfirmed", static_cast<long long>(unconfirmed_.size())},
               {"timeout_ms", static_cast<long long>(kConfirmTimeoutMs)}});
  }
}

void BrokerBridge::drainInbox() {
  std::deque<Outgoing> ops;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ops.swap(inbox_);
  }
  if (ops.empty()) return;
  // The batch's publishes leave together (see amqp::Connection::Cork).
  std::optional<amqp::Connection::Cork> cork;
  if (conn_) cork.emplace(*conn_);
  for (size_t i = 0; i < ops.size(); ++i) {
    Outgoing& op = ops[i];
    // Stalled: the broker is not reading what we publish, so answer now
    // instead of adding to what waits for the confirm timeout.
    if (!conn_ || stalled_.load(std::memory_order_relaxed)) {
      if (op.wants_reply) {
        emit(Outcome{Outcome::Kind::kReply, 0, op.opts.correlation_id,
                     msg::encodeSyncResult({false, "", 503, "message broker unavailable"}), "",
                     {}});
      } else {
        emit(Outcome{Outcome::Kind::kRejected, op.op_id, "", "", "message broker unavailable",
                     {}});
      }
      continue;
    }
    if (op.wants_reply) op.opts.reply_to = amqp::Connection::kDirectReplyTo;
    ++op.attempts;
    op.published_ms = nowMs();
    Result<uint64_t> seq = conn_->publish(op.queue, op.body, op.opts);
    if (!seq.isOk()) {
      // The op may or may not have left: treat it as unconfirmed, so
      // disconnect() retries or fails it with the others; the ops after it
      // are handled by the !conn_ branch above.
      unconfirmed_[next_unknown_seq_--] = std::move(op);
      cork.reset();  // while the connection (and its fd) still exists
      disconnect(seq.status().msg());
      continue;
    }
    if (op.wants_reply) sync_in_flight_[op.opts.correlation_id] = op.deadline_ms;
    unconfirmed_[seq.value()] = std::move(op);
  }
}

void BrokerBridge::pumpFrames() {
  while (conn_) {
    Result<amqp::Event> ev = conn_->next(0);
    if (!ev.isOk()) {
      disconnect(ev.status().msg());
      return;
    }
    if (std::holds_alternative<amqp::Timeout>(ev.value())) return;
    if (auto* d = std::get_if<amqp::Delivery>(&ev.value())) {
      // A reply (direct reply-to is consumed with no_ack: nothing to ack,
      // and nothing to dead-letter either). One that a worker did not sign
      // is dropped here, counted and logged: whoever published it could
      // otherwise answer a caller with replies of its choosing. The call
      // goes on waiting, so the genuine result, if it comes, still answers
      // it; if none does, its deadline does (504, refunded).
      msg::Verdict verdict = msg::verifyMessage(internal_key_, msg::SignedKind::kSyncResult,
                                                d->correlation_id, d->body, d->signature);
      if (verdict != msg::Verdict::kValid) {
        (verdict == msg::Verdict::kUnsigned ? refused_unsigned_ : refused_bad_)
            .fetch_add(1, std::memory_order_relaxed);
        log::warn("sync result refused: signature does not verify",
                  {{"reason", msg::verdictName(verdict)}, {"request_id", d->correlation_id}});
        continue;
      }
      std::string corr = d->correlation_id;
      sync_in_flight_.erase(corr);
      emit(Outcome{Outcome::Kind::kReply, 0, std::move(corr), std::move(d->body), "", {}});
      continue;
    }
    const auto& c = std::get<amqp::Confirm>(ev.value());
    // Any confirm shows the broker reads from us again.
    if (stalled_.exchange(false, std::memory_order_acq_rel)) {
      log::info("broker confirms publishes again");
    }
    for (auto it = unconfirmed_.begin(); it != unconfirmed_.end();) {
      if (it->first == c.tag || (c.multiple && it->first <= c.tag)) {
        if (!it->second.answered) {
          emit(Outcome{c.ack ? Outcome::Kind::kConfirmed : Outcome::Kind::kRejected,
                       it->second.op_id, "", "", "message broker refused the message", {}});
        }
        it = unconfirmed_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

void BrokerBridge::waitForWork(int timeout_ms) {
  struct pollfd fds[2];
  int n = 0;
  fds[n++] = {wake_fd_, POLLIN, 0};
  if (conn_) fds[n++] = {conn_->fd(), POLLIN, 0};
  ::poll(fds, static_cast<nfds_t>(n), timeout_ms);
  uint64_t drained;
  ssize_t ignored = ::read(wake_fd_, &drained, sizeof drained);
  (void)ignored;
}

void BrokerBridge::run() {
  ReconnectBackoff backoff;
  while (!stop_.load()) {
    if (!conn_) {
      if (!connect()) {
        drainInbox();  // answers queued work with 503 instead of letting it wait
        // Sleeps in poll() on the wake-up fd, so work arriving meanwhile is
        // answered (503) at once rather than after the backoff.
        waitForWork(backoff.nextDelayMs());
        continue;
      }
      backoff.reset();
    }
    drainInbox();
    pumpFrames();
    if (conn_ && !conn_->hasBuffered()) waitForWork(1000);
    pumpFrames();
    pruneExpiredCalls();
    expireUnconfirmed();
  }
  // Give the last publishes' confirms a moment; the api only stops the
  // bridge after its HTTP requests finished, so normally nothing is pending.
  drainInbox();
  int64_t until = nowMs() + 2000;
  while (conn_ && !unconfirmed_.empty() && nowMs() < until) {
    waitForWork(100);
    pumpFrames();
  }
  conn_.reset();
  connected_.store(false);
  std::lock_guard<std::mutex> lock(mu_);
  exited_ = true;
  uv_async_send(&async_);
}

}  // namespace eq::api
