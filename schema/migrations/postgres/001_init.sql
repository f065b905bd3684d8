-- PostgreSQL dialect of ../001_init.sql: the same tables, columns and
-- constraints. Times are milliseconds since the epoch (BIGINT, as SQLite's
-- 64-bit INTEGER); hashes are BYTEA where SQLite has BLOB.
CREATE TABLE accounts (
  id                  TEXT PRIMARY KEY,
  name                TEXT NOT NULL,
  tier                TEXT NOT NULL DEFAULT 'free' CHECK (tier IN ('free', 'pro', 'ultra')),
  quota_fast          BIGINT NOT NULL CHECK (quota_fast >= 0),
  quota_standard      BIGINT NOT NULL CHECK (quota_standard >= 0),
  quota_perfect       BIGINT NOT NULL CHECK (quota_perfect >= 0),
  quota_expire_at     BIGINT NOT NULL,
  rate_limit_per_min  BIGINT NOT NULL DEFAULT 60 CHECK (rate_limit_per_min > 0),
  webhook_secret      TEXT NOT NULL,
  default_webhook_url TEXT,
  created_at          BIGINT NOT NULL
);

CREATE TABLE api_keys (
  id             TEXT PRIMARY KEY,
  account_id     TEXT NOT NULL REFERENCES accounts (id),
  env            TEXT NOT NULL CHECK (env IN ('production', 'staging')),
  display_prefix TEXT NOT NULL,
  key_hash       BYTEA NOT NULL UNIQUE,
  status         TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'revoked')),
  created_at     BIGINT NOT NULL,
  revoked_at     BIGINT
);
CREATE INDEX api_keys_account ON api_keys (account_id);

CREATE TABLE rate_counters (
  key_id       TEXT NOT NULL,
  window_start BIGINT NOT NULL,
  count        BIGINT NOT NULL,
  PRIMARY KEY (key_id, window_start)
);

CREATE TABLE tasks (
  id          TEXT PRIMARY KEY,
  account_id  TEXT NOT NULL REFERENCES accounts (id),
  key_id      TEXT NOT NULL,
  request_id  TEXT NOT NULL,
  mode        TEXT NOT NULL CHECK (mode IN ('fast', 'standard', 'perfect')),
  status      TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
  webhook_url TEXT,
  result_json TEXT,
  error_code  BIGINT,
  error_msg   TEXT,
  charged     BIGINT NOT NULL DEFAULT 1 CHECK (charged IN (0, 1)),
  created_at  BIGINT NOT NULL,
  started_at  BIGINT,
  finished_at BIGINT
);
CREATE INDEX tasks_account ON tasks (account_id, created_at);

CREATE TABLE deliveries (
  id              TEXT PRIMARY KEY,
  task_id         TEXT NOT NULL UNIQUE REFERENCES tasks (id),
  url             TEXT NOT NULL,
  event           TEXT NOT NULL,
  status          TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts        BIGINT NOT NULL DEFAULT 0,
  last_attempt_at BIGINT,
  last_status     BIGINT,
  next_attempt_at BIGINT,
  created_at      BIGINT NOT NULL
);

CREATE TABLE delivery_attempts (
  delivery_id TEXT NOT NULL REFERENCES deliveries (id),
  attempt     BIGINT NOT NULL,
  at          BIGINT NOT NULL,
  http_status BIGINT,
  latency_ms  BIGINT NOT NULL,
  error       TEXT,
  PRIMARY KEY (delivery_id, attempt)
);
