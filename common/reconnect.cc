#include "common/reconnect.h"

#include <chrono>
#include <thread>

namespace eq {

void ReconnectBackoff::sleep(const std::atomic<bool>& stop) {
  int ms = nextDelayMs();
  for (int slept = 0; slept < ms && !stop.load(); slept += 50) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50, ms - slept)));
  }
}

}  // namespace eq
