// The dispatcher's process-local write gate: one mutex, owned by main(),
// that the consumer thread and the sender thread take around their SQLite
// writes.
//
// Why. Both threads write the same database through their own connections.
// When one holds SQLite's write lock, the other's write gets SQLITE_BUSY and
// SQLite's busy handler puts it to sleep for 1, 2, 5, 10... ms before trying
// again, far longer than the lock is held (tens of microseconds). Profiling
// the webhook backlog (docs/benchmarks.md) showed those sleeps were most of
// the time: about 100 deliveries/s with both threads mostly idle. Waiting on
// a mutex instead hands the lock over as soon as it is free. Other processes
// (eq-api, a second dispatcher) still meet SQLite's own locking; the gate only
// stops the two threads of one process from colliding.
//
// Threads: shared by the two threads; a null gate (tests, a single thread,
// and PostgreSQL, which locks rows and lets the threads write side by side)
// locks nothing.
#pragma once

#include <mutex>

namespace eq::dispatch {

inline std::unique_lock<std::mutex> lockDbWrites(std::mutex* gate) {
  return gate != nullptr ? std::unique_lock<std::mutex>(*gate) : std::unique_lock<std::mutex>();
}

}  // namespace eq::dispatch
