// Retention: bounded purges of old rows, run by eq-dispatcher.
#include "store/store.h"

#include "common/timefmt.h"
#include "store/rows.h"

namespace eq {

using store::Row;
using store::Sql;
using store::Transaction;

// ---------------------------------------------------------------- retention

Result<int> Store::purgeTasksBefore(int64_t cutoff_ms, int limit) {
  Transaction tx(*db_);
  if (!tx.status().isOk()) return tx.status();
  if (auto l = exec("take the retention lock", store_detail::kTakeRetentionLock,
                    {store_detail::kRetentionLock});
      !l.isOk()) {
    return l.status();
  }
  std::vector<std::string> ids;
  auto r =
      exec("select expired tasks",
           Sql{"SELECT id FROM tasks WHERE created_at < ? AND NOT EXISTS (SELECT 1 FROM "
               "deliveries d WHERE d.task_id = tasks.id AND d.status = 'pending') "
               "ORDER BY created_at LIMIT ?"},
           {cutoff_ms, int64_t{limit}}, [&](const Row& row) { ids.emplace_back(row.text(0)); });
  if (!r.isOk()) return r.status();
  // Children first: foreign keys are enforced.
  for (const std::string& id : ids) {
    if (auto a = exec("purge attempts",
                      Sql{"DELETE FROM delivery_attempts WHERE delivery_id IN "
                          "(SELECT id FROM deliveries WHERE task_id = ?)"},
                      {id});
        !a.isOk()) {
      return a.status();
    }
    if (auto d = exec("purge delivery", Sql{"DELETE FROM deliveries WHERE task_id = ?"}, {id});
        !d.isOk()) {
      return d.status();
    }
    if (auto t = exec("purge task", Sql{"DELETE FROM tasks WHERE id = ?"}, {id}); !t.isOk()) {
      return t.status();
    }
  }
  if (Status c = tx.commit(); !c.isOk()) return c;
  return static_cast<int>(ids.size());
}

Result<int> Store::purgeIdempotencyBefore(int64_t cutoff_ms, int limit) {
  auto r = exec("purge idempotency keys",
                Sql{"DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM "
                    "idempotency_keys WHERE created_at < ? ORDER BY created_at LIMIT ?)",
                    "DELETE FROM idempotency_keys WHERE ctid IN (SELECT ctid FROM "
                    "idempotency_keys WHERE created_at < ? ORDER BY created_at LIMIT ? "
                    "FOR UPDATE SKIP LOCKED)"},
                {cutoff_ms, int64_t{limit}});
  if (!r.isOk()) return r.status();
  return static_cast<int>(r.value());
}

Result<int> Store::purgeRateCountersBefore(int64_t cutoff_ms, int limit) {
  // Each key's newest window among those going, kept beside the key first
  // (key_last_used): its "last used" outlives the windows (accountKeys).
  // Only a newer one replaces what is kept, as the batches below take old
  // windows in no order; a purge's later batches find nothing newer. (The
  // developer center's playground counts under "portal:" names, no key's.)
  auto kept = exec("keep when keys were last used",
                   Sql{"INSERT INTO key_last_used (key_id, at) SELECT key_id, max(window_start) "
                       "FROM rate_counters WHERE window_start < ? AND key_id IN (SELECT id FROM "
                       "api_keys) GROUP BY key_id "
                       "ON CONFLICT (key_id) DO UPDATE SET at = excluded.at "
                       "WHERE excluded.at > key_last_used.at"},
                   {cutoff_ms});
  if (!kept.isOk()) return kept.status();
  auto r = exec("purge rate counters",
                // SKIP LOCKED: windows an hour old are no longer counted; two
                // purgers on PostgreSQL delete disjoint batches.
                Sql{"DELETE FROM rate_counters WHERE (key_id, window_start) IN (SELECT key_id, "
                    "window_start FROM rate_counters WHERE window_start < ? LIMIT ?)",
                    "DELETE FROM rate_counters WHERE (key_id, window_start) IN (SELECT key_id, "
                    "window_start FROM rate_counters WHERE window_start < ? LIMIT ? "
                    "FOR UPDATE SKIP LOCKED)"},
                {cutoff_ms, int64_t{limit}});
  if (!r.isOk()) return r.status();
  return static_cast<int>(r.value());
}

}  // namespace eq
