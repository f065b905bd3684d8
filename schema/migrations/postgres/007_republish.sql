-- PostgreSQL dialect of ../007_republish.sql: where SQLite rebuilds
-- `settlements` for the wider CHECK, PostgreSQL replaces the constraint.
ALTER TABLE open_charges ADD COLUMN job TEXT;
ALTER TABLE open_charges ADD COLUMN idem_key TEXT;

ALTER TABLE settlements DROP CONSTRAINT settlements_action_check;
ALTER TABLE settlements ADD CONSTRAINT settlements_action_check
  CHECK (action IN ('refunded', 'task_failed', 'kept', 'republished'));
