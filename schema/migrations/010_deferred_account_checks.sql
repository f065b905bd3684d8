-- EQ Reply schema, version 10: PostgreSQL checks that a task's and a
-- delivery's account exists when their transaction commits (issue 23).
-- Applied after 009_delivery_page.sql, once.
--
-- Nothing changes on SQLite, which locks the whole database rather than
-- rows (postgres/010_deferred_account_checks.sql says why PostgreSQL needs
-- it). This file keeps the numbered list the same on both engines.
SELECT 1;
