#include "workers/outcome_ledger.h"

#include <algorithm>

namespace eq::worker {

void OutcomeLedger::delivered(uint64_t delivery_tag) { held_.insert(delivery_tag); }

void OutcomeLedger::released(uint64_t delivery_tag) {
  held_.erase(delivery_tag);
  ready_.erase(delivery_tag);
}

void OutcomeLedger::ready(uint64_t delivery_tag) {
  if (held_.count(delivery_tag) != 0) ready_.insert(delivery_tag);
}

void OutcomeLedger::published(uint64_t seq, uint64_t delivery_tag, int64_t now_ms) {
  unconfirmed_[seq] = Pending{delivery_tag, now_ms};
}

std::vector<uint64_t> OutcomeLedger::confirmed(uint64_t seq, bool multiple, bool ack) {
  std::vector<uint64_t> nacked;
  auto settle = [&](const Pending& p) {
    if (p.delivery_tag == 0) return;  // task.running: nothing waits on it
    if (ack) {
      ready(p.delivery_tag);
    } else {
      released(p.delivery_tag);
      nacked.push_back(p.delivery_tag);
    }
  };
  if (multiple) {
    // Every publish up to and including seq.
    auto end = unconfirmed_.upper_bound(seq);
    for (auto it = unconfirmed_.begin(); it != end; ++it) settle(it->second);
    unconfirmed_.erase(unconfirmed_.begin(), end);
  } else if (auto it = unconfirmed_.find(seq); it != unconfirmed_.end()) {
    settle(it->second);
    unconfirmed_.erase(it);
  }
  // A confirm for a sequence number we no longer track (or never did) is
  // ignored: the broker confirms each publish once, so it can only be one
  // that a multiple confirm covered already.
  return nacked;
}

std::vector<AckFrame> OutcomeLedger::takeAcks(std::vector<uint64_t>* covered) {
  std::vector<AckFrame> frames;
  if (ready_.empty()) return frames;
  if (covered != nullptr) covered->insert(covered->end(), ready_.begin(), ready_.end());
  // The lowest tag still held for another reason (running, unconfirmed):
  // a multiple ack must stay below it.
  uint64_t barrier = UINT64_MAX;
  for (uint64_t t : held_) {
    if (ready_.count(t) == 0) {
      barrier = t;
      break;
    }
  }
  auto below = ready_.lower_bound(barrier);  // first ready tag above the barrier
  if (below != ready_.begin()) {
    // All held tags below the barrier are ready: one frame acks them all.
    uint64_t top = *std::prev(below);
    bool several = std::distance(ready_.begin(), below) > 1;
    frames.push_back(AckFrame{top, several});
    for (auto it = ready_.begin(); it != below; ++it) held_.erase(*it);
    ready_.erase(ready_.begin(), below);
  }
  // Ready tags above the barrier are acked one by one: waiting for the
  // barrier (a slow job) would keep their prefetch slots busy for nothing.
  for (uint64_t t : ready_) {
    frames.push_back(AckFrame{t, false});
    held_.erase(t);
  }
  ready_.clear();
  return frames;
}

int64_t OutcomeLedger::oldestUnconfirmedMs() const {
  // Sequence numbers grow with time, so the lowest one is the oldest.
  return unconfirmed_.empty() ? -1 : unconfirmed_.begin()->second.published_ms;
}

}  // namespace eq::worker
