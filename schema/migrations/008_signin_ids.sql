-- EQ Reply schema, version 8: a sign-in failure has an id of its own
-- (issue 23). Applied after 007_republish.sql, once.
--
-- A right password takes back the failures its attempt recorded
-- (Store::forgetSigninFailures), by their ids. SQLite's rowid served as the
-- id; PostgreSQL has no stable row id, so the column is explicit on both
-- engines. On SQLite `id INTEGER PRIMARY KEY` is the rowid itself: the ids
-- of existing rows stay what they were. The table is rebuilt (SQLite cannot
-- add a primary key to a table).
CREATE TABLE signin_failures_new (
  id    INTEGER PRIMARY KEY,
  scope TEXT NOT NULL,
  at    INTEGER NOT NULL
);
INSERT INTO signin_failures_new (id, scope, at) SELECT rowid, scope, at FROM signin_failures;
DROP TABLE signin_failures;
ALTER TABLE signin_failures_new RENAME TO signin_failures;
CREATE INDEX signin_failures_scope ON signin_failures (scope, at);
