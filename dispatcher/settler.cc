#include "dispatcher/settler.h"

#include "common/log.h"

namespace eq::dispatch {

int ChargeSettler::step(int64_t now_ms) {
  if (now_ms < next_run_ms_) return 0;
  next_run_ms_ = now_ms + opts_.interval_ms;
  if (Status s = store_.begin(); !s.isOk()) {
    log::warn("charge settler: database busy; next sweep later", {{"error", s.msg()}});
    return 0;
  }
  Result<std::vector<Settlement>> settled =
      store_.settleOrphanedCharges(now_ms, opts_.stale_ms, opts_.grace_ms);
  Status s = settled.status();
  // A failed task with a webhook gets its task.failed delivery in the same
  // transaction, as the consumer thread does for any failed task.
  if (s.isOk()) {
    for (const Settlement& st : settled.value()) {
      if (!st.task_changed) continue;
      Result<std::optional<TaskRecord>> task = store_.task(st.charge.task_id);
      if (!task.isOk()) {
        s = task.status();
        break;
      }
      if (!task.value() || task.value()->webhook_url.empty()) continue;
      Result<DeliveryRecord> d =
          store_.createDelivery(st.charge.task_id, task.value()->webhook_url, "task.failed", now_ms);
      if (!d.isOk()) {
        s = d.status();
        break;
      }
    }
  }
  if (s.isOk()) {
    Result<int> purged =
        store_.purgeSettlementsBefore(now_ms - opts_.settlement_retention_ms, 500);
    s = purged.status();
  }
  if (s.isOk()) s = store_.commit();
  if (!s.isOk()) {
    store_.rollback();
    log::error("charge settler: sweep rolled back; retried at the next one",
               {{"error", s.msg()}});
    return 0;
  }
  for (const Settlement& st : settled.value()) {
    log::warn("settled a charge eq-api left open",
              {{"request_id", st.charge.request_id},
               {"instance", st.charge.instance_id},
               {"account_id", st.charge.account_id},
               {"mode", st.charge.mode},
               {"task_id", st.charge.task_id},
               {"action", st.action},
               {"reason", st.reason}});
  }
  auto n = static_cast<int>(settled.value().size());
  settled_total_ += n;
  return n;
}

}  // namespace eq::dispatch
