// AccountShare: how many webhook attempts each account has in flight in one
// eq-dispatcher process, against a cap per account
// (EQ_WEBHOOK_MAX_IN_FLIGHT_PER_ACCOUNT). Without it, one account whose
// receivers never answer could hold every slot of the sender
// (EQ_WEBHOOK_MAX_IN_FLIGHT) for an attempt timeout at a time and delay
// every other account's webhooks behind its own.
//
// Owned by the DeliverySender (dispatcher/sender.h) and used on the sender
// thread only; a scan copies it to count the claims it is about to make.
// The share is per process: two dispatchers give an account up to twice it.
#pragma once

#include <string>
#include <unordered_map>

namespace eq::dispatch {

class AccountShare {
 public:
  // per_account must be at least 1 (common/config.cc checks it).
  explicit AccountShare(int per_account);

  int perAccount() const { return per_account_; }
  // Whether the account may start one more attempt now.
  bool hasRoom(const std::string& account_id) const;
  // An attempt of the account started, or ended.
  void take(const std::string& account_id);
  void give(const std::string& account_id);
  int inFlight(const std::string& account_id) const;
  // Accounts with an attempt in flight.
  size_t accounts() const { return in_flight_.size(); }
  void clear() { in_flight_.clear(); }

 private:
  int per_account_;
  // Only accounts with an attempt in flight have an entry, so the map stays
  // as small as the number of slots however many accounts come and go.
  std::unordered_map<std::string, int> in_flight_;
};

}  // namespace eq::dispatch
