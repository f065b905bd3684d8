// Crash-safe accounting: eq-api's instances and open charges, and the
// sweep that settles the charges of an eq-api that died
// (schema/migrations/005_settlement.sql explains the tables).
#include "common/json.h"
#include "store/query.h"
#include "store/store.h"

namespace eq {

using store_detail::Query;

Status Store::registerInstance(const std::string& instance_id, int64_t pid, int64_t now_ms) {
  Query q(prepare(
      "INSERT OR REPLACE INTO api_instances (id, pid, started_at, heartbeat_at) "
      "VALUES (?, ?, ?, ?)"));
  q.bind(1, instance_id).bind(2, pid).bind(3, now_ms).bind(4, now_ms);
  if (q.step() != SQLITE_DONE) return error("register instance");
  noteWritten();
  return Status::ok();
}

Status Store::heartbeatInstance(const std::string& instance_id, int64_t now_ms) {
  Query q(prepare("UPDATE api_instances SET heartbeat_at = ? WHERE id = ?"));
  q.bind(1, now_ms).bind(2, instance_id);
  if (q.step() != SQLITE_DONE) return error("instance heartbeat");
  if (sqlite3_changes(db_) == 1) {
    // An autocommit write that committed: the storage works (this is what
    // clears a disk-full state of an eq-api that gets no other traffic).
    noteWritten();
    return Status::ok();
  }
  // Swept as dead meanwhile (its heartbeat stalled past the limit): come
  // back; what was swept stays settled (closeCharge then finds nothing).
  return registerInstance(instance_id, 0, now_ms);
}

Status Store::removeInstance(const std::string& instance_id) {
  Query q(prepare("DELETE FROM api_instances WHERE id = ?"));
  q.bind(1, instance_id);
  if (q.step() != SQLITE_DONE) return error("remove instance");
  return Status::ok();
}

Status Store::openCharge(const OpenCharge& c) {
  Query q(
      prepare("INSERT INTO open_charges (request_id, instance_id, account_id, mode, task_id, "
              "deadline_at, created_at, job, idem_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  q.bind(1, c.request_id).bind(2, c.instance_id).bind(3, c.account_id).bind(4, c.mode);
  q.bindOptText(5, c.task_id).bind(6, c.deadline_at_ms).bind(7, c.created_at_ms);
  q.bindOptText(8, c.job).bindOptText(9, c.idem_key);
  if (q.step() != SQLITE_DONE) return error("open charge");
  return Status::ok();
}

Status Store::forgetChargeJob(const std::string& request_id) {
  Query q(prepare("UPDATE open_charges SET job = NULL WHERE request_id = ?"));
  q.bind(1, request_id);
  if (q.step() != SQLITE_DONE) return error("forget charge job");
  return Status::ok();
}

Result<bool> Store::closeCharge(const std::string& request_id) {
  Query q(prepare("DELETE FROM open_charges WHERE request_id = ?"));
  q.bind(1, request_id);
  if (q.step() != SQLITE_DONE) return error("close charge");
  return sqlite3_changes(db_) == 1;
}

// Which open charges a sweeper may settle: those of an instance without a
// heartbeat since ?1 (or without a row) and those past their deadline
// before ?2. `c` is open_charges, `i` its api_instances row (LEFT JOIN).
#define EQ_ORPHANED_CHARGE "(i.id IS NULL OR i.heartbeat_at < ?1 OR c.deadline_at < ?2)"

Result<std::vector<Settlement>> Store::settleOrphanedCharges(int64_t now_ms, int64_t stale_ms,
                                                             int64_t grace_ms) {
  std::vector<Settlement> found;
  std::vector<std::string> task_status;  // per found charge; empty: none (sync, or no row)
  {
    // Not the charges orphanedJobs() returns: a queued task whose job was
    // kept is published again by the dispatcher's consumer thread.
    Query q(prepare(
        "SELECT c.request_id, c.instance_id, c.account_id, c.mode, c.task_id, c.deadline_at, "
        "c.created_at, i.id IS NULL OR i.heartbeat_at < ?1, coalesce(t.status, ''), "
        "coalesce(c.idem_key, '') "
        "FROM open_charges c LEFT JOIN api_instances i ON i.id = c.instance_id "
        "LEFT JOIN tasks t ON t.id = c.task_id "
        "WHERE " EQ_ORPHANED_CHARGE
        " AND NOT (c.job IS NOT NULL AND coalesce(t.status, '') = 'queued') "
        "ORDER BY c.created_at LIMIT 500"));
    if (!q.valid()) return error("prepare orphaned charges");
    q.bind(1, now_ms - stale_ms).bind(2, now_ms - grace_ms);
    int rc;
    while ((rc = q.step()) == SQLITE_ROW) {
      Settlement s;
      s.charge = OpenCharge{q.text(0),  q.text(1),  q.text(2), q.text(3), q.text(4),
                            q.int64(5), q.int64(6), "",        q.text(9)};
      s.reason = q.int64(7) != 0 ? "eq-api stopped before the call ended"
                                 : "the call outlived its deadline unsettled";
      found.push_back(std::move(s));
      task_status.push_back(q.text(8));
    }
    if (rc != SQLITE_DONE) return error("read orphaned charges");
  }
  std::vector<Settlement> settled;
  for (size_t n = 0; n < found.size(); ++n) {
    Settlement& s = found[n];
    // Whoever deletes the row settles the charge: eq-api's own settle does
    // the same, so between the two it happens once.
    Result<bool> closed = closeCharge(s.charge.request_id);
    if (!closed.isOk()) return closed.status();
    if (!closed.value()) continue;
    if (s.charge.task_id.empty()) {
      s.action = "refunded";
      if (Status r = refundQuota(s.charge.account_id, s.charge.mode, now_ms); !r.isOk()) return r;
    } else if (task_status[n] == "queued") {
      // Opened without its job (by an eq-api older than schema version 7):
      // whether the job reached the broker is unknown, and it cannot be
      // published again. Failing the task ends it and refunds it; should the
      // job still run, its outcome changes nothing (transitions are guarded
      // by state) and the record says why.
      Result<bool> failed = markTaskFailed(
          s.charge.task_id, 503,
          "not accepted: eq-api stopped before it learned whether the broker took the job", now_ms);
      if (!failed.isOk()) return failed.status();
      s.task_changed = failed.value();
      s.action = "task_failed";
      s.reason += "; whether its job reached the broker is unknown, and the job was not kept";
    } else {
      // The task has left `queued` (a worker reported on it, or the job was
      // dead-lettered): its job reached the broker, and the task's own
      // outcome settles the unit (kept if it succeeds, refunded if it fails).
      s.action = "kept";
      s.reason += task_status[n].empty() ? "; its task no longer exists"
                                         : "; its job reached the broker (the task is " +
                                               task_status[n] + "), whose outcome settles the unit";
    }
    if (Status r = recordSettlement(s, now_ms); !r.isOk()) return r;
    if (Status r = settleIdempotencyOf(s); !r.isOk()) return r;
    settled.push_back(std::move(s));
  }
  return settled;
}

Result<std::vector<OpenCharge>> Store::orphanedJobs(int64_t now_ms, int64_t stale_ms,
                                                    int64_t grace_ms, int limit) {
  Query q(
      prepare("SELECT c.request_id, c.instance_id, c.account_id, c.mode, c.task_id, c.deadline_at, "
              "c.created_at, c.job, coalesce(c.idem_key, '') "
              "FROM open_charges c LEFT JOIN api_instances i ON i.id = c.instance_id "
              "JOIN tasks t ON t.id = c.task_id "
              "WHERE " EQ_ORPHANED_CHARGE " AND c.job IS NOT NULL AND t.status = 'queued' "
              "ORDER BY c.created_at LIMIT ?3"));
  if (!q.valid()) return error("prepare orphaned jobs");
  q.bind(1, now_ms - stale_ms).bind(2, now_ms - grace_ms).bind(3, int64_t{limit});
  std::vector<OpenCharge> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    out.push_back(OpenCharge{q.text(0), q.text(1), q.text(2), q.text(3), q.text(4), q.int64(5),
                             q.int64(6), q.text(7), q.text(8)});
  }
  if (rc != SQLITE_DONE) return error("read orphaned jobs");
  return out;
}

#undef EQ_ORPHANED_CHARGE

Result<bool> Store::settleRepublished(const OpenCharge& charge, int64_t now_ms) {
  Result<bool> closed = closeCharge(charge.request_id);
  if (!closed.isOk() || !closed.value()) return closed;
  Settlement s;
  s.charge = charge;
  s.action = "republished";
  s.reason =
      "eq-api did not settle the call, and whether its job reached the broker is unknown: "
      "published again (it may run twice; its task ends once, charged once)";
  if (Status r = recordSettlement(s, now_ms); !r.isOk()) return r;
  if (Status r = settleIdempotencyOf(s); !r.isOk()) return r;
  return true;
}

Result<bool> Store::settleUnpublishable(const OpenCharge& charge, int64_t now_ms,
                                        const std::string& reason) {
  Result<bool> closed = closeCharge(charge.request_id);
  if (!closed.isOk() || !closed.value()) return closed;
  Settlement s;
  s.charge = charge;
  s.action = "task_failed";
  s.reason = reason;
  // Failing a task refunds it; a no-op if the task left `queued` meanwhile
  // (a copy of the job reached a worker after all: its outcome settles it).
  Result<bool> failed = markTaskFailed(charge.task_id, 503, "not accepted: " + reason, now_ms);
  if (!failed.isOk()) return failed.status();
  s.task_changed = failed.value();
  if (!s.task_changed) s.action = "kept";
  if (Status r = recordSettlement(s, now_ms); !r.isOk()) return r;
  if (Status r = settleIdempotencyOf(s); !r.isOk()) return r;
  return true;
}

Status Store::settleIdempotencyOf(const Settlement& s) {
  if (s.charge.idem_key.empty()) return Status::ok();
  // Matched by the request that opened the record: a record some later
  // request took over (its lease ran out) is that request's to settle.
  const IdempotencyRequest req{s.charge.account_id, s.charge.idem_key, "", "", s.charge.request_id};
  if (s.action == "kept" || s.action == "republished") {
    return completeIdempotent(req, 200, json::asyncAcceptedBody(s.charge.task_id));
  }
  return abandonIdempotent(req);
}

Status Store::recordSettlement(const Settlement& s, int64_t now_ms) {
  Query rec(prepare(
      "INSERT OR REPLACE INTO settlements (request_id, instance_id, account_id, mode, task_id, "
      "action, reason, settled_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"));
  rec.bind(1, s.charge.request_id).bind(2, s.charge.instance_id).bind(3, s.charge.account_id);
  rec.bind(4, s.charge.mode).bindOptText(5, s.charge.task_id).bind(6, s.action);
  rec.bind(7, s.reason).bind(8, now_ms);
  if (rec.step() != SQLITE_DONE) return error("record settlement");
  return Status::ok();
}

Result<int> Store::purgeSettlementsBefore(int64_t cutoff_ms, int limit) {
  int n = 0;
  {
    Query q(prepare(
        "DELETE FROM settlements WHERE request_id IN "
        "(SELECT request_id FROM settlements WHERE settled_at < ? LIMIT ?)"));
    q.bind(1, cutoff_ms).bind(2, int64_t{limit});
    if (q.step() != SQLITE_DONE) return error("purge settlements");
    n += sqlite3_changes(db_);
  }
  // An instance whose heartbeat is that old has no open charge left (the
  // sweep settled them long ago): forget it.
  Query q(prepare(
      "DELETE FROM api_instances WHERE heartbeat_at < ? AND NOT EXISTS "
      "(SELECT 1 FROM open_charges c WHERE c.instance_id = api_instances.id)"));
  q.bind(1, cutoff_ms);
  if (q.step() != SQLITE_DONE) return error("purge instances");
  return n;
}

}  // namespace eq
