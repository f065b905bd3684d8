// The C allocator's settings for the long-running processes.
//
// glibc gives a thread arena's free top back to the kernel (madvise) as soon
// as it passes the trim threshold, and serves blocks past the mmap threshold
// with mmap/munmap. Both thresholds start small and adapt, so a process that
// parses and frees a 64 KiB RapidJSON pool chunk per message keeps returning
// pages and faulting them back in: every madvise also interrupts the other
// cores to flush their TLBs. In eq-api under sync-reply load that churn cost
// about a tenth of the process's CPU (docs/benchmarks.md).
#pragma once

namespace eq {

// Keeps up to kKeptFreeBytes of freed memory per arena for reuse and serves
// blocks below kMmapThresholdBytes from the heap. Call once at the start of
// main(), before any thread starts.
void tuneAllocator();

inline constexpr int kKeptFreeBytes = 32 << 20;
inline constexpr int kMmapThresholdBytes = 1 << 20;

}  // namespace eq
