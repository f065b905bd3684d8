-- EQ Reply schema, version 5: crash-safe accounting (issue 13). Times are
-- Unix milliseconds. Applied after 004_key_epoch.sql, once.
--
-- eq-api charges a unit when it admits a reply call and settles it when the
-- call ends (kept for an answer, refunded for a failure). If eq-api dies in
-- between, someone else must settle it: each charge not yet settled is an
-- open_charges row, written in the transaction that charges and deleted in
-- the transaction that settles, and each eq-api process keeps a heartbeat in
-- api_instances. eq-dispatcher settles the open charges of a process whose
-- heartbeat stopped (or that outlived their deadline), and records what it
-- did in settlements. Whoever deletes the row settles it, so a charge is
-- settled exactly once.

CREATE TABLE api_instances (
  id           TEXT PRIMARY KEY,
  pid          INTEGER NOT NULL,
  started_at   INTEGER NOT NULL,
  heartbeat_at INTEGER NOT NULL
);

-- task_id: an async call whose job the broker has not yet confirmed (the
-- row goes once it has). deadline_at: when the call must have ended (sync:
-- the caller's deadline; async: the publish's confirm timeout).
CREATE TABLE open_charges (
  request_id  TEXT PRIMARY KEY,
  instance_id TEXT NOT NULL,
  account_id  TEXT NOT NULL,
  mode        TEXT NOT NULL CHECK (mode IN ('fast', 'standard', 'perfect')),
  task_id     TEXT,
  deadline_at INTEGER NOT NULL,
  created_at  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX open_charges_instance ON open_charges (instance_id);

-- What a sweeper settled for an eq-api that could not: refunded (a sync call
-- that never got its answer), task_failed (an async task whose job never
-- reached the broker; failing it refunds it and sends its webhook) or kept
-- (the job did reach the broker and its task had already ended: its unit
-- stays charged, or was refunded by the task's own failure).
CREATE TABLE settlements (
  request_id  TEXT PRIMARY KEY,
  instance_id TEXT NOT NULL,
  account_id  TEXT NOT NULL,
  mode        TEXT NOT NULL,
  task_id     TEXT,
  action      TEXT NOT NULL CHECK (action IN ('refunded', 'task_failed', 'kept')),
  reason      TEXT NOT NULL,
  settled_at  INTEGER NOT NULL
);
CREATE INDEX settlements_settled ON settlements (settled_at);
