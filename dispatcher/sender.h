// The webhook sender: sends due deliveries, many at once, and records each
// attempt and the delivery's next state in SQLite (docs/contract.md §6).
//
// Threads. eq-dispatcher runs two threads, each with its own SQLite
// connection (a Store is used by one thread only): the consumer
// (dispatcher/dispatcher.h) reads task events, records transitions and
// inserts pending deliveries; this sender does every HTTP request. Two
// threads rather than one loop that polls both the AMQP socket and libcurl,
// because each side has blocking calls the other must not wait on:
// rabbitmq-c blocks in connect, in the handshake and in the reconnect backoff
// while the broker is away (seconds), and each side's SQLite writes may wait
// up to the busy timeout for another process's lock. With one thread a
// broker outage would stop webhook retries, and a slow receiver would hold
// up acks. The two threads share the database, wakeup() and the slots
// (dispatcher/slots.h): the consumer creates a delivery already claimed
// when a slot is free for its account and hands it over with what its
// attempt needs, so the first attempt starts at once, without a claim of
// the sender's; otherwise it calls wakeup() after inserting the delivery
// due, and the sender's next scan claims it.
//
// Concurrency. One libcurl multi handle drives every attempt in flight (up
// to max_in_flight, one easy handle each) with non-blocking I/O and
// libcurl's threaded resolver, and keeps a cache of open connections, so
// attempts to the same receiver reuse them. A slow or dead receiver only
// holds its own slots, each for at most the attempt timeout; others go on.
// An account holds at most max_in_flight_per_account of the slots
// (dispatcher/slots.h): the scan leaves the due deliveries of an
// account at its share due and unclaimed, claims the later ones of other
// accounts, and scans again as soon as an attempt of a waiting account ends.
// So one account's dead receivers delay only that account's webhooks.
//
// Durability. The retry state lives in SQLite only: a pending delivery is
// due at deliveries.next_attempt_at. The loop claims due rows (moving
// next_attempt_at past the attempt's timeout, a lease), reads their tasks in
// one transaction, sends them, and then writes each attempt and the next due
// time; all the attempts that finish in one loop turn share one transaction
// (one commit for many: SQLite's commit and WAL locking, not HTTP, was what
// bounded the pace, docs/benchmarks.md). A sender
// killed at any moment loses nothing: rows it had claimed become due again
// when their lease ends, the others are found by the next process's first
// scan. Delivery is at-least-once; receivers dedupe on X-Service-Delivery.
//
// The SSRF guard (EQ_WEBHOOK_ALLOW_CIDRS) is checked in libcurl's
// open-socket callback on the address actually connected to, and proxies
// are disabled (through a proxy the callback would vet the proxy instead).
//
// Also runs the retention purge (dispatcher/retention.h), a batch per loop
// turn, since this thread has the time and a Store to do it.
//
// Owned by main(); run() on the sender thread until `stop`, then in-flight
// attempts get a short grace to finish and the rest are handed back due now.
#pragma once

#include <curl/curl.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/netaddr.h"
#include "dispatcher/metrics.h"
#include "dispatcher/retention.h"
#include "dispatcher/retry.h"
#include "dispatcher/settler.h"
#include "dispatcher/slots.h"
#include "store/store.h"

namespace eq::dispatch {

struct SenderOptions {
  RetryPolicy policy;
  int64_t timeout_ms = 10'000;  // per attempt: a 2xx must come back within it
  int max_in_flight = 64;
  int max_in_flight_per_account = 16;  // of max_in_flight, for one account; at least 1
  int64_t scan_interval_ms = 200;
  int64_t lease_margin_ms = 5'000;
  int64_t stop_grace_ms = 3'000;
  net::CidrSet allowed;  // non-public ranges webhooks may reach anyway
  RetentionOptions retention;
  SettlerOptions settler;
  DispatcherMetrics* metrics = nullptr;  // optional, borrowed
  // Taken around every SQLite write, shared with the consumer thread
  // (dispatcher/db_writes.h); optional, borrowed.
  std::mutex* db_writes = nullptr;
};

class DeliverySender {
 public:
  // Borrows the store, which only this sender's thread may use from now on.
  DeliverySender(Store& store, SenderOptions opts, const std::atomic<bool>& stop);
  ~DeliverySender();
  DeliverySender(const DeliverySender&) = delete;
  DeliverySender& operator=(const DeliverySender&) = delete;

  // The loop; returns after `stop` once in-flight attempts are settled.
  void run();
  // Thread-safe: makes the loop scan for due deliveries now.
  void wakeup();
  // Thread-safe; the consumer takes slots and hands deliveries over here.
  SenderSlots& slots() { return slots_; }

 private:
  struct Transfer;
  // One finished attempt, waiting to be recorded with the others of its
  // loop turn.
  struct Finished {
    DeliveryRecord delivery;
    std::string task_id;
    int64_t started_ms = 0;
    AttemptOutcome outcome;
    std::string error;
    int64_t event_at_ms = 0;
    int64_t record_at_ms = 0;  // > 0: held in held_ until then (see finish())
  };

  void scan(int64_t now_ms);
  // Records which accounts the scan left waiting at their share (log line
  // for the new ones, metric).
  void noteWaiting(std::set<std::string> waiting);
  // Reads what the claimed deliveries' attempts need (caller holds the
  // write gate and a transaction); the attempts that can start now.
  std::vector<std::unique_ptr<Transfer>> prepare(const std::vector<DeliveryRecord>& claimed,
                                                 int64_t now_ms);
  // The attempt of a delivery, its task (none for a test event) and its
  // account's signing secrets.
  std::unique_ptr<Transfer> makeTransfer(const DeliveryRecord& d, const TaskRecord* task,
                                         const std::string& secret,
                                         const std::string& previous_secret, int64_t now_ms);
  // Starts what the consumer handed over (dispatcher/slots.h).
  void startHandedOver(int64_t now_ms);
  // Starts the attempt; its delivery already holds a slot, given back here
  // if the attempt cannot start.
  void launch(std::unique_ptr<Transfer> t);
  void finish(CURL* easy, CURLcode rc, std::vector<Finished>& done);
  // Moves the held test events whose time has come (all of them when
  // `all`) to `done`.
  void releaseHeld(int64_t now_ms, bool all, std::vector<Finished>& done);
  // Records the attempts in one transaction, under the write gate.
  void recordOutcomes(const std::vector<Finished>& done);
  // Records the attempts and their deliveries' next states; caller holds
  // the write gate. Their log lines and metrics wait in after_commit_ for
  // flushAfterCommit().
  void recordAttempts(const std::vector<Finished>& done);
  // Runs what was deferred until the transaction ended and the gate was
  // released (log writes may block; SQLite's write lock must not wait on them).
  void flushAfterCommit();
  void abandonInFlight();

  static curl_socket_t openSocket(void* transfer, curlsocktype purpose, struct curl_sockaddr* addr);
  static size_t onHeader(char* data, size_t size, size_t n, void* transfer);
  static size_t onBody(char* data, size_t size, size_t n, void* transfer);

  Store& store_;
  SenderOptions opts_;
  const std::atomic<bool>& stop_;
  CURLM* multi_;
  std::map<CURL*, std::unique_ptr<Transfer>> in_flight_;
  // Taken by in_flight_ and by claims about to start (the consumer's
  // hand-overs, a scan's claims).
  SenderSlots slots_;
  // Accounts whose due deliveries the last scan left waiting because the
  // account had its share in flight; an attempt of one of them that ends
  // sets share_freed_, which brings the next scan forward to now.
  std::set<std::string> waiting_;
  bool share_freed_ = false;
  std::atomic<bool> woken_{false};
  bool more_due_ = false;     // the last scan filled every free slot
  int64_t next_scan_ms_ = 0;  // the next periodic scan
  // Due times of the retries this process scheduled, earliest on top; each
  // brings a scan forward. (Retries scheduled by another process, and
  // replays, wait for the periodic scan.)
  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<int64_t>> retries_due_;
  std::vector<std::function<void()>> after_commit_;
  // Test events that got no HTTP answer, held until their attempt's
  // timeout has passed since they started (finish()).
  std::vector<Finished> held_;
  // The dispatcher's connections do not checkpoint in their commits; the
  // sender does, every interval (Store::checkpointPassive).
  static constexpr int64_t kCheckpointIntervalMs = 250;
  int64_t next_checkpoint_ms_ = 0;
  RetentionPurger purger_;
  ChargeSettler settler_;
  std::mt19937_64 rng_;
};

}  // namespace eq::dispatch
