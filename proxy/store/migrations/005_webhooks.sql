-- The webhook outbox. A delivery row is written in the same transaction as the task's terminal
-- status, with its body bytes and their signature, so every attempt sends the same bytes and a
-- restart loses nothing. Each attempt is a row of webhook_attempts.
CREATE TABLE IF NOT EXISTS webhook_deliveries (
  id TEXT PRIMARY KEY,
  task_id TEXT NOT NULL,
  url TEXT NOT NULL,
  body BYTEA NOT NULL,
  -- sha256=<hex HMAC-SHA256(webhook_secret, body)>; the secret itself is not kept
  signature TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts INT NOT NULL DEFAULT 0,
  next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  lease_owner TEXT,
  lease_until TIMESTAMPTZ,
  last_error TEXT,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  finished_at TIMESTAMPTZ
);

CREATE INDEX IF NOT EXISTS webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS webhook_deliveries_task_idx ON webhook_deliveries (task_id);

CREATE TABLE IF NOT EXISTS webhook_attempts (
  delivery_id TEXT NOT NULL REFERENCES webhook_deliveries (id),
  attempt INT NOT NULL,
  started_at TIMESTAMPTZ NOT NULL,
  duration_ms INT NOT NULL,
  -- the receiver's HTTP status, or NULL when no answer came (timeout, refused, guard)
  status_code INT,
  error TEXT,
  PRIMARY KEY (delivery_id, attempt)
);
