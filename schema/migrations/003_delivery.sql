-- EQ Reply schema, version 3: webhook retries, replays and retention.
-- Times are Unix milliseconds (UTC). Applied after 002_contract.sql, once.

-- A pending delivery is due at next_attempt_at (001_init.sql). The sender of
-- eq-dispatcher finds due ones through this index, so the retry state lives
-- here and survives a dispatcher restart. Partial: delivered and failed rows,
-- the vast majority, are not indexed.
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';

-- eqctl delivery list --failed, newest first.
CREATE INDEX deliveries_status_created ON deliveries (status, created_at);

-- The retry schedule counts attempts from schedule_offset: a replay (eqctl
-- delivery replay) keeps the delivery id and the attempt count, and starts
-- the schedule over by setting schedule_offset to the attempts made so far.
ALTER TABLE deliveries ADD COLUMN schedule_offset INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deliveries ADD COLUMN replayed_at INTEGER;

-- Retention purges tasks by age (docs/contract.md §5: kept 7 days).
CREATE INDEX tasks_created ON tasks (created_at);
