// DbThread: eq-api's one SQLite connection, on a thread of its own, with
// group commit.
//
// Why a thread: a SQLite statement may wait for another process's write lock
// (eqctl, eq-dispatcher, a second eq-api) for as long as that process holds
// it, and even uncontended every commit costs a WAL write and sometimes a
// checkpoint. On the loop thread that stalls every connection, /healthz
// included. Here the loop never calls SQLite: it hands each request's
// database work to this thread and goes on serving other connections.
//
// Hand-over (like api/broker_bridge.h): the loop thread collects the
// DbRequests of one loop iteration and hands them in together, before the
// loop waits for I/O (a uv_prepare handle; handIn()), into an inbox (mutex +
// condition variable): one lock and one wake-up per iteration, not per
// request, and the requests of an iteration share a batch. The database
// thread pushes them back, filled in, into an outbox and wakes the loop with
// uv_async_send. Every `done` callback runs on the loop thread, never on the
// database thread, so handlers need no locks.
//
// Group commit: the database thread takes everything waiting in the inbox
// (up to kMaxBatch) as one batch and runs it in one BEGIN IMMEDIATE ...
// COMMIT; requests arriving meanwhile form the next batch, so under load
// batches grow by themselves and under light load a request waits for no
// window. A request's `done` runs only after the transaction holding its
// writes has committed, so what it answers is durable (or the request gets
// 503 and none of its writes happened). Inside the batch:
//   1. keys the loop's cache did not know, or knew under an older key epoch
//      (see Store::keyEpoch: every change to a key or its rate limit moves
//      it, in the same transaction), are looked up by digest; so a revoked,
//      rotated or expired key is refused by the first batch that starts
//      after the change committed, exactly as without a cache;
//   2. the rate counts: all requests of one key in the batch are counted by
//      one UPSERT (count = count + n RETURNING count) and the i-th of them
//      gets count - n + i, exactly what n single UPSERTs would have given,
//      across every process sharing the database file;
//   3. each admitted request's own work (idempotency, charge, task insert,
//      reads) runs inside its own SAVEPOINT: a failing request rolls back
//      only its own statements, never an earlier request's effects.
// If COMMIT fails, every request of the batch gets 503 and nothing of the
// batch happened (the rate counts included).
//
// Another process holding the write lock: BEGIN IMMEDIATE is retried in
// short busy-timeout slices; between slices, requests past their deadline
// are answered 503 (none of their writes ran) and new arrivals join the
// waiting batch, so each request waits at most until its own deadline. WAL
// checkpoints happen in COMMIT, so they too run here, off the loop.
//
// Crash-safe accounting: with an instance id (this process's api_instances
// row, registered by main() before start), the thread refreshes the row's
// heartbeat every kHeartbeatMs, idle or busy, and deletes the row when it
// exits cleanly; eq-dispatcher settles the open charges of an instance
// whose heartbeat stopped (Store::settleOrphanedCharges).
//
// Out of space (SQLITE_FULL) or an I/O error (SQLITE_IOERR) on the
// database, its WAL or a journal: the COMMIT fails and SQLite rolls the
// batch back, so, as for any failed commit, every request of the batch gets
// 503 and nothing of it happened; those requests are marked storage_failed,
// which eq-api answers with a longer Retry-After (kStorageRetryAfterS) and
// /readyz with 503 (Store::storageFailing). Nothing else changes: each new
// batch tries again, and the first write that commits (a batch, or the
// heartbeat, which retries every 100 ms while it fails) ends the state, with
// no restart. Both transitions are logged once, not per request.
//
// Owned by the api's main(); start() before the loop runs. stop() is called
// on the loop thread (it only asks the thread to finish what is queued and
// exit); once the thread has handed over its last results it closes its
// uv_async handle from the loop, which lets uv_run return; join() is called
// after uv_run has returned.
#pragma once

#include <uv.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/timefmt.h"
#include "store/store.h"

namespace eq::api {

// One request's database work, and its outcome.
struct DbRequest {
  // ---- set by the loop thread before submit()
  int64_t now_ms = 0;       // the request's clock, for expiry and rate windows
  int64_t deadline_ms = 0;  // no transaction by then: 503, nothing written
  // Authentication: key_digest set means the request needs it. `auth` is
  // what the loop's cache knows, valid if the key epoch is still
  // auth_epoch and the key has not expired; otherwise the digest is looked
  // up here.
  std::optional<AuthContext> auth;
  int64_t auth_epoch = -1;
  std::string key_digest;
  std::string env;
  // A developer-center request: its session cookie's value. The batch looks
  // the session up after the keys and before the account locks, so that the
  // session's account is locked with the others (a playground call charges
  // it), and moves its idle clock once it holds them; `session` holds what
  // was found, and `work` runs only when a session was.
  std::string session_id;
  bool count_rate = false;  // count this request against auth's rate limit
  bool writes = true;       // work writes: run it inside a SAVEPOINT
  // Read the caller's account quota into `quota`: the read clients poll,
  // made for every request of a batch that asks in one statement, before
  // any work runs (so it sees none of the batch's charges).
  bool reads_quota = false;
  // The accounts whose rows `work` writes besides auth's (a settled call's
  // refund, the usage rows of answered calls' tokens): the batch locks them
  // with auth's accounts before any work (Store::lockAccounts).
  std::vector<std::string> accounts;
  // A call's admission without an Idempotency-Key: its charge, open charge
  // and (async) task, made with the batch's others in one statement per
  // account and mode (Store::chargeAndOpenAll) after the account locks and
  // before any request's work; the account is auth's. `charged` holds the
  // outcome.
  std::optional<Store::ChargeCall> charge;
  // Runs on the database thread inside the batch transaction, only when the
  // request is authenticated (if it needs to be) and within its rate limit.
  // An error rolls back this request's own statements and answers 503.
  std::function<Status(Store& store, const AuthContext* auth)> work;
  // Runs on the loop thread once the batch committed (or failed).
  std::function<void(DbRequest& r)> done;

  // ---- filled by the database thread
  Status status;           // not ok: 503, none of this request's writes kept
  bool storage_failed = false;  // ... because the database cannot write (disk full, I/O error)
  bool authenticated = false;
  bool looked_up = false;  // the key was looked up here (refresh the cache)
  std::optional<PortalSession> session;  // session_id's, when it is a live session
  int64_t key_epoch = -1;  // the batch's key epoch
  RateDecision rate;
  bool rate_counted = false;
  bool work_ran = false;
  std::optional<AccountQuota> quota;  // reads_quota's answer
  std::optional<ChargeOutcome> charged;  // charge's outcome
};

class DbThread {
 public:
  // Takes the Store, which from start() on is used by the database thread
  // alone.
  DbThread(uv_loop_t* loop, std::unique_ptr<Store> store, const Clock* clock,
           std::string instance_id = "");
  ~DbThread();
  DbThread(const DbThread&) = delete;
  DbThread& operator=(const DbThread&) = delete;

  void start();
  // Loop thread: asks the database thread to run what is queued and exit.
  void stop();
  // After uv_run returned: waits for the thread to end.
  void join();

  // Loop thread. `r->done` runs later on the loop thread, never inside this
  // call. The request reaches the database thread at the end of this loop
  // iteration (or at once, past kMaxBatch waiting).
  void submit(std::unique_ptr<DbRequest> r);
  // Loop thread: hands what was submitted in this iteration to the database
  // thread now. The thread's own uv_prepare handle does it every iteration;
  // a submit from another prepare callback calls it itself, since the order
  // of prepare callbacks is libuv's.
  void handIn();

  // Batches committed and requests handled, for /metrics (loop thread).
  int64_t batches() const { return batches_.load(std::memory_order_relaxed); }

  static constexpr std::size_t kMaxBatch = 1024;
  // Slice of one wait for the write lock; between slices deadlines are
  // checked and new requests join the batch.
  static constexpr int kBusySliceMs = 10;
  // How often the instance's heartbeat is written; a sweeper takes the
  // instance for dead after several missed ones (dispatcher/settler.h).
  static constexpr int64_t kHeartbeatMs = 3'000;
  // While a write fails (busy, or the storage failing), the heartbeat is
  // tried again this often; it is what ends a disk-full state when no
  // request writes.
  static constexpr int64_t kHeartbeatRetryMs = kBusySliceMs * 10;
  // Retry-After of a 503 for want of space: freeing it takes an operator,
  // so clients are asked to wait longer than for a busy lock (1 s).
  static constexpr int kStorageRetryAfterS = 5;

 private:
  using Batch = std::vector<std::unique_ptr<DbRequest>>;
  static void onAsync(uv_async_t* handle);
  static void onPrepare(uv_prepare_t* handle);
  void drainOutbox();
  void closeHandles();  // loop thread, once the database thread exited
  void run();                 // database thread
  void runBatch(Batch batch);  // database thread
  // The steps of a batch that holds the write lock (database thread): the
  // keys, the sessions, the rate counts, the quota reads, each request's
  // work, the commit of `tx`. False
  // when the batch could not start (the key epoch could not be read, or a
  // batch of reads could not relax its commit): nothing was done, tx rolls
  // back.
  bool runLocked(Batch& batch, store::Transaction& tx);
  bool authenticate(Batch& batch);
  void findSessions(Batch& batch);
  void touchSessions(Batch& batch);
  void countRates(Batch& batch);
  void readQuotas(Batch& batch);
  void runWork(Batch& batch);
  void chargeAll(Batch& batch);
  bool takeInbox(Batch& into);  // moves queued requests into `into`, up to kMaxBatch
  void handOver(Batch& done);
  void expire(Batch& batch, int64_t now_ms);
  void heartbeatIfDue();  // database thread
  // Database thread: logs the storage state when it changes (once per
  // outage, not per request).
  void noteStorage();

  uv_loop_t* loop_;
  std::unique_ptr<Store> store_;
  const Clock* clock_;
  std::string instance_id_;      // empty: no heartbeat (tests)
  int64_t next_heartbeat_ms_ = 0;  // database thread
  bool storage_failing_ = false;   // database thread: as last logged
  bool heartbeat_failing_ = false;  // database thread: its failure was logged
  uv_async_t async_;
  uv_prepare_t prepare_;  // hands in each loop iteration's submits
  Batch submitted_;       // loop thread: not yet handed in
  std::thread thread_;

  std::mutex mu_;
  std::condition_variable cv_;
  Batch inbox_;
  Batch outbox_;
  bool stopping_ = false;  // guarded by mu_
  bool exited_ = false;    // guarded by mu_: the thread handed over its last results
  bool closed_ = false;    // loop thread: async_ and prepare_ closed
  std::atomic<int64_t> batches_{0};
};

}  // namespace eq::api
