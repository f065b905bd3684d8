-- PostgreSQL dialect of ../009_delivery_page.sql: deliveries_due gains the
-- id, so that a claim page (store/deliveries.cc, ORDER BY next_attempt_at,
-- id LIMIT n) is read in the index's own order and stops at its LIMIT.
-- On (next_attempt_at) alone the plan sorted each page incrementally,
-- reading every row of a run of equal next_attempt_at: a backlog created
-- within one millisecond, or the rows of one lease, is such a run.
DROP INDEX deliveries_due;
CREATE INDEX deliveries_due ON deliveries (next_attempt_at, id) WHERE status = 'pending';
