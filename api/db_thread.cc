#include "api/db_thread.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include "common/log.h"

namespace eq::api {

DbThread::DbThread(uv_loop_t* loop, std::unique_ptr<Store> store, const Clock* clock,
                   std::string instance_id)
    : loop_(loop), store_(std::move(store)), clock_(clock), instance_id_(std::move(instance_id)) {
  uv_async_init(loop_, &async_, &DbThread::onAsync);
  async_.data = this;
  uv_prepare_init(loop_, &prepare_);
  prepare_.data = this;
  uv_prepare_start(&prepare_, &DbThread::onPrepare);
  // Never what keeps the loop alive: async_ is, until the thread exits.
  uv_unref(reinterpret_cast<uv_handle_t*>(&prepare_));
  store_->setBusyTimeout(kBusySliceMs);
}

DbThread::~DbThread() {
  // join() ran (or start() never did); the Store closes its connection here.
  if (thread_.joinable()) thread_.join();
}

void DbThread::start() { thread_ = std::thread([this] { run(); }); }

void DbThread::stop() {
  handIn();  // what was submitted is run before the thread exits
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  cv_.notify_one();
  // Never started: nothing will hand over, so close the handles now.
  if (!thread_.joinable()) closeHandles();
}

void DbThread::closeHandles() {
  if (closed_) return;
  closed_ = true;
  uv_close(reinterpret_cast<uv_handle_t*>(&async_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&prepare_), nullptr);
}

void DbThread::join() {
  if (thread_.joinable()) thread_.join();
}

// ------------------------------------------------------------ loop thread

void DbThread::submit(std::unique_ptr<DbRequest> r) {
  submitted_.push_back(std::move(r));
  if (submitted_.size() >= kMaxBatch) handIn();
}

void DbThread::handIn() {
  if (submitted_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (inbox_.empty()) {
      inbox_.swap(submitted_);
    } else {
      for (auto& r : submitted_) inbox_.push_back(std::move(r));
      submitted_.clear();
    }
  }
  cv_.notify_one();
}

void DbThread::onPrepare(uv_prepare_t* handle) { static_cast<DbThread*>(handle->data)->handIn(); }

void DbThread::onAsync(uv_async_t* handle) { static_cast<DbThread*>(handle->data)->drainOutbox(); }

void DbThread::drainOutbox() {
  Batch ready;
  bool exited = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready.swap(outbox_);
    exited = exited_;
  }
  for (auto& r : ready) {
    // done may submit a follow-up request (a response's settle writes):
    // submit only queues, so this loop is not re-entered.
    if (r->done) r->done(*r);
  }
  // The thread sent its last wake-up while holding mu_ before setting
  // exited_, so no uv_async_send can follow this close.
  if (exited) closeHandles();
}

// -------------------------------------------------------- database thread

void DbThread::run() {
  next_heartbeat_ms_ = clock_->nowMs() + kHeartbeatMs;
  while (true) {
    Batch batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (instance_id_.empty()) {
        cv_.wait(lock, [this] { return stopping_ || !inbox_.empty(); });
      } else {
        // Wake for the heartbeat too, so an idle process stays alive.
        int64_t wait = std::max<int64_t>(0, next_heartbeat_ms_ - clock_->nowMs());
        cv_.wait_for(lock, std::chrono::milliseconds(wait),
                     [this] { return stopping_ || !inbox_.empty(); });
      }
      if (inbox_.empty() && stopping_) break;  // everything queued was run
    }
    heartbeatIfDue();
    if (takeInbox(batch)) runBatch(std::move(batch));
  }
  if (!instance_id_.empty()) {
    // A clean exit: every request was answered and settled. If this fails
    // (the database is locked) the row just goes stale and is swept.
    if (Status s = store_->removeInstance(instance_id_); !s.isOk()) {
      log::warn("instance row not removed; it will be swept", {{"error", s.msg()}});
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  exited_ = true;
  uv_async_send(&async_);
}

void DbThread::heartbeatIfDue() {
  if (instance_id_.empty()) return;
  int64_t now = clock_->nowMs();
  if (now < next_heartbeat_ms_) return;
  // One short autocommit statement; a locked database makes it wait one
  // busy slice and try again at the next turn. Logged once per run of
  // failures: while the disk is full it fails ten times a second.
  Status s = store_->heartbeatInstance(instance_id_, now);
  if (!s.isOk()) {
    if (!heartbeat_failing_) log::warn("instance heartbeat not written", {{"error", s.msg()}});
    heartbeat_failing_ = true;
    next_heartbeat_ms_ = now + kHeartbeatRetryMs;
  } else {
    heartbeat_failing_ = false;
    next_heartbeat_ms_ = now + kHeartbeatMs;
  }
  noteStorage();
}

void DbThread::noteStorage() {
  bool failing = store_->storageFailing();
  if (failing) {
    // Write again soon, without waiting for a request: the heartbeat's
    // success is what ends the state when clients back off (and /readyz,
    // which writes nothing, cannot).
    next_heartbeat_ms_ = std::min(next_heartbeat_ms_, clock_->nowMs() + kHeartbeatRetryMs);
  }
  if (failing == storage_failing_) return;
  storage_failing_ = failing;
  if (failing) {
    log::error("the database cannot write (disk full or I/O error): answering 503 until it can",
               {{"error", store_->storageStatus().msg()}});
  } else {
    log::info("the database writes again");
  }
}

bool DbThread::takeInbox(Batch& into) {
  std::lock_guard<std::mutex> lock(mu_);
  if (inbox_.empty()) return false;
  if (into.empty() && inbox_.size() <= kMaxBatch) {
    into.swap(inbox_);
    return true;
  }
  std::size_t room = into.size() < kMaxBatch ? kMaxBatch - into.size() : 0;
  std::size_t n = std::min(room, inbox_.size());
  for (std::size_t i = 0; i < n; ++i) into.push_back(std::move(inbox_[i]));
  inbox_.erase(inbox_.begin(), inbox_.begin() + static_cast<std::ptrdiff_t>(n));
  return n > 0;
}

void DbThread::handOver(Batch& done) {
  if (done.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& r : done) outbox_.push_back(std::move(r));
  done.clear();
  uv_async_send(&async_);
}

void DbThread::expire(Batch& batch, int64_t now_ms) {
  Batch expired;
  Batch keep;
  for (auto& r : batch) {
    if (r->deadline_ms <= now_ms) {
      r->status = Status(503, "the database is busy");
      expired.push_back(std::move(r));
    } else {
      keep.push_back(std::move(r));
    }
  }
  batch.swap(keep);
  handOver(expired);
}

void DbThread::runBatch(Batch batch) {
  // The write lock. Every request needs it (each counts against a rate
  // limit, charges, or is /readyz asking whether it can be had), so the
  // whole batch waits for it, in slices, answering 503 to those whose
  // deadline passes meanwhile and taking in new arrivals.
  bool ran = false;
  while (true) {
    store::Transaction tx = store_->transaction();
    if (tx.status().isOk()) {
      // Committed, or rolled back by tx as this scope ends: before anything
      // is handed over.
      ran = runLocked(batch, tx);
      break;
    }
    expire(batch, clock_->nowMs());
    takeInbox(batch);
    if (batch.empty()) return;
    // A busy database already waited kBusySliceMs in the busy handler; any
    // other failure (I/O error) returns at once, so pause the same slice.
    if (tx.status().msg().find("locked") == std::string::npos) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kBusySliceMs));
    }
  }
  if (!ran) {
    // The batch could not start (runLocked): every request is answered busy.
    for (auto& r : batch) {
      if (r->status.isOk()) r->status = Status(503, "the database is busy");
    }
    handOver(batch);
    return;
  }
  for (auto& r : batch) {
    // A request whose own statements ran out of space (a page spill inside
    // its savepoint) while the batch committed the others.
    if (!r->status.isOk() && store_->storageFailing()) r->storage_failed = true;
  }
  noteStorage();
  batches_.fetch_add(1, std::memory_order_relaxed);
  handOver(batch);
}

bool DbThread::runLocked(Batch& batch, store::Transaction& tx) {
  if (!authenticate(batch)) return false;  // tx rolls back
  findSessions(batch);
  // A batch of reads writes only its rate counts (and sessions' idle
  // clocks): its commit need not wait for the disk (on PostgreSQL; SQLite's
  // never does). A database server that crashes right after it may forget
  // those counts, letting a key a few more requests in that minute; no
  // answer depends on them being kept.
  bool reads_only = std::none_of(batch.begin(), batch.end(),
                                 [](const auto& r) { return (r->work && r->writes) || r->charge; });
  if (reads_only) {
    if (Status s = store_->relaxDurability(); !s.isOk()) return false;
  }
  countRates(batch);
  readQuotas(batch);
  runWork(batch);
  // One commit for all of it.
  Status c = store_->inTransaction() ? tx.commit()
                                     : Status(503, "sqlite: the transaction was rolled back");
  if (c.isOk()) return true;
  bool storage = store_->storageFailing();
  // A full disk fails every batch until space is freed: noteStorage()
  // logs that once, rather than a line per batch here.
  if (!storage) {
    log::error("batch commit failed",
               {{"error", c.msg()}, {"requests", static_cast<long long>(batch.size())}});
  }
  for (auto& r : batch) {
    r->status = Status(503, storage ? "the database cannot write" : "the database is busy");
    r->storage_failed = storage;
  }
  return true;
}

bool DbThread::authenticate(Batch& batch) {
  // The epoch once, then a lookup for every key the cache could not vouch
  // for.
  int64_t epoch = -1;
  bool needs_auth = false;
  for (auto& r : batch) needs_auth = needs_auth || !r->key_digest.empty();
  if (needs_auth) {
    Result<int64_t> e = store_->keyEpoch();
    if (!e.isOk()) {
      log::error("key epoch read failed", {{"error", e.status().msg()}});
      return false;
    }
    epoch = e.value();
  }
  for (auto& r : batch) {
    r->key_epoch = epoch;
    if (r->key_digest.empty()) continue;
    bool cached_valid = r->auth && r->auth_epoch == epoch &&
                        (r->auth->expires_at_ms == 0 || r->auth->expires_at_ms > r->now_ms);
    if (cached_valid) {
      r->authenticated = true;
      continue;
    }
    Result<std::optional<AuthContext>> a =
        store_->authenticateDigest(r->key_digest, r->env, r->now_ms);
    if (!a.isOk()) {
      r->status = a.status();
      continue;
    }
    r->looked_up = true;
    r->auth = a.value();
    r->authenticated = r->auth.has_value();
  }
  return true;
}

void DbThread::findSessions(Batch& batch) {
  // Each in a savepoint of its own: a statement that fails must not take
  // the batch's transaction with it (PostgreSQL aborts a transaction at its
  // first error). A read: the idle clock moves after the account locks
  // (touchSessions).
  for (auto& r : batch) {
    if (r->session_id.empty() || !r->status.isOk()) continue;
    store::Transaction savepoint = store_->transaction();
    if (!savepoint.status().isOk()) {
      r->status = savepoint.status();
      continue;
    }
    Result<std::optional<PortalSession>> s = store_->session(r->session_id, r->now_ms);
    Status kept = s.isOk() ? savepoint.commit() : s.status();  // else rolled back
    if (!kept.isOk()) {
      r->status = kept;
      continue;
    }
    r->session = s.value();
  }
}

void DbThread::countRates(Batch& batch) {
  // One increment per key and window for the whole batch, all counted
  // together (Store::countRequests).
  std::map<std::pair<std::string, int64_t>, std::vector<DbRequest*>> groups;
  for (auto& r : batch) {
    if (r->status.isOk() && r->count_rate && r->authenticated) {
      groups[{r->auth->key_id, Store::rateWindowStart(r->now_ms)}].push_back(r.get());
    }
  }
  if (groups.empty()) return;
  std::vector<Store::RateIncrement> increments;
  for (const auto& [key, members] : groups) {
    increments.push_back({key.first, key.second, static_cast<int64_t>(members.size())});
  }
  Result<std::vector<int64_t>> counts = store_->countRequests(increments);
  std::size_t g = 0;
  for (auto& [key, members] : groups) {
    auto n = static_cast<int64_t>(members.size());
    for (int64_t i = 0; i < n; ++i) {
      DbRequest* r = members[static_cast<std::size_t>(i)];
      if (!counts.isOk()) {
        r->status = counts.status();
        continue;
      }
      r->rate = Store::rateDecision(r->auth->rate_limit_per_min, counts.value()[g] - n + 1 + i,
                                    key.second, r->now_ms);
      r->rate_counted = true;
    }
    ++g;
  }
}

namespace {

// Whether the request's reads and work run: nothing failed it, its key or
// session (if it has one) is good, and it is within its rate limit.
bool admitted(const DbRequest& r) {
  if (!r.status.isOk()) return false;
  if (!r.key_digest.empty() && !r.authenticated) return false;
  if (!r.session_id.empty() && !r.session) return false;
  return !(r.rate_counted && !r.rate.allowed);
}

}  // namespace

void DbThread::readQuotas(Batch& batch) {
  std::vector<DbRequest*> readers;
  std::vector<std::string> accounts;
  for (auto& r : batch) {
    if (!r->reads_quota || !admitted(*r) || !r->auth) continue;
    readers.push_back(r.get());
    accounts.push_back(r->auth->account_id);
  }
  if (readers.empty()) return;
  std::sort(accounts.begin(), accounts.end());
  accounts.erase(std::unique(accounts.begin(), accounts.end()), accounts.end());
  Result<std::map<std::string, AccountQuota>> read = store_->quotas(accounts);
  for (DbRequest* r : readers) {
    if (!read.isOk()) {
      r->status = read.status();
      continue;
    }
    auto it = read.value().find(r->auth->account_id);
    if (it == read.value().end()) {
      r->status = Status(404, "no account " + r->auth->account_id);
    } else {
      r->quota = it->second;
    }
  }
}

void DbThread::touchSessions(Batch& batch) {
  // Each in a savepoint of its own, as their lookups were. A clock that did
  // not move costs the session nothing but a minute of its idle time: the
  // request goes on.
  for (auto& r : batch) {
    if (!admitted(*r) || !r->session || !r->session->idleClockDue(r->now_ms)) continue;
    if (!store_->inTransaction()) return;
    store::Transaction savepoint = store_->transaction();
    Status s = savepoint.status();
    if (s.isOk()) s = store_->touchSession(r->session_id, *r->session, r->now_ms);
    if (s.isOk()) s = savepoint.commit();  // else rolled back
    if (!s.isOk()) log::warn("session idle clock not moved", {{"error", s.msg()}});
  }
}

void DbThread::chargeAll(Batch& batch) {
  std::vector<DbRequest*> callers;
  std::vector<Store::ChargeCall> calls;
  for (auto& r : batch) {
    if (!r->charge || !admitted(*r) || !r->auth) continue;
    r->charge->charge.account_id = r->auth->account_id;
    r->charge->key_id = r->auth->key_id;
    callers.push_back(r.get());
    calls.push_back(*r->charge);
  }
  if (calls.empty() || !store_->inTransaction()) return;
  std::vector<Result<ChargeOutcome>> outcomes = store_->chargeAndOpenAll(calls);
  for (std::size_t i = 0; i < callers.size(); ++i) {
    if (outcomes[i].isOk()) {
      callers[i]->charged = outcomes[i].value();
    } else {
      callers[i]->status = outcomes[i].status();
    }
  }
}

void DbThread::runWork(Batch& batch) {
  // The accounts every request's work writes, locked first and in one
  // order (PostgreSQL's advisory locks, Store::lockAccounts). Otherwise each
  // charge takes its account's rows in the batch's own order, and two
  // eq-api processes whose batches share two accounts in opposite orders
  // wait on each other until the lock timeout (EQ_API_DB_WAIT_MS) fails
  // one. Should the locks fail, the work goes on without them.
  // A session whose idle clock moves is a write of its account's too.
  std::vector<std::string> accounts;
  for (auto& r : batch) {
    if (!admitted(*r)) continue;
    bool touches = r->session && r->session->idleClockDue(r->now_ms);
    if (touches || (r->work && r->writes && r->session)) {
      accounts.push_back(r->session->account_id);
    }
    if (!r->charge && (!r->work || !r->writes)) continue;
    if (r->auth) accounts.push_back(r->auth->account_id);
    accounts.insert(accounts.end(), r->accounts.begin(), r->accounts.end());
  }
  if (Status locked = store_->lockAccounts(accounts); !locked.isOk()) {
    log::warn("batch: account locks not taken; its work goes on without them",
              {{"error", locked.msg()}});
  }
  touchSessions(batch);
  chargeAll(batch);
  // Each admitted request's own work, its writes in a savepoint of their
  // own: a request that fails undoes only its own statements.
  for (auto& r : batch) {
    if (!store_->inTransaction()) break;  // lost to an error: handled by the commit
    if (!r->work || !admitted(*r)) continue;
    const AuthContext* who = r->auth ? &*r->auth : nullptr;
    if (!r->writes) {
      r->status = r->work(*store_, who);
      r->work_ran = true;
      continue;
    }
    store::Transaction savepoint = store_->transaction();
    if (!savepoint.status().isOk()) {
      r->status = savepoint.status();
      continue;
    }
    Status s = r->work(*store_, who);
    r->work_ran = true;
    if (s.isOk()) s = savepoint.commit();  // RELEASE of the savepoint; else rolled back
    r->status = s;
  }
}

}  // namespace eq::api
