-- PostgreSQL dialect of ../003_delivery.sql.
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX deliveries_status_created ON deliveries (status, created_at);
ALTER TABLE deliveries ADD COLUMN schedule_offset BIGINT NOT NULL DEFAULT 0;
ALTER TABLE deliveries ADD COLUMN replayed_at BIGINT;
CREATE INDEX tasks_created ON tasks (created_at);
