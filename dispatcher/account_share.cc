#include "dispatcher/account_share.h"

#include <cstdlib>

#include "common/log.h"

namespace eq::dispatch {

AccountShare::AccountShare(int per_account) : per_account_(per_account) {
  if (per_account_ < 1) {
    log::error("webhook share per account must be at least 1",
               {{"per_account", static_cast<long long>(per_account_)}});
    std::abort();
  }
}

bool AccountShare::hasRoom(const std::string& account_id) const {
  return inFlight(account_id) < per_account_;
}

void AccountShare::take(const std::string& account_id) { ++in_flight_[account_id]; }

void AccountShare::give(const std::string& account_id) {
  auto it = in_flight_.find(account_id);
  if (it == in_flight_.end()) {
    // Every give() follows the take() of the same attempt: a slot handed
    // back twice would let the account above its share from then on.
    log::error("webhook slot handed back by an account with none in flight",
               {{"account_id", account_id}});
    std::abort();
  }
  if (--it->second == 0) in_flight_.erase(it);
}

int AccountShare::inFlight(const std::string& account_id) const {
  auto it = in_flight_.find(account_id);
  return it == in_flight_.end() ? 0 : it->second;
}

}  // namespace eq::dispatch
