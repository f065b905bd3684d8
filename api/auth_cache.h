// AuthCache: the keys eq-api has seen, by the SHA-256 of the presented key.
//
// Lives on the api's loop thread (no locks). It spares the database thread a
// key lookup per request; it never decides on its own: each entry carries
// the key epoch it was read under (Store::keyEpoch, moved by trigger with
// every change to a key or a rate limit), and the database thread accepts a
// cached identity only when the epoch of its batch is still that one and the
// key has not expired (api/db_thread.h). A revoked or rotated key is thus
// refused from the first batch that starts after the change committed.
//
// Entries are dropped after kTtlMs unused-or-not and the map is bounded:
// when full, expired entries go first, then everything (the next requests
// simply look their keys up again). Only keys that authenticated are kept,
// so random keys cannot fill it.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "store/store.h"

namespace eq::api {

class AuthCache {
 public:
  static constexpr int64_t kTtlMs = 60'000;
  static constexpr std::size_t kMaxEntries = 100'000;

  struct Entry {
    AuthContext auth;
    int64_t epoch = -1;
    int64_t stored_ms = 0;
  };

  // The entry for this digest, or nullptr when absent, too old, or read
  // under an epoch older than the newest one seen.
  const Entry* find(const std::string& digest, int64_t now_ms) const;
  void put(const std::string& digest, const AuthContext& auth, int64_t epoch, int64_t now_ms);
  void forget(const std::string& digest) { entries_.erase(digest); }
  // Records the epoch of a batch: entries of older epochs stop matching.
  void sawEpoch(int64_t epoch) {
    if (epoch > newest_epoch_) newest_epoch_ = epoch;
  }
  std::size_t size() const { return entries_.size(); }

 private:
  std::unordered_map<std::string, Entry> entries_;
  int64_t newest_epoch_ = -1;
};

}  // namespace eq::api
