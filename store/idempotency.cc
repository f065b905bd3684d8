// Idempotency-Key records (PRODUCT.md §3).
#include "store/store.h"

#include "common/timefmt.h"
#include "store/query.h"

namespace eq {

using store_detail::Query;

// ---------------------------------------------------------------- idempotency

Result<IdempotencyBegin> Store::beginIdempotent(const IdempotencyRequest& req, int64_t now_ms) {
  // IMMEDIATE: the read of an existing row and the insert or takeover that
  // follows must not interleave with another process doing the same for a
  // concurrent duplicate, or both would run (and charge).
  if (Status s = begin(); !s.isOk()) return s;
  IdempotencyBegin out;
  Status s;
  {
    Query purge(prepare(
        "DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys "
        "WHERE created_at <= ? ORDER BY created_at LIMIT ?)"));
    purge.bind(1, now_ms - kIdempotencyTtlMs).bind(2, int64_t{kIdempotencyPurgeBatch});
    if (purge.step() != SQLITE_DONE) s = error("purge idempotency keys");
  }
  bool take = false;  // insert or take over the row
  if (s.isOk()) {
    Query q(prepare(
        "SELECT route, body_sha256, state, http_status, coalesce(response_body, ''), created_at "
        "FROM idempotency_keys WHERE account_id = ? AND idem_key = ?"));
    q.bind(1, req.account_id).bind(2, req.key);
    int rc = q.step();
    if (rc == SQLITE_DONE) {
      take = true;
    } else if (rc != SQLITE_ROW) {
      s = error("read idempotency key");
    } else {
      int64_t age = now_ms - q.int64(5);
      bool pending = q.text(2) == "pending";
      if (age >= kIdempotencyTtlMs || (pending && age >= kIdempotencyLeaseMs)) {
        // A lapsed record (the purge batch did not reach it yet) or a pending
        // one whose owner died: the key is free again.
        take = true;
      } else if (q.text(0) != req.route) {
        out.state = IdempotencyState::kConflict;
        out.other_route = true;
      } else if (q.blob(1) != req.body_sha256) {
        out.state = IdempotencyState::kConflict;
      } else if (pending) {
        out.state = IdempotencyState::kInProgress;
      } else {
        out.state = IdempotencyState::kReplay;
        out.http_status = static_cast<int>(q.int64(3));
        out.response_body = q.text(4);
      }
    }
  }
  if (s.isOk() && take) {
    Query ins(prepare(
        "INSERT INTO idempotency_keys (account_id, idem_key, route, body_sha256, state, "
        "request_id, created_at) VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?6) "
        "ON CONFLICT (account_id, idem_key) DO UPDATE SET route = ?3, body_sha256 = ?4, "
        "state = 'pending', request_id = ?5, http_status = NULL, response_body = NULL, "
        "created_at = ?6"));
    ins.bind(1, req.account_id).bind(2, req.key).bind(3, req.route);
    ins.bindBlob(4, req.body_sha256).bind(5, req.request_id).bind(6, now_ms);
    if (ins.step() != SQLITE_DONE) s = error("insert idempotency key");
    out.state = IdempotencyState::kStarted;
  }
  if (!s.isOk()) {
    rollback();
    return s;
  }
  if (Status c = commit(); !c.isOk()) return c;
  return out;
}

Status Store::completeIdempotent(const IdempotencyRequest& req, int http_status,
                                 const std::string& response_body) {
  Query q(prepare(
      "UPDATE idempotency_keys SET state = 'done', http_status = ?, response_body = ? "
      "WHERE account_id = ? AND idem_key = ? AND request_id = ? AND state = 'pending'"));
  q.bind(1, int64_t{http_status}).bind(2, response_body).bind(3, req.account_id);
  q.bind(4, req.key).bind(5, req.request_id);
  if (q.step() != SQLITE_DONE) return error("complete idempotency key");
  return Status::ok();
}

Status Store::abandonIdempotent(const IdempotencyRequest& req) {
  Query q(prepare(
      "DELETE FROM idempotency_keys WHERE account_id = ? AND idem_key = ? AND request_id = ? "
      "AND state = 'pending'"));
  q.bind(1, req.account_id).bind(2, req.key).bind(3, req.request_id);
  if (q.step() != SQLITE_DONE) return error("abandon idempotency key");
  return Status::ok();
}

}  // namespace eq
