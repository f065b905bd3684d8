-- EQ Reply schema, version 7: an async call's job kept with its open charge
-- (issue 13). Applied after 006_portal.sql, once.
--
-- eq-api closes an async call's open charge only after the broker confirmed
-- its job. If eq-api dies before that close, nobody can tell whether the job
-- reached the queue: failing the task (what version 5 did) is wrong whenever
-- it did, because a worker then runs it for nothing and its result
-- contradicts the failed record. So the open charge keeps the job as
-- published, and eq-dispatcher publishes it again once the task is found
-- orphaned and still queued: the job may run twice, its task still ends
-- once (transitions are guarded by state) and is charged once. The job
-- (message and context) stays in the row only until the charge is closed,
-- milliseconds for a live eq-api.
ALTER TABLE open_charges ADD COLUMN job TEXT;
-- The call's Idempotency-Key, when it had one: a sweeper that settles the
-- charge settles the key's record too (Store::settleOrphanedCharges), so a
-- client retrying with the key gets the task it was charged for, or runs
-- afresh when the call was refunded, instead of 409 "in progress" and then,
-- once the record's lease ran out, a second charge.
ALTER TABLE open_charges ADD COLUMN idem_key TEXT;

-- settlements gains the action `republished`. SQLite cannot change a CHECK
-- constraint in place: the table is rebuilt (no foreign key refers to it).
--   refunded     a sync call that never got its answer;
--   task_failed  an async task still queued whose job was not kept (charged
--                by an eq-api older than this version): failed, refunded;
--   kept         an async task that had left `queued`: its job reached the
--                broker, and the task's own outcome settles the unit;
--   republished  an async task still queued: its job was published again.
CREATE TABLE settlements_v7 (
  request_id  TEXT PRIMARY KEY,
  instance_id TEXT NOT NULL,
  account_id  TEXT NOT NULL,
  mode        TEXT NOT NULL,
  task_id     TEXT,
  action      TEXT NOT NULL CHECK (action IN ('refunded', 'task_failed', 'kept', 'republished')),
  reason      TEXT NOT NULL,
  settled_at  INTEGER NOT NULL
);
INSERT INTO settlements_v7 SELECT request_id, instance_id, account_id, mode, task_id, action,
  reason, settled_at FROM settlements;
DROP TABLE settlements;
ALTER TABLE settlements_v7 RENAME TO settlements;
CREATE INDEX settlements_settled ON settlements (settled_at);
