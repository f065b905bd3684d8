-- PostgreSQL dialect of ../011_republish_claim.sql (the same statement).
ALTER TABLE open_charges ADD COLUMN republish_until BIGINT;
