-- EQ Reply schema, version 4: the key epoch. Times are Unix milliseconds.
-- Applied after 003_delivery.sql, once.

-- eq-api keeps the keys it has seen in memory (api/auth_cache.h) so that a
-- request needs no key lookup. The epoch says when such a copy may be stale:
-- every change to a key (revoke, rotate, expiry) or to an account's rate
-- limit moves it, by trigger, in the same transaction as the change, whoever
-- makes it (eqctl, an older binary, a hand-written UPDATE). eq-api reads the
-- epoch once per batch and looks a key up again whenever its copy is from an
-- older epoch, so a change is in force for the first batch that starts after
-- it committed.
CREATE TABLE key_epoch (
  id    INTEGER PRIMARY KEY CHECK (id = 1),
  epoch INTEGER NOT NULL
);
INSERT INTO key_epoch (id, epoch) VALUES (1, 0);

CREATE TRIGGER api_keys_epoch_update AFTER UPDATE ON api_keys
BEGIN
  UPDATE key_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
CREATE TRIGGER api_keys_epoch_delete AFTER DELETE ON api_keys
BEGIN
  UPDATE key_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
CREATE TRIGGER accounts_epoch_rate AFTER UPDATE OF rate_limit_per_min ON accounts
BEGIN
  UPDATE key_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
