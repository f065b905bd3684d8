-- PostgreSQL dialect of ../010_deferred_account_checks.sql: the foreign keys
-- from tasks and deliveries to their account are checked at commit rather
-- than at each insert.
--
-- Checked at once, each insert takes a KEY SHARE lock on the account's row,
-- and eq-api's batch updates that same row (the quota) once per request,
-- each request in a savepoint of its own: a row locked by one
-- subtransaction and updated by another gets a MultiXact for its xmax, and
-- the batch's later statements on that row read its members. Measured
-- (perf on eq-api's server process, 400 async admissions a second):
-- GetMultiXactIdMembers took half of its time, and each answer 120 ms;
-- checked at commit, 1.4%, and 38 ms at 750 a second. The dispatcher's delivery
-- inserts, locking the same row while eq-api updates it, did the same.
-- Checked at commit, the lock is taken once, by the top transaction, after
-- every update. Accounts are never deleted, so the check still holds.
ALTER TABLE tasks ALTER CONSTRAINT tasks_account_id_fkey DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE deliveries ALTER CONSTRAINT deliveries_account_id_fkey DEFERRABLE INITIALLY DEFERRED;
