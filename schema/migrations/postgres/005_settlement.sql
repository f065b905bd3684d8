-- PostgreSQL dialect of ../005_settlement.sql.
CREATE TABLE api_instances (
  id           TEXT PRIMARY KEY,
  pid          BIGINT NOT NULL,
  started_at   BIGINT NOT NULL,
  heartbeat_at BIGINT NOT NULL
);

CREATE TABLE open_charges (
  request_id  TEXT PRIMARY KEY,
  instance_id TEXT NOT NULL,
  account_id  TEXT NOT NULL,
  mode        TEXT NOT NULL CHECK (mode IN ('fast', 'standard', 'perfect')),
  task_id     TEXT,
  deadline_at BIGINT NOT NULL,
  created_at  BIGINT NOT NULL
);
CREATE INDEX open_charges_instance ON open_charges (instance_id);

CREATE TABLE settlements (
  request_id  TEXT PRIMARY KEY,
  instance_id TEXT NOT NULL,
  account_id  TEXT NOT NULL,
  mode        TEXT NOT NULL,
  task_id     TEXT,
  action      TEXT NOT NULL CHECK (action IN ('refunded', 'task_failed', 'kept')),
  reason      TEXT NOT NULL,
  settled_at  BIGINT NOT NULL
);
CREATE INDEX settlements_settled ON settlements (settled_at);
