-- Image and video tasks write usage records too: one per task when it ends, with what it was
-- charged (credits, images or seconds) or refunded. Chat records are kind 'chat'.
ALTER TABLE usage_records ADD COLUMN IF NOT EXISTS kind TEXT NOT NULL DEFAULT 'chat';
ALTER TABLE usage_records ADD COLUMN IF NOT EXISTS task_id TEXT;
ALTER TABLE usage_records ADD COLUMN IF NOT EXISTS images INT;
ALTER TABLE usage_records ADD COLUMN IF NOT EXISTS seconds DOUBLE PRECISION;
ALTER TABLE usage_records ADD COLUMN IF NOT EXISTS refunded_credits BIGINT NOT NULL DEFAULT 0;
