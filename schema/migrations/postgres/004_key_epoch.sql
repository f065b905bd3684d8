-- PostgreSQL dialect of ../004_key_epoch.sql: the epoch every change of a
-- key (and of an account's rate limit) bumps, by triggers. SQLite's
-- trigger bodies are statements; PostgreSQL's call one function.
CREATE TABLE key_epoch (
  id    BIGINT PRIMARY KEY CHECK (id = 1),
  epoch BIGINT NOT NULL
);
INSERT INTO key_epoch (id, epoch) VALUES (1, 0);

CREATE FUNCTION eq_bump_key_epoch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE key_epoch SET epoch = epoch + 1 WHERE id = 1;
  RETURN NULL;
END;
$$;

CREATE TRIGGER api_keys_epoch_update AFTER UPDATE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION eq_bump_key_epoch();
CREATE TRIGGER api_keys_epoch_delete AFTER DELETE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION eq_bump_key_epoch();
CREATE TRIGGER accounts_epoch_rate AFTER UPDATE OF rate_limit_per_min ON accounts
  FOR EACH ROW EXECUTE FUNCTION eq_bump_key_epoch();
