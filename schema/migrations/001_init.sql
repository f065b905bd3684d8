-- EQ Reply schema, version 1. Times are Unix milliseconds (UTC).
-- Applied by every process at start-up through common/store.cc, inside one
-- transaction, and recorded in schema_migrations.

-- An account holds the quota, the webhook secret and the settings; keys are
-- credentials of an account, so rotating a key keeps quota and tasks.
CREATE TABLE accounts (
  id                  TEXT PRIMARY KEY,
  name                TEXT NOT NULL,
  tier                TEXT NOT NULL DEFAULT 'free' CHECK (tier IN ('free', 'pro', 'ultra')),
  quota_fast          INTEGER NOT NULL CHECK (quota_fast >= 0),
  quota_standard      INTEGER NOT NULL CHECK (quota_standard >= 0),
  quota_perfect       INTEGER NOT NULL CHECK (quota_perfect >= 0),
  quota_expire_at     INTEGER NOT NULL,
  rate_limit_per_min  INTEGER NOT NULL DEFAULT 60 CHECK (rate_limit_per_min > 0),
  webhook_secret      TEXT NOT NULL,
  default_webhook_url TEXT,
  created_at          INTEGER NOT NULL
);

-- Only the SHA-256 of a key is stored, with an 8-character display prefix
-- for logs and listings.
CREATE TABLE api_keys (
  id             TEXT PRIMARY KEY,
  account_id     TEXT NOT NULL REFERENCES accounts (id),
  env            TEXT NOT NULL CHECK (env IN ('production', 'staging')),
  display_prefix TEXT NOT NULL,
  key_hash       BLOB NOT NULL UNIQUE,
  status         TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'revoked')),
  created_at     INTEGER NOT NULL,
  revoked_at     INTEGER
);
CREATE INDEX api_keys_account ON api_keys (account_id);

-- Fixed one-minute windows per key; shared by every eq-api process that uses
-- this database, so the limit holds across processes.
CREATE TABLE rate_counters (
  key_id       TEXT NOT NULL,
  window_start INTEGER NOT NULL,
  count        INTEGER NOT NULL,
  PRIMARY KEY (key_id, window_start)
) WITHOUT ROWID;

-- The task state machine of docs/contract.md §5; store/store.h has one function
-- per transition.
CREATE TABLE tasks (
  id          TEXT PRIMARY KEY,
  account_id  TEXT NOT NULL REFERENCES accounts (id),
  key_id      TEXT NOT NULL,
  request_id  TEXT NOT NULL,
  mode        TEXT NOT NULL CHECK (mode IN ('fast', 'standard', 'perfect')),
  status      TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
  webhook_url TEXT,
  result_json TEXT,
  error_code  INTEGER,
  error_msg   TEXT,
  charged     INTEGER NOT NULL DEFAULT 1 CHECK (charged IN (0, 1)),
  created_at  INTEGER NOT NULL,
  started_at  INTEGER,
  finished_at INTEGER
);
CREATE INDEX tasks_account ON tasks (account_id, created_at);

-- One delivery per task (a replay reuses it, keeping its id, which receivers
-- dedupe on); every attempt is logged.
CREATE TABLE deliveries (
  id              TEXT PRIMARY KEY,
  task_id         TEXT NOT NULL UNIQUE REFERENCES tasks (id),
  url             TEXT NOT NULL,
  event           TEXT NOT NULL,
  status          TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts        INTEGER NOT NULL DEFAULT 0,
  last_attempt_at INTEGER,
  last_status     INTEGER,
  next_attempt_at INTEGER,
  created_at      INTEGER NOT NULL
);

CREATE TABLE delivery_attempts (
  delivery_id TEXT NOT NULL REFERENCES deliveries (id),
  attempt     INTEGER NOT NULL,
  at          INTEGER NOT NULL,
  http_status INTEGER,
  latency_ms  INTEGER NOT NULL,
  error       TEXT,
  PRIMARY KEY (delivery_id, attempt)
);
