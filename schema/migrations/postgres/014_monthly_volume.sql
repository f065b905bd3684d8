-- PostgreSQL dialect of ../014_monthly_volume.sql (the same columns).
ALTER TABLE accounts ADD COLUMN monthly_limit BIGINT NOT NULL DEFAULT 100000
  CHECK (monthly_limit >= 0);
ALTER TABLE accounts ADD COLUMN month_start BIGINT NOT NULL DEFAULT 0;
ALTER TABLE accounts ADD COLUMN month_used BIGINT NOT NULL DEFAULT 0 CHECK (month_used >= 0);
UPDATE accounts SET
  month_start = m.start,
  month_used = GREATEST(0, coalesce((SELECT sum(u.calls - u.refunded) FROM usage_hourly u
                                     WHERE u.account_id = accounts.id AND u.hour >= m.start), 0))
FROM (SELECT (extract(epoch FROM date_trunc('month', now() AT TIME ZONE 'UTC')) * 1000)::bigint
      AS start) AS m;
