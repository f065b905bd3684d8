-- PostgreSQL dialect of ../006_portal.sql. Where SQLite rebuilds
-- `deliveries` (a task-less test delivery, an account_id on every row),
-- PostgreSQL alters it in place.
CREATE TABLE people (
  id                  TEXT PRIMARY KEY,
  email               TEXT NOT NULL UNIQUE,
  account_id          TEXT NOT NULL UNIQUE REFERENCES accounts (id),
  password_hash       TEXT,
  status              TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
  created_at          BIGINT NOT NULL,
  password_changed_at BIGINT
);

CREATE TABLE portal_links (
  token_hash BYTEA PRIMARY KEY,
  kind       TEXT NOT NULL CHECK (kind IN ('invite', 'reset')),
  email      TEXT NOT NULL,
  tier       TEXT NOT NULL DEFAULT 'free' CHECK (tier IN ('free', 'pro', 'ultra')),
  account_id TEXT,
  expires_at BIGINT NOT NULL,
  used_at    BIGINT,
  created_at BIGINT NOT NULL
);

CREATE TABLE portal_sessions (
  id_hash      BYTEA PRIMARY KEY,
  person_id    TEXT NOT NULL REFERENCES people (id),
  csrf         TEXT NOT NULL,
  created_at   BIGINT NOT NULL,
  last_seen_at BIGINT NOT NULL,
  expires_at   BIGINT NOT NULL
);
CREATE INDEX portal_sessions_person ON portal_sessions (person_id);

CREATE TABLE signin_failures (
  scope TEXT NOT NULL,
  at    BIGINT NOT NULL
);
CREATE INDEX signin_failures_scope ON signin_failures (scope, at);

CREATE TABLE usage_hourly (
  account_id TEXT NOT NULL,
  mode       TEXT NOT NULL,
  hour       BIGINT NOT NULL,
  calls      BIGINT NOT NULL DEFAULT 0,
  refunded   BIGINT NOT NULL DEFAULT 0,
  tokens     BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, mode, hour)
);

ALTER TABLE api_keys ADD COLUMN name TEXT;
ALTER TABLE accounts ADD COLUMN webhook_secret_prev TEXT;
ALTER TABLE accounts ADD COLUMN webhook_secret_prev_until BIGINT;
ALTER TABLE accounts ADD COLUMN disabled_at BIGINT;

ALTER TABLE deliveries ADD COLUMN account_id TEXT REFERENCES accounts (id);
UPDATE deliveries d SET account_id = t.account_id FROM tasks t WHERE t.id = d.task_id;
ALTER TABLE deliveries ALTER COLUMN account_id SET NOT NULL;
ALTER TABLE deliveries ALTER COLUMN task_id DROP NOT NULL;
ALTER TABLE deliveries ADD CHECK (task_id IS NOT NULL OR event = 'test');
CREATE INDEX deliveries_account ON deliveries (account_id, created_at);
