-- PostgreSQL dialect of ../012_key_last_used.sql (the same column).
ALTER TABLE api_keys ADD COLUMN last_used_at BIGINT;
