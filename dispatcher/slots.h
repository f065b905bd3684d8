// SenderSlots: the webhook sender's slots (EQ_WEBHOOK_MAX_IN_FLIGHT
// attempts at once in one eq-dispatcher process) and each account's share
// of them (EQ_WEBHOOK_MAX_IN_FLIGHT_PER_ACCOUNT). Without the share, one
// account whose receivers never answer could hold every slot for an attempt
// timeout at a time and delay every other account's webhooks behind its own.
//
// A slot is taken by whoever claims a delivery for this process, and given
// back when its attempt ends (or the claim is dropped):
// - the sender's scan (dispatcher/sender.h), for each due delivery it
//   claims from the database;
// - the consumer (dispatcher/dispatcher.h), for a delivery it creates
//   already claimed: when a task's final event arrives and a slot is free
//   for its account, the consumer inserts the delivery leased to this
//   process and hands it over here after its commit, with what the first
//   attempt needs (the task it has just read, the account's signing
//   secrets). The sender starts it at its next loop turn: no claim of its
//   own (no walk of the due rows, no UPDATE, no reads), and no wait for a
//   scan. Should the process die first, the lease ends and any dispatcher's
//   scan finds the delivery due, as after any claim. While the sender has a
//   backlog of due deliveries, the consumer creates them due instead, so
//   that they are sent in their turn.
// So both threads use this object; every member is thread-safe.
//
// The share is per process: two dispatchers give an account up to twice it.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "store/store.h"

namespace eq::dispatch {

// A delivery the consumer created claimed for this process (it holds a slot
// of its account), with what its first attempt needs.
struct HandedOver {
  DeliveryRecord delivery;
  TaskRecord task;
  std::string secret;
  std::string previous_secret;  // empty outside a rotation's overlap
};

// Each account's signing secrets (Store::signingSecrets: the current one,
// and the previous one during a rotation's overlap), read once for as long
// as one is kept: a sender's scan, a consumer's batch. A rotation meanwhile
// is as if it came just after: the previous secret still signs during the
// overlap.
class SigningSecrets {
 public:
  using Pair = std::pair<std::string, std::string>;  // current, previous
  Result<const Pair*> get(Store& store, const std::string& account_id, int64_t now_ms);
  void clear() { read_.clear(); }

 private:
  std::unordered_map<std::string, Pair> read_;
};

// Hands claimed deliveries that will not be attempted here back to the
// database, due at now_ms, under the write gate (dispatcher/db_writes.h);
// one that cannot be is logged and comes due after its lease.
void handBack(Store& store, std::mutex* db_writes, const std::vector<std::string>& delivery_ids,
              int64_t now_ms);

class SenderSlots {
 public:
  // capacity and per_account must be at least 1 (common/config.cc checks
  // them); lease_ms is how long a claim is leased for.
  SenderSlots(int capacity, int per_account, int64_t lease_ms);

  enum class Take { kTaken, kAccountFull, kFull };
  // Takes one slot for the account when both the process and the account
  // have room (kAccountFull: the account is at its share; kFull: every slot
  // is taken, or the slots are closed).
  Take take(const std::string& account_id);
  // take() for a delivery the consumer creates, refused (kFull) while the
  // sender has a backlog: new deliveries then wait their turn behind the
  // due ones, rather than overtake them.
  Take takeForHandOver(const std::string& account_id);
  // An attempt of the account ended, or its claim was dropped.
  void give(const std::string& account_id);
  // Sender, after each scan: whether it left due deliveries in the database
  // (it filled its room, or left accounts waiting for their share), or
  // could not tell (the database failed).
  void setBacklog(bool backlog);

  int perAccount() const { return per_account_; }
  int64_t leaseMs() const { return lease_ms_; }
  int free() const;
  int inFlight(const std::string& account_id) const;
  // Accounts holding a slot.
  size_t accounts() const;

  // Consumer, after its commit: deliveries it created claimed, each holding
  // a slot; moved out of `deliveries`. False once the slots are closed:
  // `deliveries` is left as it was, and the caller gives
  // their slots back and hands their deliveries back to the database (due
  // now).
  bool handOver(std::vector<HandedOver>& deliveries);
  // Sender: what was handed over since the last call, oldest first.
  std::vector<HandedOver> takeHandedOver();
  // Called (from the consumer's thread) after a handOver; set before the
  // consumer starts.
  void onHandOver(std::function<void()> wake) { wake_ = std::move(wake); }

  // Sender, when it stops: nothing more is taken or handed over; returns
  // the ids of what was handed over and not taken, their slots given back,
  // for the sender to hand back.
  std::vector<std::string> close();

 private:
  Take takeLocked(const std::string& account_id);  // caller holds mu_

  const int capacity_;
  const int per_account_;
  const int64_t lease_ms_;
  mutable std::mutex mu_;
  int taken_ = 0;
  bool closed_ = false;
  bool backlog_ = true;  // until the sender's first scan says otherwise
  // Only accounts holding a slot have an entry, so the map stays as small
  // as the number of slots however many accounts come and go.
  std::unordered_map<std::string, int> by_account_;
  std::vector<HandedOver> handed_over_;
  std::function<void()> wake_;
};

}  // namespace eq::dispatch
