-- EQ Reply schema, version 14: the monthly volume of the interface's limits
-- table (docs/contract.md §11). Each account counts the units charged in the
-- current calendar month (UTC) in its own row, beside its quota, so that the
-- statement that takes a unit also checks and counts the month's volume:
-- exact under concurrency, on every host, with nothing more to write.
--   monthly_limit  units a month over all modes; 0: no limit (an account
--                  under a commercial arrangement); 100,000 by default
--   month_start    the first instant (unix ms) of the month month_used counts
--   month_used     the units charged in that month, less those refunded
-- A charge in a later month starts the count again (Store::chargeQuota).
ALTER TABLE accounts ADD COLUMN monthly_limit INTEGER NOT NULL DEFAULT 100000
  CHECK (monthly_limit >= 0);
ALTER TABLE accounts ADD COLUMN month_start INTEGER NOT NULL DEFAULT 0;
ALTER TABLE accounts ADD COLUMN month_used INTEGER NOT NULL DEFAULT 0 CHECK (month_used >= 0);
-- The month in progress counts what was charged in it before this version:
-- calls less refunds, from the hourly usage record (006_portal.sql).
UPDATE accounts SET
  month_start = CAST(strftime('%s', 'now', 'start of month') AS INTEGER) * 1000,
  month_used = max(0, coalesce((SELECT sum(u.calls - u.refunded) FROM usage_hourly u
                                WHERE u.account_id = accounts.id AND
                                      u.hour >= CAST(strftime('%s', 'now', 'start of month')
                                                     AS INTEGER) * 1000), 0));
