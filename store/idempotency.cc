// Idempotency-Key records (docs/contract.md §3).
#include "store/store.h"

#include "common/timefmt.h"
#include "store/rows.h"

namespace eq {

using store::Blob;
using store::Row;
using store::Sql;
using store::Transaction;

// ---------------------------------------------------------------- idempotency

Result<IdempotencyBegin> Store::beginIdempotent(const IdempotencyRequest& req, int64_t now_ms) {
  // One transaction: the read of an existing row and the insert or takeover
  // that follows must not interleave with another process doing the same
  // for a concurrent duplicate, or both would run (and charge). On SQLite
  // the write lock of BEGIN IMMEDIATE keeps them apart; on PostgreSQL the
  // insert of a new key waits for a concurrent one's transaction, and the
  // read of an existing row locks it.
  Transaction tx(*db_);
  if (!tx.status().isOk()) return tx.status();
  if (auto r = exec("purge idempotency keys",
                    Sql{"DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM "
                        "idempotency_keys WHERE created_at <= ? ORDER BY created_at LIMIT ?)",
                        "DELETE FROM idempotency_keys WHERE ctid IN (SELECT ctid FROM "
                        "idempotency_keys WHERE created_at <= ? ORDER BY created_at LIMIT ? "
                        "FOR UPDATE SKIP LOCKED)"},
                    {now_ms - kIdempotencyTtlMs, int64_t{kIdempotencyPurgeBatch}});
      !r.isOk()) {
    return r.status();
  }
  // First use: the row is new.
  auto inserted = exec("insert idempotency key",
                       Sql{"INSERT INTO idempotency_keys (account_id, idem_key, route, "
                           "body_sha256, state, request_id, created_at) "
                           "VALUES (?, ?, ?, ?, 'pending', ?, ?) "
                           "ON CONFLICT (account_id, idem_key) DO NOTHING"},
                       {req.account_id, req.key, req.route, Blob{req.body_sha256},
                        req.request_id, now_ms});
  if (!inserted.isOk()) return inserted.status();
  IdempotencyBegin out;
  if (inserted.value() == 0) {
    bool take = false;
    Result<IdempotencyBegin> existing = readIdempotent(req, now_ms, &take);
    if (!existing.isOk()) return existing.status();
    out = existing.value();
    if (take) {
      // A lapsed record, a pending one whose owner died, or one deleted
      // since the insert saw it: the key is this request's now.
      if (auto r = exec("take over idempotency key",
                        Sql{"INSERT INTO idempotency_keys (account_id, idem_key, route, "
                            "body_sha256, state, request_id, created_at) "
                            "VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?6) "
                            "ON CONFLICT (account_id, idem_key) DO UPDATE SET route = ?3, "
                            "body_sha256 = ?4, state = 'pending', request_id = ?5, "
                            "http_status = NULL, response_body = NULL, created_at = ?6"},
                        {req.account_id, req.key, req.route, Blob{req.body_sha256},
                         req.request_id, now_ms});
          !r.isOk()) {
        return r.status();
      }
      out = IdempotencyBegin{};
    }
  }
  if (Status c = tx.commit(); !c.isOk()) return c;
  return out;
}

Result<IdempotencyBegin> Store::readIdempotent(const IdempotencyRequest& req, int64_t now_ms,
                                               bool* take) {
  IdempotencyBegin out;
  *take = true;  // no row (deleted meanwhile): take the key
  auto r = exec(
      "read idempotency key",
      Sql{"SELECT route, body_sha256, state, http_status, coalesce(response_body, ''), "
          "created_at FROM idempotency_keys WHERE account_id = ? AND idem_key = ?",
          "SELECT route, body_sha256, state, http_status, coalesce(response_body, ''), "
          "created_at FROM idempotency_keys WHERE account_id = ? AND idem_key = ? FOR UPDATE"},
      {req.account_id, req.key}, [&](const Row& row) {
        const int64_t age = now_ms - row.int64(5);
        const bool pending = row.text(2) == "pending";
        *take = false;
        if (age >= kIdempotencyTtlMs || (pending && age >= kIdempotencyLeaseMs)) {
          // A lapsed record (the purge batch did not reach it yet) or a
          // pending one whose owner died: the key is free again.
          *take = true;
        } else if (row.text(0) != req.route) {
          out.state = IdempotencyState::kConflict;
          out.other_route = true;
        } else if (row.blob(1) != req.body_sha256) {
          out.state = IdempotencyState::kConflict;
        } else if (pending) {
          out.state = IdempotencyState::kInProgress;
        } else {
          out.state = IdempotencyState::kReplay;
          out.http_status = static_cast<int>(row.int64(3));
          out.response_body = row.text(4);
        }
      });
  if (!r.isOk()) return r.status();
  return out;
}

Status Store::completeIdempotent(const IdempotencyRequest& req, int http_status,
                                 const std::string& response_body) {
  return exec("complete idempotency key",
              Sql{"UPDATE idempotency_keys SET state = 'done', http_status = ?, response_body = ? "
                  "WHERE account_id = ? AND idem_key = ? AND request_id = ? AND state = 'pending'"},
              {int64_t{http_status}, response_body, req.account_id, req.key, req.request_id})
      .status();
}

Status Store::abandonIdempotent(const IdempotencyRequest& req) {
  return exec("abandon idempotency key",
              Sql{"DELETE FROM idempotency_keys WHERE account_id = ? AND idem_key = ? AND "
                  "request_id = ? AND state = 'pending'"},
              {req.account_id, req.key, req.request_id})
      .status();
}

}  // namespace eq
