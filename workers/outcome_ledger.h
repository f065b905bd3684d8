// OutcomeLedger: which jobs a worker may ack, given the broker's publisher
// confirms. Pure bookkeeping (no broker, no clock of its own), so the rules
// below are unit-tested on their own (tests/unit/workers/outcome_ledger_test.cc).
//
// The rule it keeps is STYLE.md habit 7, "ack after the outcome is durable",
// without a round trip per job: the worker publishes a job's outcome and
// goes on; the ledger remembers which publish sequence number carries which
// job's outcome; when the broker confirms that sequence number (alone, or
// with `multiple` up to it) the job becomes ready to ack. Acks are planned
// in as few frames as the channel allows: a basic.ack with multiple=true
// acks *every* unacked delivery up to its tag, so it may only cover a run
// of tags below the lowest delivery still held for another reason.
//
// A nack (the broker did not take the outcome) never makes a job ready:
// the ledger hands the job back to the worker, which rejects it with
// requeue (see workers/worker.h for why). A lost connection simply drops
// the ledger: whatever it did not ack is redelivered by the broker.
//
// Ownership and threads: one per broker connection, owned by the Worker's
// consumer thread and replaced on reconnect (delivery tags and publish
// sequence numbers both restart with the channel).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

namespace eq::worker {

// One basic.ack to send.
struct AckFrame {
  uint64_t tag = 0;
  bool multiple = false;
};

class OutcomeLedger {
 public:
  // The broker delivered this tag to us; we hold it until acked or rejected.
  void delivered(uint64_t delivery_tag);
  // The job is settled without an outcome to confirm (rejected, or acked at
  // once because its caller gave up): it no longer holds back multi-acks.
  // For rejects the worker sends the reject itself; for acks, use ready().
  void released(uint64_t delivery_tag);
  // The job may be acked now (an expired sync job: nothing to publish).
  void ready(uint64_t delivery_tag);
  // A publish went out with this sequence number, carrying the outcome of
  // `delivery_tag` (0: not tied to a job, e.g. task.running), at now_ms.
  void published(uint64_t seq, uint64_t delivery_tag, int64_t now_ms);

  // A basic.ack / basic.nack from the broker. Returns the delivery tags of
  // jobs whose outcome was nacked: the worker rejects them (requeue) and
  // they are released here already.
  std::vector<uint64_t> confirmed(uint64_t seq, bool multiple, bool ack);

  // The acks to send now for every ready job, in as few frames as possible;
  // the jobs they cover are forgotten (and listed in `covered` if given).
  std::vector<AckFrame> takeAcks(std::vector<uint64_t>* covered = nullptr);

  // Publish time of the oldest unconfirmed publish, or -1 when none waits.
  int64_t oldestUnconfirmedMs() const;
  size_t unconfirmed() const { return unconfirmed_.size(); }
  // Jobs delivered and not yet acked or rejected (running, or waiting for
  // their confirm, or ready to ack).
  size_t held() const { return held_.size(); }

 private:
  struct Pending {
    uint64_t delivery_tag;
    int64_t published_ms;
  };
  std::set<uint64_t> held_;                 // delivered, not acked or rejected
  std::set<uint64_t> ready_;                // subset of held_: confirmed, ack due
  std::map<uint64_t, Pending> unconfirmed_;  // publish seq -> what it carries
};

}  // namespace eq::worker
