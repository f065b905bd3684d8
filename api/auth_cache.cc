#include "api/auth_cache.h"

namespace eq::api {

const AuthCache::Entry* AuthCache::find(const std::string& digest, int64_t now_ms) const {
  auto it = entries_.find(digest);
  if (it == entries_.end()) return nullptr;
  const Entry& e = it->second;
  if (now_ms - e.stored_ms >= kTtlMs || e.epoch < newest_epoch_) return nullptr;
  return &e;
}

void AuthCache::put(const std::string& digest, const AuthContext& auth, int64_t epoch,
                    int64_t now_ms) {
  sawEpoch(epoch);
  if (entries_.size() >= kMaxEntries && entries_.find(digest) == entries_.end()) {
    std::erase_if(entries_, [&](const auto& kv) {
      return now_ms - kv.second.stored_ms >= kTtlMs || kv.second.epoch < newest_epoch_;
    });
    if (entries_.size() >= kMaxEntries) entries_.clear();
  }
  entries_[digest] = Entry{auth, epoch, now_ms};
}

}  // namespace eq::api
