-- PostgreSQL dialect of ../013_key_last_used_table.sql (the same table).
CREATE TABLE key_last_used (
  key_id TEXT PRIMARY KEY,
  at     BIGINT NOT NULL
);
INSERT INTO key_last_used (key_id, at)
  SELECT id, last_used_at FROM api_keys WHERE last_used_at IS NOT NULL;
ALTER TABLE api_keys DROP COLUMN last_used_at;
