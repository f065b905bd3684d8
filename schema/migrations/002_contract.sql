-- EQ Reply schema, version 2: key expiry and rotation, Idempotency-Key.
-- Times are Unix milliseconds (UTC). Applied after 001_init.sql, once.

-- A key may expire (NULL: never). An expired key is refused like a revoked
-- one; its status stays 'active' so that extending the expiry (eqctl key set)
-- brings it back without a second state to keep in step. rotated_to names the
-- key that replaced this one (eqctl key rotate), for eqctl key show.
ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
ALTER TABLE api_keys ADD COLUMN rotated_to TEXT;

-- Idempotency-Key records (docs/contract.md §3), scoped to the account so they
-- survive a key rotation and hold across every eq-api process on this
-- database. A row is inserted 'pending' before the request runs (the insert
-- is what decides which of two concurrent duplicates runs) and becomes
-- 'done' with the final response, or is deleted when the outcome was not
-- final (429, 5xx) so that a retry runs again. Rows older than 24 h are
-- purged lazily by later inserts. A rowid table, not WITHOUT ROWID: rows
-- carry whole response bodies, too large for the clustered layout to pay.
CREATE TABLE idempotency_keys (
  account_id    TEXT NOT NULL,
  idem_key      TEXT NOT NULL,
  route         TEXT NOT NULL,
  body_sha256   BLOB NOT NULL,
  state         TEXT NOT NULL CHECK (state IN ('pending', 'done')),
  request_id    TEXT NOT NULL,  -- the request that owns the row (X-Request-Id)
  http_status   INTEGER,
  response_body TEXT,
  created_at    INTEGER NOT NULL,
  PRIMARY KEY (account_id, idem_key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
