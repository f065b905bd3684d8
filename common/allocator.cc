#include "common/allocator.h"

#include <malloc.h>

#include "common/log.h"

namespace eq {

void tuneAllocator() {
  // Fixed values also stop glibc's dynamic adjustment of both thresholds.
  if (mallopt(M_TRIM_THRESHOLD, kKeptFreeBytes) == 0 ||
      mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes) == 0) {
    log::warn("allocator settings refused; running with glibc's defaults");
  }
}

}  // namespace eq
