-- EQ Reply schema, version 12: when a key was last used, past the rate
-- windows. Applied after 011_republish_claim.sql, once.
--
-- The developer center's "last used" was the newest rate window the key was
-- counted in, and retention purges windows an hour old: a key unused for an
-- hour read "never". Before a purge deletes a key's old windows, the newest
-- of them is kept here (unix ms of the window's start; NULL: never), so
-- "last used" is the newest remaining window, else this
-- (Store::purgeRateCountersBefore, Store::accountKeys).
ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;
