-- EQ Reply schema, version 13: when a key was last used, in a table of its
-- own. Applied after 012_key_last_used.sql, once.
--
-- Version 12 kept it in api_keys.last_used_at, written by retention before
-- it purges rate windows. But every UPDATE of api_keys moves the key epoch
-- (004_key_epoch.sql), and a moved epoch makes every eq-api look each of its
-- cached keys up again: each purge did that for nothing. Use is not a change
-- of the key, so it lives beside it, where no trigger reads it: one row per
-- key that retention purged windows of, `at` the start (unix ms) of the
-- newest of them (Store::purgeRateCountersBefore, Store::accountKeys).
CREATE TABLE key_last_used (
  key_id TEXT PRIMARY KEY,
  at     INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO key_last_used (key_id, at)
  SELECT id, last_used_at FROM api_keys WHERE last_used_at IS NOT NULL;
ALTER TABLE api_keys DROP COLUMN last_used_at;
