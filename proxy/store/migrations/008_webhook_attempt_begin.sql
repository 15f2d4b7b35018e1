-- A webhook attempt is recorded before it is sent and completed after: a crash in between leaves
-- a visible attempt with no outcome (duration and status NULL) instead of nothing.
ALTER TABLE webhook_attempts ALTER COLUMN duration_ms DROP NOT NULL;
