// Fuzz target: decoding of what arrives from the broker (jobs, sync
// results, task events). A queue is an input like any other; whatever
// decodes must encode and decode again to the same thing.
#include <cstdint>
#include <string_view>

#include "common/messages.h"
#include "common/utf8.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  eq::Result<eq::msg::Job> job = eq::msg::decodeJob(body);
  if (job.isOk()) {
    eq::Result<eq::msg::Job> again = eq::msg::decodeJob(eq::msg::encodeJob(job.value()));
    FUZZ_CHECK(again.isOk());
    FUZZ_CHECK(again.value().message == job.value().message);
    FUZZ_CHECK(again.value().task_id == job.value().task_id);
    FUZZ_CHECK(again.value().deadline_ms == job.value().deadline_ms);
    FUZZ_CHECK(eq::utf8::isValid(job.value().message));
  }
  std::string salvaged = eq::msg::salvageTaskId(body);
  FUZZ_CHECK(salvaged.empty() || salvaged.size() == 30);
  eq::Result<eq::msg::SyncResult> result = eq::msg::decodeSyncResult(body);
  if (result.isOk()) {
    FUZZ_CHECK(eq::msg::decodeSyncResult(eq::msg::encodeSyncResult(result.value())).isOk());
  }
  eq::Result<eq::msg::TaskEvent> event = eq::msg::decodeTaskEvent(body);
  if (event.isOk()) {
    eq::Result<eq::msg::TaskEvent> again =
        eq::msg::decodeTaskEvent(eq::msg::encodeTaskEvent(event.value()));
    FUZZ_CHECK(again.isOk());
    FUZZ_CHECK(again.value().task_id == event.value().task_id);
    FUZZ_CHECK(again.value().event == event.value().event);
  }
  return 0;
}
