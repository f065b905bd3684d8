// Crash-safe accounting: eq-api's instances and open charges, and the
// sweep that settles the charges of an eq-api that died
// (schema/migrations/005_settlement.sql explains the tables).
#include <algorithm>
#include <tuple>

#include "common/json.h"
#include "store/rows.h"
#include "store/store.h"

namespace eq {

using store::Row;
using store::Sql;
using store::Transaction;
using store_detail::optText;

namespace {

OpenCharge chargeFromRow(const Row& r, bool with_job) {
  return OpenCharge{std::string(r.text(0)),
                    std::string(r.text(1)),
                    std::string(r.text(2)),
                    std::string(r.text(3)),
                    std::string(r.text(4)),
                    r.int64(5),
                    r.int64(6),
                    with_job ? std::string(r.text(7)) : std::string(),
                    std::string(r.text(with_job ? 8 : 9))};
}

}  // namespace

Status Store::registerInstance(const std::string& instance_id, int64_t pid, int64_t now_ms) {
  // A write outside a transaction that commits: it also tells that the
  // storage works (store::Db::storageFailing).
  return exec("register instance",
              Sql{"INSERT OR REPLACE INTO api_instances (id, pid, started_at, heartbeat_at) "
                  "VALUES (?, ?, ?, ?)",
                  "INSERT INTO api_instances (id, pid, started_at, heartbeat_at) "
                  "VALUES (?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET pid = excluded.pid, "
                  "started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at"},
              {instance_id, pid, now_ms, now_ms})
      .status();
}

Status Store::heartbeatInstance(const std::string& instance_id, int64_t now_ms) {
  auto r = exec("instance heartbeat",
                Sql{"UPDATE api_instances SET heartbeat_at = ? WHERE id = ?"},
                {now_ms, instance_id});
  if (!r.isOk()) return r.status();
  // An autocommit write that committed clears a storage failure (this is
  // what clears a disk-full state of an eq-api that gets no other traffic).
  if (r.value() == 1) return Status::ok();
  // Swept as dead meanwhile (its heartbeat stalled past the limit): come
  // back; what was swept stays settled (closeCharge then finds nothing).
  return registerInstance(instance_id, 0, now_ms);
}

Status Store::removeInstance(const std::string& instance_id) {
  return exec("remove instance", Sql{"DELETE FROM api_instances WHERE id = ?"}, {instance_id})
      .status();
}

Status Store::openCharge(const OpenCharge& c) {
  return queue("open charge",
               Sql{"INSERT INTO open_charges (request_id, instance_id, account_id, mode, task_id, "
                   "deadline_at, created_at, job, idem_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"},
               {c.request_id, c.instance_id, c.account_id, c.mode, optText(c.task_id),
                c.deadline_at_ms, c.created_at_ms, optText(c.job), optText(c.idem_key)});
}

Status Store::forgetChargeJob(const std::string& request_id) {
  return exec("forget charge job",
              Sql{"UPDATE open_charges SET job = NULL WHERE request_id = ?"}, {request_id})
      .status();
}

Result<bool> Store::closeCharge(const std::string& request_id) {
  auto r = exec("close charge", Sql{"DELETE FROM open_charges WHERE request_id = ?"},
                {request_id});
  if (!r.isOk()) return r.status();
  return r.value() == 1;
}

Result<std::vector<std::string>> Store::closeCharges(const std::vector<std::string>& request_ids) {
  std::vector<std::string> closed;
  if (db_->engine() == store::DbEngine::kSqlite) {
    // A statement costs no round trip here: one each.
    for (const std::string& id : request_ids) {
      Result<bool> c = closeCharge(id);
      if (!c.isOk()) return c.status();
      if (c.value()) closed.push_back(id);
    }
    return closed;
  }
  auto r = exec("close charges",
                Sql{"",
                    "DELETE FROM open_charges WHERE request_id = ANY ($1::text[]) "
                    "RETURNING request_id"},
                {store_detail::textArray(request_ids)},
                [&](const Row& row) { closed.emplace_back(row.text(0)); });
  if (!r.isOk()) return r.status();
  return closed;
}

// Which open charges a sweeper may settle: those of an instance without a
// heartbeat since ?1 (or without a row) and those past their deadline
// before ?2. `c` is open_charges, `i` its api_instances row (LEFT JOIN).
#define EQ_ORPHANED_CHARGE "(i.id IS NULL OR i.heartbeat_at < ?1 OR c.deadline_at < ?2)"

// A statement whose PostgreSQL text adds a locking clause to the SQLite one
// (`locking`: "" or " FOR UPDATE OF c SKIP LOCKED"), its placeholders
// numbered as they would be for a text written once.
#define EQ_PG_LOCKING(statement) \
  store::numberPlaceholders(statement(" FOR UPDATE OF c SKIP LOCKED"))

// Not the charges claimOrphanedJobs() takes: a queued task whose job was
// kept is published again by the dispatcher's consumer thread. A sweep
// settles at most the 500 oldest.
#define EQ_ORPHANED_CHARGES_FROM(accounts)                                      \
  "FROM open_charges c LEFT JOIN api_instances i ON i.id = c.instance_id "      \
  "LEFT JOIN tasks t ON t.id = c.task_id "                                      \
  "WHERE " EQ_ORPHANED_CHARGE                                                   \
  " AND NOT (c.job IS NOT NULL AND coalesce(t.status, '') = 'queued')" accounts \
  " ORDER BY c.created_at, c.request_id LIMIT 500"
#define EQ_READ_ORPHANED_CHARGES(accounts, locking)                                     \
  "SELECT c.request_id, c.instance_id, c.account_id, c.mode, coalesce(c.task_id, ''), " \
  "c.deadline_at, c.created_at, i.id IS NULL OR i.heartbeat_at < ?1, "                  \
  "coalesce(t.status, ''), coalesce(c.idem_key, '') " EQ_ORPHANED_CHARGES_FROM(accounts) locking
// On PostgreSQL only the charges of the accounts locked (?3), so that the
// read holds no row it then leaves.
const std::string kReadOrphanedChargesPg = store::numberPlaceholders(EQ_READ_ORPHANED_CHARGES(
    " AND c.account_id = ANY (?3::text[])", " FOR UPDATE OF c SKIP LOCKED"));

Result<std::vector<Settlement>> Store::settleOrphanedCharges(int64_t now_ms, int64_t stale_ms,
                                                             int64_t grace_ms) {
  // The read and the settlements in one transaction (a savepoint inside the
  // caller's). Whoever deletes an open charge settles it (closeCharge
  // below), so a charge is settled once however many sweepers run. The
  // read locks the charges it returns (on PostgreSQL: FOR UPDATE OF c SKIP
  // LOCKED) until the transaction ends, and passes over those another
  // sweeper holds. Before it, the sweep takes the locks of the accounts
  // those charges belong to (lockAccounts), in the one order every writer
  // of accounts takes them: an eq-api batch holds its accounts' locks when
  // it closes its calls' charges, so a sweep that locked a charge first and
  // then waited for its account would deadlock with it. On SQLite the
  // transaction holds the write lock: one sweeper at a time. eq-api's own
  // settle of a call the sweep locked waits for the sweep's commit and then
  // finds the charge closed.
  Transaction tx(*db_);
  if (!tx.status().isOk()) return tx.status();
  const std::vector<int64_t> since{now_ms - stale_ms, now_ms - grace_ms};
  std::vector<std::string> accounts;
  auto a =
      exec("read orphaned charges' accounts",
           Sql{"SELECT DISTINCT account_id FROM (SELECT c.account_id " EQ_ORPHANED_CHARGES_FROM(
               "") ") AS o"},
           {since[0], since[1]}, [&](const Row& row) { accounts.emplace_back(row.text(0)); });
  if (!a.isOk()) return a.status();
  if (accounts.empty()) return std::vector<Settlement>{};
  if (Status l = lockAccounts(accounts); !l.isOk()) return l;
  std::vector<Settlement> found;
  std::vector<std::string> task_status;  // per found charge; empty: none (sync, or no row)
  const std::string locked_accounts = store_detail::textArray(accounts);
  const auto read_charge = [&](const Row& row) {
    Settlement s;
    s.charge = chargeFromRow(row, false);
    // Orphaned since the first read (its account not locked):
    // the next sweep's.
    if (std::find(accounts.begin(), accounts.end(), s.charge.account_id) == accounts.end()) {
      return;
    }
    s.reason = row.int64(7) != 0 ? "eq-api stopped before the call ended"
                                 : "the call outlived its deadline unsettled";
    found.push_back(std::move(s));
    task_status.emplace_back(row.text(8));
  };
  // On PostgreSQL the locking read takes only the locked accounts' charges
  // (SQLite holds no row locks: the check above is enough there).
  auto r = db_->engine() == store::DbEngine::kPostgres
               ? exec("read orphaned charges", Sql{"", kReadOrphanedChargesPg},
                      {since[0], since[1], locked_accounts}, read_charge)
               : exec("read orphaned charges", Sql{EQ_READ_ORPHANED_CHARGES("", "")},
                      {since[0], since[1]}, read_charge);
  if (!r.isOk()) return r.status();
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
      if (Status st =
              refundQuota(s.charge.account_id, s.charge.mode, s.charge.created_at_ms, now_ms);
          !st.isOk()) {
        return st;
      }
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
    if (Status st = recordSettlement(s, now_ms); !st.isOk()) return st;
    if (Status st = settleIdempotencyOf(s); !st.isOk()) return st;
    settled.push_back(std::move(s));
  }
  if (Status c = tx.commit(); !c.isOk()) return c;
  return settled;
}

// The orphaned charges whose job is to be published again: kept with the
// charge, its task still queued. `c` and `i` as above, `t` the task.
#define EQ_ORPHANED_JOB_FROM                                               \
  "FROM open_charges c LEFT JOIN api_instances i ON i.id = c.instance_id " \
  "JOIN tasks t ON t.id = c.task_id WHERE " EQ_ORPHANED_CHARGE             \
  " AND c.job IS NOT NULL AND t.status = 'queued'"

#define EQ_CLAIM_ORPHANED_JOBS(locking)                                       \
  "UPDATE open_charges SET republish_until = ?5 WHERE request_id IN (SELECT " \
  "c.request_id " EQ_ORPHANED_JOB_FROM                                        \
  " AND (c.republish_until IS NULL OR c.republish_until <= ?3) "              \
  "ORDER BY c.created_at, c.request_id LIMIT ?4" locking                      \
  ") RETURNING request_id, instance_id, account_id, mode, task_id, "          \
  "deadline_at, created_at, job, coalesce(idem_key, '')"
const std::string kClaimOrphanedJobsPg = EQ_PG_LOCKING(EQ_CLAIM_ORPHANED_JOBS);

Result<bool> Store::anyOrphanedJob(int64_t now_ms, int64_t stale_ms, int64_t grace_ms) {
  bool any = false;
  auto r = exec("read orphaned jobs", Sql{"SELECT 1 " EQ_ORPHANED_JOB_FROM " LIMIT 1"},
                {now_ms - stale_ms, now_ms - grace_ms}, [&](const Row&) { any = true; });
  if (!r.isOk()) return r.status();
  return any;
}

Result<std::vector<OpenCharge>> Store::claimOrphanedJobs(int64_t now_ms, int64_t stale_ms,
                                                         int64_t grace_ms, int64_t lease_until_ms,
                                                         int limit) {
  // Each row taken gets a lease (republish_until) in the statement that
  // picks it, so two dispatchers never take the same job while the lease
  // runs: on PostgreSQL the rows are picked FOR UPDATE SKIP LOCKED (another
  // dispatcher's claim in progress is passed over, not waited for); on
  // SQLite the statement holds the write lock.
  std::vector<OpenCharge> out;
  Transaction tx(*db_);
  if (!tx.status().isOk()) return tx.status();
  auto r = exec("claim orphaned jobs", Sql{EQ_CLAIM_ORPHANED_JOBS(""), kClaimOrphanedJobsPg},
                {now_ms - stale_ms, now_ms - grace_ms, now_ms, int64_t{limit}, lease_until_ms},
                [&](const Row& row) { out.push_back(chargeFromRow(row, true)); });
  if (!r.isOk()) return r.status();
  if (Status c = tx.commit(); !c.isOk()) return c;
  // RETURNING gives the rows in no set order: oldest first, as picked.
  std::sort(out.begin(), out.end(), [](const OpenCharge& x, const OpenCharge& y) {
    return std::tie(x.created_at_ms, x.request_id) < std::tie(y.created_at_ms, y.request_id);
  });
  return out;
}

Status Store::releaseOrphanedJobs(const std::vector<std::string>& request_ids,
                                  int64_t lease_until_ms) {
  // Only claims that are still this caller's (the lease it set): one that
  // ended and was taken by another dispatcher is that one's now.
  if (request_ids.empty()) return Status::ok();
  if (db_->engine() == store::DbEngine::kPostgres) {
    return exec("release orphaned jobs",
                Sql{"",
                    "UPDATE open_charges SET republish_until = NULL "
                    "WHERE request_id = ANY ($1::text[]) AND republish_until = $2"},
                {store_detail::textArray(request_ids), lease_until_ms})
        .status();
  }
  // SQLite: a statement costs no round trip; one each, in one transaction.
  Transaction tx(*db_);
  if (!tx.status().isOk()) return tx.status();
  for (const std::string& id : request_ids) {
    auto r = exec("release orphaned job",
                  Sql{"UPDATE open_charges SET republish_until = NULL "
                      "WHERE request_id = ? AND republish_until = ?"},
                  {id, lease_until_ms});
    if (!r.isOk()) return r.status();
  }
  return tx.commit();
}

#undef EQ_CLAIM_ORPHANED_JOBS
#undef EQ_ORPHANED_JOB_FROM
#undef EQ_READ_ORPHANED_CHARGES
#undef EQ_ORPHANED_CHARGES_FROM
#undef EQ_PG_LOCKING
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
  return exec("record settlement",
              Sql{"INSERT OR REPLACE INTO settlements (request_id, instance_id, account_id, mode, "
                  "task_id, action, reason, settled_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                  "INSERT INTO settlements (request_id, instance_id, account_id, mode, task_id, "
                  "action, reason, settled_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                  "ON CONFLICT (request_id) DO UPDATE SET instance_id = excluded.instance_id, "
                  "account_id = excluded.account_id, mode = excluded.mode, "
                  "task_id = excluded.task_id, action = excluded.action, "
                  "reason = excluded.reason, settled_at = excluded.settled_at"},
              {s.charge.request_id, s.charge.instance_id, s.charge.account_id, s.charge.mode,
               optText(s.charge.task_id), s.action, s.reason, now_ms})
      .status();
}

Result<int> Store::purgeSettlementsBefore(int64_t cutoff_ms, int limit) {
  auto r = exec("purge settlements",
                // SKIP LOCKED: two sweepers on PostgreSQL purge disjoint rows.
                Sql{"DELETE FROM settlements WHERE request_id IN "
                    "(SELECT request_id FROM settlements WHERE settled_at < ? LIMIT ?)",
                    "DELETE FROM settlements WHERE request_id IN "
                    "(SELECT request_id FROM settlements WHERE settled_at < ? LIMIT ? "
                    "FOR UPDATE SKIP LOCKED)"},
                {cutoff_ms, int64_t{limit}});
  if (!r.isOk()) return r.status();
  // An instance whose heartbeat is that old has no open charge left (the
  // sweep settled them long ago): forget it.
  if (auto i = exec("purge instances",
                    Sql{"DELETE FROM api_instances WHERE heartbeat_at < ? AND NOT EXISTS "
                        "(SELECT 1 FROM open_charges c WHERE c.instance_id = api_instances.id)"},
                    {cutoff_ms});
      !i.isOk()) {
    return i.status();
  }
  return static_cast<int>(r.value());
}

}  // namespace eq
