#include "dispatcher/sender.h"

#include <strings.h>
#include <sys/socket.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "common/defaults.h"
#include "common/log.h"
#include "common/timefmt.h"
#include "dispatcher/db_writes.h"
#include "dispatcher/webhook.h"

namespace eq::dispatch {

// Everything one attempt needs while libcurl runs it. The body and header
// list must outlive the easy handle (CURLOPT_POSTFIELDS does not copy).
struct DeliverySender::Transfer {
  DeliveryRecord delivery;
  std::string task_id;
  std::string body;
  curl_slist* headers = nullptr;
  int64_t started_ms = 0;
  int64_t event_at_ms = 0;  // the task's final event, or the replay: delivery latency starts here
  const net::CidrSet* allowed = nullptr;
  bool blocked = false;  // openSocket refused the address
  size_t response_bytes = 0;
  bool response_cut = false;  // we stopped reading a long response body
  std::string retry_after;    // the final response's Retry-After, if any

  ~Transfer() { curl_slist_free_all(headers); }
};

DeliverySender::DeliverySender(Store& store, SenderOptions opts, const std::atomic<bool>& stop)
    : store_(store),
      opts_(std::move(opts)),
      stop_(stop),
      multi_(curl_multi_init()),
      slots_(opts_.max_in_flight, opts_.max_in_flight_per_account,
             opts_.timeout_ms + opts_.lease_margin_ms),
      purger_(store, opts_.retention),
      settler_(store, opts_.settler),
      rng_(std::random_device{}()) {
  if (multi_ == nullptr) {
    log::error("curl_multi_init failed");
    std::abort();
  }
  // Their log lines wait for the write gate to be released (run()).
  purger_.deferLogsTo(&after_commit_);
  settler_.deferLogsTo(&after_commit_);
  // Idle connections kept for reuse: one per slot is plenty.
  curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(opts_.max_in_flight));
  // A hand-over only needs the loop awake (run() starts it every turn),
  // not a scan.
  slots_.onHandOver([this] { curl_multi_wakeup(multi_); });
}

DeliverySender::~DeliverySender() {
  for (auto& [easy, t] : in_flight_) {
    curl_multi_remove_handle(multi_, easy);
    curl_easy_cleanup(easy);
  }
  in_flight_.clear();
  curl_multi_cleanup(multi_);
}

void DeliverySender::wakeup() {
  woken_.store(true);
  curl_multi_wakeup(multi_);
}

void DeliverySender::run() {
  log::info("webhook sender started",
            {{"max_attempts", static_cast<long long>(opts_.policy.maxAttempts())},
             {"timeout_ms", static_cast<long long>(opts_.timeout_ms)},
             {"max_in_flight", static_cast<long long>(opts_.max_in_flight)},
             {"max_in_flight_per_account", static_cast<long long>(slots_.perAccount())}});
  next_scan_ms_ = 0;  // scan at once: deliveries a previous process left due
  int64_t stop_deadline = 0;
  while (true) {
    int64_t now = nowMs();
    bool stopping = stop_.load();
    if (stopping) {
      if (stop_deadline == 0) {
        stop_deadline = now + opts_.stop_grace_ms;
        // Handed over and not started: back to the database, due now, so
        // the next process sends them at once rather than after the lease.
        handBack(store_, opts_.db_writes, slots_.close(), now);
      }
      if (in_flight_.empty() || now >= stop_deadline) break;
    } else {
      startHandedOver(now);
    }
    bool has_room = slots_.free() > 0;
    bool retry_due = !retries_due_.empty() && retries_due_.top() <= now;
    if (!stopping && has_room &&
        (woken_.exchange(false) || now >= next_scan_ms_ || more_due_ || share_freed_ ||
         retry_due)) {
      next_scan_ms_ = now + opts_.scan_interval_ms;
      share_freed_ = false;
      while (!retries_due_.empty() && retries_due_.top() <= now) retries_due_.pop();
      scan(now);
    }
    int running = 0;
    curl_multi_perform(multi_, &running);
    int left = 0;
    std::vector<Finished> done;
    while (CURLMsg* m = curl_multi_info_read(multi_, &left)) {
      if (m->msg == CURLMSG_DONE) finish(m->easy_handle, m->data.result, done);
    }
    // Stopping: held test events are recorded now rather than lost.
    releaseHeld(nowMs(), stopping, done);
    recordOutcomes(done);
    if (opts_.metrics != nullptr) opts_.metrics->setInFlight(in_flight_.size());
    bool purging = false;
    if (!stopping && nowMs() >= next_checkpoint_ms_) {
      // Outside the gate: the consumer thread commits meanwhile.
      next_checkpoint_ms_ = nowMs() + kCheckpointIntervalMs;
      if (Status s = store_.checkpointPassive(); !s.isOk()) {
        log::warn("wal checkpoint failed", {{"error", s.msg()}});
      }
    }
    if (!stopping) {
      std::unique_lock<std::mutex> gate = lockDbWrites(opts_.db_writes);
      purging = purger_.step(nowMs());
      // Settling a dead eq-api's charges may create task.failed deliveries:
      // scan for them at once.
      if (settler_.step(nowMs()) > 0) more_due_ = true;
    }
    // Their log lines, now that the gate is released: a log write blocked on
    // a full stderr pipe must not keep the consumer thread from committing.
    flushAfterCommit();

    // Sleep until a socket is ready (libcurl also wakes for its own
    // timers), a wakeup(), or the next scan: the periodic one, or earlier
    // when a retry this process scheduled falls due, so short steps and
    // Retry-After are kept to the millisecond. With every slot busy only a
    // finished transfer (socket activity) or the periodic tick matter.
    now = nowMs();
    has_room = slots_.free() > 0;
    int64_t wake_at = now + opts_.scan_interval_ms;
    if (stopping) {
      wake_at = now + 50;
    } else if (purging || (has_room && (more_due_ || share_freed_))) {
      wake_at = now;
    } else if (has_room) {
      wake_at = std::min(next_scan_ms_, retries_due_.empty() ? INT64_MAX : retries_due_.top());
    }
    for (const Finished& f : held_) wake_at = std::min(wake_at, f.record_at_ms);
    int timeout_ms =
        static_cast<int>(std::clamp<int64_t>(wake_at - now, 0, opts_.scan_interval_ms));
    curl_multi_poll(multi_, nullptr, 0, timeout_ms, nullptr);
  }
  abandonInFlight();
  log::info("webhook sender stopped");
}

void DeliverySender::scan(int64_t now_ms) {
  int room = slots_.free();
  if (room <= 0) return;
  std::vector<std::unique_ptr<Transfer>> ready;
  // Each delivery the walk admits takes a slot of its account at once
  // (`admitted`); those whose claim does not happen (another dispatcher's,
  // a rollback) or whose attempt cannot start give it back below.
  std::vector<std::string> admitted;
  std::set<std::string> waiting;
  auto admit = [&](const std::string& account_id) {
    switch (slots_.take(account_id)) {
      case SenderSlots::Take::kTaken:
        admitted.push_back(account_id);
        return true;
      case SenderSlots::Take::kAccountFull:
        waiting.insert(account_id);
        return false;
      case SenderSlots::Take::kFull:  // the consumer took the last ones meanwhile
        return false;
    }
    return false;
  };
  Status read = [&] {
    // A read first, outside any transaction: most periodic scans find
    // nothing due and then take no write lock at all.
    Result<bool> any = store_.anyDeliveryDue(now_ms);
    if (!any.isOk()) return any.status();
    more_due_ = false;
    if (!any.value()) return Status::ok();
    std::unique_lock<std::mutex> gate = lockDbWrites(opts_.db_writes);
    // The claim and each claimed delivery's task and secret in one
    // transaction: one commit rather than one plus two read transactions per
    // delivery (SQLite's commits and WAL locks, not HTTP, bound the pace).
    store::Transaction tx = store_.transaction();
    if (!tx.status().isOk()) return tx.status();
    // Claims need not wait for the disk: a claim a database server's crash
    // forgets makes its deliveries due again at once rather than after
    // their leases, and they are sent again (deliveries are at-least-once).
    if (Status s = store_.relaxDurability(); !s.isOk()) return s;
    Result<std::vector<DeliveryRecord>> due =
        store_.claimDueDeliveries(now_ms, now_ms + slots_.leaseMs(), room, admit);
    if (!due.isOk()) return due.status();  // rolled back by tx
    // Rows left waiting for their account's share do not count: they are
    // scanned for again when a slot of theirs frees (share_freed_), not in a
    // loop that would find them still waiting.
    more_due_ = static_cast<int>(due.value().size()) == room;
    ready = prepare(due.value(), now_ms);
    return tx.commit();
  }();
  if (!read.isOk()) ready.clear();
  // The attempts about to start keep their slots; every other admitted
  // delivery (not claimed after all, not started, rolled back) gives its
  // back.
  for (const std::unique_ptr<Transfer>& t : ready) {
    auto it = std::find(admitted.begin(), admitted.end(), t->delivery.account_id);
    if (it != admitted.end()) admitted.erase(it);
  }
  for (const std::string& account_id : admitted) slots_.give(account_id);
  flushAfterCommit();
  slots_.setBacklog(!read.isOk() || more_due_ || !waiting.empty());
  if (!read.isOk()) {
    // Claimed rows are leased: they become due again, nothing is lost.
    log::warn("cannot read due deliveries", {{"error", read.msg()}});
    more_due_ = false;
    return;
  }
  for (std::unique_ptr<Transfer>& t : ready) launch(std::move(t));
  noteWaiting(std::move(waiting));
}

void DeliverySender::startHandedOver(int64_t now_ms) {
  std::vector<std::string> late;
  for (HandedOver& h : slots_.takeHandedOver()) {
    // The lease must outlast the attempt. A loop held up past the lease's
    // margin (a slow database) hands the delivery back, due now, rather
    // than race another dispatcher's scan once the lease ends.
    if (now_ms + opts_.timeout_ms > h.delivery.next_attempt_at) {
      slots_.give(h.delivery.account_id);
      late.push_back(h.delivery.delivery_id);
      continue;
    }
    // (The consumer hands over deliveries of tasks only, never a test event.)
    launch(makeTransfer(h.delivery, &h.task, h.secret, h.previous_secret, now_ms));
  }
  handBack(store_, opts_.db_writes, late, now_ms);
}

void DeliverySender::noteWaiting(std::set<std::string> waiting) {
  // Logged when an account starts waiting, not at every scan while it
  // waits: an account whose receivers hang waits for minutes.
  for (const std::string& account_id : waiting) {
    if (waiting_.count(account_id) != 0) continue;
    log::warn("webhook deliveries of an account wait for its share of slots",
              {{"account_id", account_id},
               {"in_flight", static_cast<long long>(slots_.inFlight(account_id))},
               {"max_in_flight_per_account", static_cast<long long>(slots_.perAccount())}});
  }
  waiting_ = std::move(waiting);
  if (opts_.metrics != nullptr) opts_.metrics->setAccountsWaiting(waiting_.size());
}

std::vector<std::unique_ptr<DeliverySender::Transfer>> DeliverySender::prepare(
    const std::vector<DeliveryRecord>& claimed, int64_t now_ms) {
  std::vector<std::unique_ptr<Transfer>> out;
  // Their tasks in one read (a test event, from the developer center's
  // button, has none), and each account's secrets once.
  std::vector<std::string> task_ids;
  for (const DeliveryRecord& d : claimed) {
    if (!d.task_id.empty()) task_ids.push_back(d.task_id);
  }
  Result<std::map<std::string, TaskRecord>> tasks = store_.tasks(task_ids);
  SigningSecrets secrets;
  Status failed = tasks.status();
  for (const DeliveryRecord& d : claimed) {
    if (!failed.isOk()) break;
    const TaskRecord* task = nullptr;
    if (!d.task_id.empty()) {
      auto it = tasks.value().find(d.task_id);
      if (it == tasks.value().end()) {
        // Cannot happen while foreign keys hold; fail it rather than loop
        // on it. (The caller holds the write gate and a transaction.)
        recordAttempts(
            {Finished{d, d.task_id, now_ms, AttemptOutcome{}, "task no longer exists", 0}});
        continue;
      }
      task = &it->second;
    }
    Result<const SigningSecrets::Pair*> secret = secrets.get(store_, d.account_id, now_ms);
    if (!secret.isOk()) {
      failed = secret.status();
      break;
    }
    out.push_back(makeTransfer(d, task, secret.value()->first, secret.value()->second, now_ms));
  }
  if (!failed.isOk()) {
    // The database is busy or down: the claims' leases make the deliveries
    // due again later, so nothing is lost by leaving them.
    after_commit_.push_back([n = claimed.size(), why = failed.msg()] {
      log::warn("deliveries not started; retried after their leases",
                {{"deliveries", static_cast<long long>(n)}, {"error", why}});
    });
    out.clear();
  }
  return out;
}

std::unique_ptr<DeliverySender::Transfer> DeliverySender::makeTransfer(
    const DeliveryRecord& d, const TaskRecord* task, const std::string& secret,
    const std::string& previous_secret, int64_t now_ms) {
  auto t = std::make_unique<Transfer>();
  t->delivery = d;
  t->task_id = d.task_id;
  t->event_at_ms = d.replayed_at > 0 ? d.replayed_at
                   : task == nullptr ? d.created_at
                                     : task->finished_at;
  t->allowed = &opts_.allowed;
  WebhookRequest req;
  req.url = d.url;
  req.timestamp = now_ms / 1000;  // fresh on every attempt: re-signed each time
  req.body = task == nullptr ? testEventBody(d, req.timestamp)
                             : webhookBody(*task, d.event, req.timestamp);
  req.secret = secret;
  req.previous_secret = previous_secret;
  req.delivery_id = d.delivery_id;
  req.event = d.event;
  for (const std::string& h : webhookHeaders(req)) {
    t->headers = curl_slist_append(t->headers, h.c_str());
  }
  t->body = std::move(req.body);
  return t;
}

void DeliverySender::launch(std::unique_ptr<Transfer> t) {
  const DeliveryRecord& d = t->delivery;
  CURL* easy = curl_easy_init();
  if (easy == nullptr) {
    log::error("curl_easy_init failed; delivery retried after its lease",
               {{"delivery_id", d.delivery_id}});
    slots_.give(d.account_id);
    return;
  }
  curl_easy_setopt(easy, CURLOPT_URL, d.url.c_str());
  curl_easy_setopt(easy, CURLOPT_POST, 1L);
  curl_easy_setopt(easy, CURLOPT_POSTFIELDS, t->body.c_str());
  curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, static_cast<long>(t->body.size()));
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, t->headers);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(opts_.timeout_ms));
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);  // redirects are not followed
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  // No proxy, not even one from http_proxy/ALL_PROXY in the environment:
  // through a proxy, openSocket would vet the proxy's address instead of
  // the receiver's and the SSRF guard would be bypassed.
  curl_easy_setopt(easy, CURLOPT_PROXY, "");
  curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, &DeliverySender::openSocket);
  curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, t.get());
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &DeliverySender::onHeader);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, t.get());
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &DeliverySender::onBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, t.get());
  t->started_ms = nowMs();
  if (CURLMcode mc = curl_multi_add_handle(multi_, easy); mc != CURLM_OK) {
    log::error("curl_multi_add_handle failed; delivery retried after its lease",
               {{"delivery_id", d.delivery_id}, {"error", curl_multi_strerror(mc)}});
    curl_easy_cleanup(easy);
    slots_.give(d.account_id);
    return;
  }
  in_flight_.emplace(easy, std::move(t));
}

void DeliverySender::finish(CURL* easy, CURLcode rc, std::vector<Finished>& done) {
  auto it = in_flight_.find(easy);
  if (it == in_flight_.end()) return;  // not ours: impossible, but harmless
  std::unique_ptr<Transfer> t = std::move(it->second);
  in_flight_.erase(it);
  slots_.give(t->delivery.account_id);
  if (waiting_.count(t->delivery.account_id) != 0) share_freed_ = true;
  long code = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
  curl_multi_remove_handle(multi_, easy);
  curl_easy_cleanup(easy);

  // A response whose body we cut short still answered with its status.
  bool answered = rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && t->response_cut && code > 0);
  int status = answered ? static_cast<int>(code) : 0;
  std::string error;
  if (!answered) {
    if (t->blocked) {
      error = "refused: webhook host resolves to a non-public address";
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
      error = "timed out after " + std::to_string(opts_.timeout_ms) + " ms";
    } else {
      error = curl_easy_strerror(rc);
    }
  } else if (status < 200 || status >= 300) {
    error = "receiver answered HTTP " + std::to_string(status);
  }
  std::optional<int64_t> retry_after;
  if (!t->retry_after.empty()) retry_after = parseRetryAfter(t->retry_after, nowMs());
  Finished f{t->delivery, t->task_id, t->started_ms,
             AttemptOutcome{status, retry_after, t->blocked && !answered}, error,
             t->event_at_ms};
  if (t->task_id.empty() && !answered && !t->blocked) {
    // A test event goes wherever a signed-in person points it, so it must
    // not be a port scanner: a closed port, a silent one, a dropped SYN or
    // a reset all read "could not connect", and the outcome is recorded
    // only once the attempt's timeout has passed since it started, so
    // neither the text nor the time (the page polls for the result, and
    // the attempt's latency is shown) tells them apart. Deliveries of
    // tasks keep the precise error: their URLs are the account's own
    // receivers, and their owners need it. The claim's lease (timeout +
    // lease margin from the claim) outlasts the hold, so no scan takes the
    // delivery again meanwhile.
    f.error = "could not connect";
    f.record_at_ms = t->started_ms + opts_.timeout_ms;
    held_.push_back(std::move(f));
    return;
  }
  done.push_back(std::move(f));
}

void DeliverySender::releaseHeld(int64_t now_ms, bool all, std::vector<Finished>& done) {
  std::vector<Finished> still;
  for (Finished& f : held_) {
    if (all || f.record_at_ms <= now_ms) {
      done.push_back(std::move(f));
    } else {
      still.push_back(std::move(f));
    }
  }
  held_.swap(still);
}

void DeliverySender::recordOutcomes(const std::vector<Finished>& done) {
  if (done.empty()) return;
  // Every attempt finished in this loop turn in one transaction: one commit
  // for many attempts. If the transaction cannot be opened, the attempts
  // are still recorded (Store::finishAttempts opens its own); if the commit
  // fails, the attempts are lost but their deliveries come due again after
  // their leases (at-least-once, receivers dedupe).
  Status committed;
  {
    std::unique_lock<std::mutex> gate = lockDbWrites(opts_.db_writes);
    store::Transaction tx = store_.transaction();
    // Nor need the outcomes: a forgotten one leaves its delivery leased,
    // and it is sent again once the lease ends.
    if (tx.status().isOk()) store_.relaxDurability();
    recordAttempts(done);
    if (tx.status().isOk()) committed = tx.commit();
  }
  flushAfterCommit();
  if (!committed.isOk()) {
    log::error("webhook attempts not recorded; retried after their leases",
               {{"attempts", static_cast<long long>(done.size())}, {"error", committed.msg()}});
  }
}

void DeliverySender::recordAttempts(const std::vector<Finished>& done) {
  // Each attempt's verdict first, then all of them recorded in one call
  // (one statement on PostgreSQL), then what follows from each.
  struct Decided {
    int number;
    int in_schedule;
    RetryDecision decision;
    int64_t now;
  };
  std::vector<Decided> decided;
  std::vector<FinishedAttempt> attempts;
  for (const Finished& f : done) {
    const DeliveryRecord& d = f.delivery;
    int64_t now = nowMs();
    int number = d.attempts + 1;
    int in_schedule = number - d.schedule_offset;
    RetryDecision decision = decideRetry(opts_.policy, in_schedule, f.outcome,
                                         std::uniform_real_distribution<double>(0.0, 1.0)(rng_));
    // A test event is tried once: the person who pressed the button is
    // watching for its answer, not for a retry hours later (replay sends it
    // again).
    if (d.task_id.empty() && decision.verdict == DeliveryVerdict::kRetry) {
      decision.verdict = DeliveryVerdict::kFailed;
      decision.reason = "test events are not retried";
      decision.delay_ms = 0;
    }
    attempts.push_back(FinishedAttempt{
        d.delivery_id,
        DeliveryAttempt{f.started_ms, f.outcome.http_status, now - f.started_ms, f.error, number},
        statusAfter(decision.verdict), now + decision.delay_ms});
    decided.push_back(Decided{number, in_schedule, std::move(decision), now});
  }
  Result<std::vector<bool>> recorded = store_.finishAttempts(attempts);
  for (std::size_t i = 0; i < done.size(); ++i) {
    const Finished& f = done[i];
    const Decided& c = decided[i];
    Result<bool> saved =
        recorded.isOk() ? Result<bool>(bool{recorded.value()[i]}) : Result<bool>(recorded.status());
    // The retry gets a scan of its own when it falls due (see run()).
    if (saved.isOk() && c.decision.verdict == DeliveryVerdict::kRetry) {
      retries_due_.push(attempts[i].next_attempt_at_ms);
    }
    // Logged once the transaction is committed and the write gate released:
    // a log write that blocks (a stalled stderr pipe) must not hold SQLite's
    // write lock, which eq-api needs for every request.
    after_commit_.push_back([this, d = f.delivery, task_id = f.task_id, number = c.number,
                             in_schedule = c.in_schedule, http_status = f.outcome.http_status,
                             attempt = attempts[i].attempt, decision = c.decision, error = f.error,
                             event_at_ms = f.event_at_ms, now = c.now, saved] {
      log::write(
          decision.verdict == DeliveryVerdict::kDelivered ? log::Level::kInfo : log::Level::kWarn,
          "webhook attempt",
          {{"task_id", task_id},
           {"delivery_id", d.delivery_id},
           {"attempt", static_cast<long long>(number)},
           {"attempt_in_schedule", static_cast<long long>(in_schedule)},
           {"http_status", static_cast<long long>(http_status)},
           {"latency_ms", static_cast<long long>(attempt.latency_ms)},
           {"outcome", verdictName(decision.verdict)},
           {"reason", decision.reason},
           {"next_attempt_in_ms",
            static_cast<long long>(decision.verdict == DeliveryVerdict::kRetry ? decision.delay_ms
                                                                               : -1)},
           {"error", error}});
      if (opts_.metrics != nullptr) {
        std::optional<double> since_event;
        // Wall clocks of different hosts (the worker stamped the event) may
        // disagree a little; never report a negative latency.
        if (event_at_ms > 0)
          since_event = static_cast<double>(std::max<int64_t>(now - event_at_ms, 0)) / 1000.0;
        opts_.metrics->attemptFinished(verdictName(decision.verdict),
                                       static_cast<double>(attempt.latency_ms) / 1000.0,
                                       since_event);
      }
      if (!saved.isOk()) {
        // The attempt happened but is not recorded: the claim's lease makes the
        // delivery due again, and at-least-once delivery allows the repeat.
        log::error("webhook attempt not recorded; retried after its lease",
                   {{"delivery_id", d.delivery_id}, {"error", saved.status().msg()}});
      } else if (!saved.value()) {
        log::warn("webhook attempt for a delivery no longer pending; not recorded",
                  {{"delivery_id", d.delivery_id}});
      }
    });
  }
}

void DeliverySender::flushAfterCommit() {
  std::vector<std::function<void()>> pending;
  pending.swap(after_commit_);
  for (auto& f : pending) f();
}

void DeliverySender::abandonInFlight() {
  // Stopping: attempts still running after the grace are cut off and their
  // deliveries handed back due now, so the next process sends them at once
  // instead of after the lease.
  std::vector<std::string> ids;
  for (auto& [easy, t] : in_flight_) {
    curl_multi_remove_handle(multi_, easy);
    curl_easy_cleanup(easy);
    slots_.give(t->delivery.account_id);
    log::info("webhook attempt abandoned at shutdown", {{"delivery_id", t->delivery.delivery_id}});
    ids.push_back(t->delivery.delivery_id);
  }
  in_flight_.clear();
  handBack(store_, opts_.db_writes, ids, nowMs());
}

// libcurl calls this with the address it is about to connect to, after DNS
// resolution: the only place where a check cannot be raced by a DNS answer
// that changes between check and use. Reused connections were checked when
// they were opened.
curl_socket_t DeliverySender::openSocket(void* transfer, curlsocktype purpose,
                                         struct curl_sockaddr* addr) {
  auto* t = static_cast<Transfer*>(transfer);
  if (purpose != CURLSOCKTYPE_IPCXN) return CURL_SOCKET_BAD;
  const sockaddr* sa = &addr->addr;
  if (net::isNonPublicAddress(sa) && !t->allowed->contains(sa)) {
    t->blocked = true;
    return CURL_SOCKET_BAD;
  }
  return ::socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
}

size_t DeliverySender::onHeader(char* data, size_t size, size_t n, void* transfer) {
  auto* t = static_cast<Transfer*>(transfer);
  std::string_view line(data, size * n);
  // A new status line (after a 1xx interim response) starts a new header set.
  if (line.rfind("HTTP/", 0) == 0) {
    t->retry_after.clear();
    return size * n;
  }
  constexpr std::string_view kName = "retry-after:";
  if (line.size() > kName.size() && strncasecmp(line.data(), kName.data(), kName.size()) == 0) {
    std::string_view v = line.substr(kName.size());
    while (!v.empty() && (v.back() == '\r' || v.back() == '\n')) v.remove_suffix(1);
    t->retry_after.assign(v.data(), std::min<size_t>(v.size(), 128));
  }
  return size * n;
}

size_t DeliverySender::onBody(char*, size_t size, size_t n, void* transfer) {
  auto* t = static_cast<Transfer*>(transfer);
  t->response_bytes += size * n;
  if (t->response_bytes > defaults::kWebhookMaxResponseBytes) {
    // The status is all we need; an endless body must not hold the slot
    // until the timeout. Returning short makes libcurl stop with
    // CURLE_WRITE_ERROR, which finish() reads as "answered".
    t->response_cut = true;
    return 0;
  }
  return size * n;
}

}  // namespace eq::dispatch
