// ReconnectBackoff: the one reconnect-with-backoff policy of every process
// that holds a broker connection (eq-worker, eq-dispatcher, eq-api's broker
// bridge): 100 ms after the first failure, doubling up to 1 s
// (defaults::kReconnectBackoff*; see there for why the cap is 1 s), back to
// 100 ms once a connection is up.
//
// Two loops use it: amqp::serveUntilStopped (common/amqp.h), the one of
// eq-worker and eq-dispatcher, which only sleeps between attempts, and
// eq-api's broker bridge, which also answers its inbox while it waits and
// so sleeps in poll() on its wake-up fd: the helper gives the delay and,
// for the first, an interruptible sleep. Resetting "on a successful TCP connect" instead of
// on a usable connection would not help: nothing connects while the broker
// is away, and the sleep is what delays recovery.
//
// Ownership and threads: a plain value owned by the reconnecting loop, used
// by that loop's thread only.
#pragma once

#include <algorithm>
#include <atomic>

#include "common/defaults.h"

namespace eq {

class ReconnectBackoff {
 public:
  // How long to wait before the next attempt; each call doubles the next.
  int nextDelayMs() {
    int d = delay_ms_;
    delay_ms_ = std::min(delay_ms_ * 2, defaults::kReconnectBackoffMaxMs);
    return d;
  }
  // A connection is up (and set up): the next outage starts from the bottom.
  void reset() { delay_ms_ = defaults::kReconnectBackoffInitialMs; }
  // Sleeps nextDelayMs() in 50 ms steps, returning early once `stop` is set
  // (a signal handler sets it), so SIGTERM during an outage is prompt.
  void sleep(const std::atomic<bool>& stop);

 private:
  int delay_ms_ = defaults::kReconnectBackoffInitialMs;
};

}  // namespace eq
