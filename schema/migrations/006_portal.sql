-- The developer center (docs/contract.md §9, issue 12): the people who sign in,
-- their one-time links and sessions, the sign-in failure log that limits
-- guessing, the usage record per account, mode and hour, key names, webhook
-- secret rotation with an overlap, and webhook deliveries that belong to an
-- account rather than to a task (the "send test event" button).
--
-- Applied with foreign keys off (Store::open turns them on after the
-- migrations), which the rebuild of `deliveries` below needs.

-- A person signs in with email and password and owns one account. An
-- account made by `eqctl key create` has no person until it is invited.
CREATE TABLE people (
  id                  TEXT PRIMARY KEY,
  email               TEXT NOT NULL UNIQUE,  -- stored lower-cased
  account_id          TEXT NOT NULL UNIQUE REFERENCES accounts (id),
  password_hash       TEXT,                  -- scrypt (common/password.h); NULL until set
  status              TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
  created_at          INTEGER NOT NULL,
  password_changed_at INTEGER
);

-- One-time links: an invitation (sets the first password, may create the
-- account) or a password reset. Only the token's SHA-256 is stored.
CREATE TABLE portal_links (
  token_hash BLOB PRIMARY KEY,
  kind       TEXT NOT NULL CHECK (kind IN ('invite', 'reset')),
  email      TEXT NOT NULL,
  tier       TEXT NOT NULL DEFAULT 'free' CHECK (tier IN ('free', 'pro', 'ultra')),
  account_id TEXT,      -- invite an existing account (made by eqctl key create)
  expires_at INTEGER NOT NULL,
  used_at    INTEGER,
  created_at INTEGER NOT NULL
) WITHOUT ROWID;

-- Sessions: only the SHA-256 of the 256-bit id is stored. The CSRF token is
-- not a secret from the session's owner, only from other origins.
CREATE TABLE portal_sessions (
  id_hash      BLOB PRIMARY KEY,
  person_id    TEXT NOT NULL REFERENCES people (id),
  csrf         TEXT NOT NULL,
  created_at   INTEGER NOT NULL,
  last_seen_at INTEGER NOT NULL,
  expires_at   INTEGER NOT NULL  -- created_at + 7 days; idleness is last_seen_at + 12 h
) WITHOUT ROWID;
CREATE INDEX portal_sessions_person ON portal_sessions (person_id);

-- Failed sign-ins, one row each, by scope ("email:<address>" and
-- "addr:<client address>"); 10 in 15 minutes in one scope refuse the next.
CREATE TABLE signin_failures (
  scope TEXT NOT NULL,
  at    INTEGER NOT NULL
);
CREATE INDEX signin_failures_scope ON signin_failures (scope, at);

-- Reply calls per account, mode and hour (hour = unix ms of the hour's
-- start). Written by the statements that charge and refund quota, in their
-- transactions, so calls - refunded over any period is exactly the units the
-- quota lost in it. tokens: the engine's count of succeeded calls.
CREATE TABLE usage_hourly (
  account_id TEXT NOT NULL,
  mode       TEXT NOT NULL,
  hour       INTEGER NOT NULL,
  calls      INTEGER NOT NULL DEFAULT 0,
  refunded   INTEGER NOT NULL DEFAULT 0,
  tokens     INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, mode, hour)
) WITHOUT ROWID;

ALTER TABLE api_keys ADD COLUMN name TEXT;
-- Secret rotation: for 24 h after a rotation the previous secret signs too.
ALTER TABLE accounts ADD COLUMN webhook_secret_prev TEXT;
ALTER TABLE accounts ADD COLUMN webhook_secret_prev_until INTEGER;
ALTER TABLE accounts ADD COLUMN disabled_at INTEGER;

-- Deliveries get their account, and a delivery without a task: the test
-- event. SQLite cannot drop NOT NULL in place, so the table is rebuilt.
CREATE TABLE deliveries_new (
  id              TEXT PRIMARY KEY,
  task_id         TEXT UNIQUE REFERENCES tasks (id),
  account_id      TEXT NOT NULL REFERENCES accounts (id),
  url             TEXT NOT NULL,
  event           TEXT NOT NULL,
  status          TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts        INTEGER NOT NULL DEFAULT 0,
  last_attempt_at INTEGER,
  last_status     INTEGER,
  next_attempt_at INTEGER,
  created_at      INTEGER NOT NULL,
  schedule_offset INTEGER NOT NULL DEFAULT 0,
  replayed_at     INTEGER,
  CHECK (task_id IS NOT NULL OR event = 'test')
);
INSERT INTO deliveries_new (id, task_id, account_id, url, event, status, attempts,
                            last_attempt_at, last_status, next_attempt_at, created_at,
                            schedule_offset, replayed_at)
  SELECT d.id, d.task_id, t.account_id, d.url, d.event, d.status, d.attempts,
         d.last_attempt_at, d.last_status, d.next_attempt_at, d.created_at,
         d.schedule_offset, d.replayed_at
  FROM deliveries d JOIN tasks t ON t.id = d.task_id;
DROP TABLE deliveries;
ALTER TABLE deliveries_new RENAME TO deliveries;
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX deliveries_status_created ON deliveries (status, created_at);
CREATE INDEX deliveries_account ON deliveries (account_id, created_at);
