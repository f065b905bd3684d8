-- PostgreSQL dialect of ../002_contract.sql.
ALTER TABLE api_keys ADD COLUMN expires_at BIGINT;
ALTER TABLE api_keys ADD COLUMN rotated_to TEXT;

CREATE TABLE idempotency_keys (
  account_id    TEXT NOT NULL,
  idem_key      TEXT NOT NULL,
  route         TEXT NOT NULL,
  body_sha256   BYTEA NOT NULL,
  state         TEXT NOT NULL CHECK (state IN ('pending', 'done')),
  request_id    TEXT NOT NULL,
  http_status   BIGINT,
  response_body TEXT,
  created_at    BIGINT NOT NULL,
  PRIMARY KEY (account_id, idem_key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
