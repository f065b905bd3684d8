// BrokerBridge: eq-api's connection to RabbitMQ, on a thread of its own.
//
// Why a thread: rabbitmq-c is blocking at heart. amqp_basic_publish may block
// on a full socket buffer, heartbeats are only sent and checked inside its own
// calls, and it keeps bytes it has already read in private buffers
// (amqp_data_in_buffer, amqp_frames_enqueued), so polling its fd from the
// libuv loop would both stall the loop and miss frames. Instead, one broker
// thread owns the amqp::Connection exclusively. It sleeps in poll() on the
// AMQP socket and an eventfd, checks rabbitmq-c's buffers before sleeping,
// and wakes at least once a second so heartbeats keep flowing.
//
// Hand-over: the loop thread collects the publish operations of one loop
// iteration and hands them in together before the loop waits for I/O (a
// uv_prepare handle; handIn()), into an inbox (mutex + one eventfd wake-up
// per iteration, not per request); the broker thread pushes outcomes (confirms, replies,
// disconnects) into an outbox and wakes the loop with uv_async_send. All
// callbacks given to the bridge run on the loop thread, never on the broker
// thread, so handlers need no locks.
//
// Sync calls: a job is published with reply_to = `amq.rabbitmq.reply-to`
// (RabbitMQ's direct reply-to: the broker rewrites it to a name that routes
// the worker's reply straight to this connection's consumer, with no queue
// in between; measured against an exclusive server-named queue in
// docs/architecture.md, "Queue choice") and correlation_id = request id; the
// loop matches the reply by correlation id and enforces the deadline with a
// sweep timer. A reply for a call that already timed out is dropped. If the
// connection drops, its replies can no longer reach us (the broker discards
// a direct reply whose requester is gone, as an exclusive queue died with
// its connection): the broker thread reports exactly the calls published on
// that connection, and those fail at once with 503 (calls already on the
// next connection are unaffected). A worker killed mid-job leaves its job
// to be redelivered, so such a call is answered by the next worker, or with
// 504 at its deadline, and the api refunds it.
//
// Outages: RabbitMQ closes our connection with connection.close when it
// stops (rabbitmqctl stop_app, a node shutdown), which the poll() above sees
// at once. From then on connected() is false, so call() and
// publishPersistent() answer 503 right away instead of queueing, and the
// broker thread reconnects with a backoff of 100 ms doubling to 1 s: the
// api is back within about a second of the broker (tests/integration/
// resilience_test.cc measures it).
//
// Persistent publishes (async jobs) whose confirm had not arrived when the
// connection dropped are published again after reconnecting, up to three
// times: the broker may or may not have stored the first copy, and a
// duplicate job is harmless because workers and the dispatcher are
// idempotent on the task id. Only when the broker stays away is the publish
// reported as failed.
//
// Blocked publishing: under a memory or disk alarm RabbitMQ keeps the
// connection open but stops reading from it once we publish, so no confirm
// comes and nothing fails (tests/integration/pipeline_test.cc, case 7: async
// calls hung for a minute). A publish not confirmed within
// kConfirmTimeoutMs therefore fails with 503 (a sync call too, without
// waiting for its deadline), and the bridge counts as stalled: connected()
// is false, so /readyz says 503 and new calls answer 503 at once, until any
// confirm arrives (the broker reads again: the timed-out publishes are
// still tracked for this) or the connection is replaced. A timed-out job
// may still be enqueued once the alarm clears; its task is failed and
// refunded by then, and the dispatcher's state guards ignore its outcome.
//
// Owned by the api's main(); stop() is called on the loop thread (it joins
// nothing); join() after uv_run has returned.
#pragma once

#include <uv.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/amqp.h"
#include "common/messages.h"
#include "common/status.h"

namespace eq::api {

class BrokerBridge {
 public:
  using CallDone = std::function<void(Result<msg::SyncResult>)>;
  using PublishDone = std::function<void(Status)>;

  // internal_key: EQ_INTERNAL_KEY, which signs the jobs published here and
  // must sign every sync result taken (common/msg_auth.h).
  BrokerBridge(uv_loop_t* loop, std::string amqp_url, std::string conn_name,
               std::string internal_key);
  ~BrokerBridge();
  BrokerBridge(const BrokerBridge&) = delete;
  BrokerBridge& operator=(const BrokerBridge&) = delete;

  void start();
  // Loop thread: asks the broker thread to finish and fails the calls still
  // waiting; never blocks. The loop ends once the thread has exited.
  void stop();
  // After uv_run returned: waits for the broker thread.
  void join();

  // True while the broker thread holds a working connection that confirms
  // publishes (for /readyz and to fail fast with 503 instead of queueing
  // into a dead or blocked connection).
  bool connected() const {
    return connected_.load(std::memory_order_acquire) && !stalled_.load(std::memory_order_acquire);
  }
  uint64_t reconnects() const { return reconnects_.load(std::memory_order_relaxed); }
  // Sync results dropped because their signature was missing or wrong
  // (any thread; for /metrics).
  uint64_t refusedUnsigned() const { return refused_unsigned_.load(std::memory_order_relaxed); }
  uint64_t refusedBadSignature() const { return refused_bad_.load(std::memory_order_relaxed); }
  std::size_t pendingCalls() const { return calls_.size(); }

  // Publishes a sync job and calls done with the worker's result, or with
  // 503 (broker trouble) or 504 (deadline passed). Loop thread only.
  void call(const msg::Job& job, CallDone done);

  // Publishes a persistent job (signed like every job) and calls done once
  // the broker confirmed it (ok) or could not take it (503). Loop thread
  // only.
  void publishPersistent(const std::string& queue, std::string body, PublishDone done);

  // Loop thread: hands the operations of this iteration to the broker
  // thread now (call() and publishPersistent() leave them for the bridge's
  // uv_prepare handle, which runs before the loop waits for I/O).
  void handIn();

 private:
  struct Outgoing {
    uint64_t op_id = 0;
    std::string queue;
    std::string body;
    amqp::PublishOptions opts;
    bool wants_reply = false;
    int64_t deadline_ms = 0;  // sync calls
    int attempts = 0;         // publishes so far (persistent ones are retried)
    int64_t published_ms = 0;  // last publish, for the confirm timeout
    bool answered = false;     // failed for want of a confirm; kept to see a late one
  };
  struct Outcome {
    // kCallFailed: a sync call's publish was never confirmed (error says why).
    enum class Kind { kConfirmed, kRejected, kReply, kDisconnected, kCallFailed } kind;
    uint64_t op_id = 0;
    std::string correlation_id;
    std::string body;
    std::string error;
    std::vector<std::string> lost_calls;  // kDisconnected: calls on the lost connection
  };
  struct PendingCall {
    int64_t deadline_ms;
    CallDone done;
  };

  // Broker thread.
  void run();
  bool connect();
  void drainInbox();
  void pumpFrames();
  void disconnect(const std::string& why);
  void emit(Outcome o);
  void waitForWork(int timeout_ms);
  void pruneExpiredCalls();
  void expireUnconfirmed();

  // Loop thread.
  static void onAsync(uv_async_t* handle);
  static void onPrepare(uv_prepare_t* handle);
  static void onSweep(uv_timer_t* timer);
  void handleOutcome(Outcome& o);
  void submit(Outgoing op);

  uv_loop_t* loop_;
  std::string url_;
  std::string conn_name_;
  std::string internal_key_;
  uv_async_t async_;
  uv_prepare_t prepare_;  // hands in each loop iteration's operations
  uv_timer_t sweep_;
  int wake_fd_ = -1;  // eventfd: loop -> broker thread
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> connected_{false};
  std::atomic<bool> stalled_{false};  // a publish went unconfirmed too long (see above)
  std::atomic<uint64_t> reconnects_{0};
  std::atomic<uint64_t> refused_unsigned_{0};
  std::atomic<uint64_t> refused_bad_{0};

  std::mutex mu_;  // guards inbox_ and outbox_
  std::deque<Outgoing> inbox_;
  std::deque<Outcome> outbox_;
  bool exited_ = false;  // guarded by mu_: the broker thread has finished
  bool async_closed_ = false;  // loop thread: async_ and prepare_ closed
  void closeAsync();

  // Broker thread only.
  std::unique_ptr<amqp::Connection> conn_;
  std::map<uint64_t, Outgoing> unconfirmed_;  // publish seq -> op, in publish order
  // Keys for ops whose publish call itself failed (no sequence number was
  // assigned); counted down from the top so they never meet real ones.
  uint64_t next_unknown_seq_ = UINT64_MAX;
  // Sync calls published on the current connection and not yet answered,
  // with their deadlines (pruned once past them).
  std::unordered_map<std::string, int64_t> sync_in_flight_;
  int64_t last_prune_ms_ = 0;
  bool ever_connected_ = false;
  std::size_t first_broker_ = 0;  // of a cluster's addresses (amqp::Connection::open)
  int64_t failed_attempts_ = 0;  // connect attempts since the last success

  // Loop thread only.
  std::deque<Outgoing> submitted_;  // not yet handed in
  uint64_t next_op_id_ = 1;
  std::unordered_map<std::string, PendingCall> calls_;      // by correlation id
  std::unordered_map<uint64_t, PublishDone> publishes_;  // by op id
};

}  // namespace eq::api
