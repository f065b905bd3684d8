#include "dispatcher/slots.h"

#include <cstdlib>

#include "common/log.h"
#include "dispatcher/db_writes.h"

namespace eq::dispatch {

SenderSlots::SenderSlots(int capacity, int per_account, int64_t lease_ms)
    : capacity_(capacity), per_account_(per_account), lease_ms_(lease_ms) {
  if (capacity_ < 1 || per_account_ < 1) {
    log::error("webhook slots and their share per account must be at least 1",
               {{"slots", static_cast<long long>(capacity_)},
                {"per_account", static_cast<long long>(per_account_)}});
    std::abort();
  }
}

SenderSlots::Take SenderSlots::take(const std::string& account_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return takeLocked(account_id);
}

SenderSlots::Take SenderSlots::takeForHandOver(const std::string& account_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (backlog_) return Take::kFull;
  return takeLocked(account_id);
}

void SenderSlots::setBacklog(bool backlog) {
  std::lock_guard<std::mutex> lock(mu_);
  backlog_ = backlog;
}

SenderSlots::Take SenderSlots::takeLocked(const std::string& account_id) {
  if (closed_ || taken_ >= capacity_) return Take::kFull;
  auto it = by_account_.find(account_id);
  if (it != by_account_.end() && it->second >= per_account_) return Take::kAccountFull;
  ++taken_;
  ++by_account_[account_id];
  return Take::kTaken;
}

void SenderSlots::give(const std::string& account_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_account_.find(account_id);
  if (it == by_account_.end()) {
    // Every give() follows the take() of the same claim: a slot handed back
    // twice would let the account above its share from then on.
    log::error("webhook slot handed back by an account with none taken",
               {{"account_id", account_id}});
    std::abort();
  }
  if (--it->second == 0) by_account_.erase(it);
  --taken_;
}

int SenderSlots::free() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_ ? 0 : capacity_ - taken_;
}

int SenderSlots::inFlight(const std::string& account_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_account_.find(account_id);
  return it == by_account_.end() ? 0 : it->second;
}

size_t SenderSlots::accounts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_account_.size();
}

bool SenderSlots::handOver(std::vector<HandedOver>& deliveries) {
  if (deliveries.empty()) return true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return false;
    for (HandedOver& h : deliveries) handed_over_.push_back(std::move(h));
  }
  deliveries.clear();
  if (wake_) wake_();
  return true;
}

std::vector<HandedOver> SenderSlots::takeHandedOver() {
  std::vector<HandedOver> out;
  std::lock_guard<std::mutex> lock(mu_);
  out.swap(handed_over_);
  return out;
}

std::vector<std::string> SenderSlots::close() {
  std::vector<HandedOver> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    left.swap(handed_over_);
  }
  std::vector<std::string> ids;
  for (HandedOver& h : left) {
    give(h.delivery.account_id);
    ids.push_back(std::move(h.delivery.delivery_id));
  }
  return ids;
}

Result<const SigningSecrets::Pair*> SigningSecrets::get(Store& store, const std::string& account_id,
                                                        int64_t now_ms) {
  auto it = read_.find(account_id);
  if (it == read_.end()) {
    Result<Pair> read = store.signingSecrets(account_id, now_ms);
    if (!read.isOk()) return read.status();
    it = read_.emplace(account_id, std::move(read).value()).first;
  }
  return &it->second;
}

void handBack(Store& store, std::mutex* db_writes, const std::vector<std::string>& delivery_ids,
              int64_t now_ms) {
  for (const std::string& id : delivery_ids) {
    Status released = [&] {
      std::unique_lock<std::mutex> gate = lockDbWrites(db_writes);
      return store.releaseDelivery(id, now_ms);
    }();
    if (!released.isOk()) {
      log::warn("delivery not handed back; due after its lease",
                {{"delivery_id", id}, {"error", released.msg()}});
    }
  }
}

}  // namespace eq::dispatch
