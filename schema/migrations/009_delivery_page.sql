-- EQ Reply schema, version 9: the index PostgreSQL's claim pages read
-- (issue 23). Applied after 008_signin_ids.sql, once.
--
-- Nothing changes on SQLite: its walk reads deliveries_due
-- (next_attempt_at) WHERE status = 'pending' in one statement, stepping as
-- far as it needs (store/deliveries.cc). This file keeps the numbered list
-- the same on both engines.
SELECT 1;
