-- Metered chat: one usage record per request, per-key spend for spendLimit, and the key that
-- owns a hold (task holds count towards their key's limit while open).
CREATE TABLE IF NOT EXISTS usage_records (
  id BIGSERIAL PRIMARY KEY,
  -- the capture's operation id: unique, so a replayed group commit writes no second record
  operation_id TEXT NOT NULL UNIQUE,
  -- the x-request-id of the call (a client may choose it, so it is not unique)
  request_id TEXT NOT NULL,
  key_name TEXT NOT NULL,
  key_hash TEXT NOT NULL,
  account TEXT NOT NULL,
  group_name TEXT NOT NULL,
  model TEXT NOT NULL,
  upstream_model TEXT NOT NULL,
  protocol TEXT NOT NULL,
  input_tokens BIGINT NOT NULL,
  cached_input_tokens BIGINT NOT NULL,
  cache_write_tokens BIGINT NOT NULL,
  output_tokens BIGINT NOT NULL,
  reasoning_tokens BIGINT NOT NULL,
  credits BIGINT NOT NULL,
  usage_source TEXT NOT NULL CHECK (usage_source IN ('reported', 'estimated')),
  status TEXT NOT NULL,
  http_status INT NOT NULL,
  latency_ms INT NOT NULL,
  ttft_ms INT,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS usage_account_idx ON usage_records (account, id);
CREATE INDEX IF NOT EXISTS usage_key_idx ON usage_records (key_hash, id);

-- Captured spend per key: what spendLimit is checked against (chat and tasks).
CREATE TABLE IF NOT EXISTS key_spend (
  key_hash TEXT PRIMARY KEY,
  spent BIGINT NOT NULL DEFAULT 0,
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

ALTER TABLE holds ADD COLUMN IF NOT EXISTS key_hash TEXT;

CREATE INDEX IF NOT EXISTS holds_key_idx ON holds (key_hash) WHERE key_hash IS NOT NULL;
