-- Asynchronous image and video tasks. A task is accepted in the transaction that holds its
-- credits, and settled (capture or refund) in the transaction that writes its terminal status.
-- Workers in any replica claim due rows with FOR UPDATE SKIP LOCKED and hold them with a lease;
-- a worker that dies loses its lease and another takes the task up.
CREATE TABLE IF NOT EXISTS tasks (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('image', 'video')),
  -- image: generate | edit | inpaint; video: text-to-video | image-to-video | video-to-video
  mode TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('queued', 'processing', 'succeeded', 'failed', 'cancelled')),
  key_hash TEXT NOT NULL,
  key_name TEXT NOT NULL,
  account TEXT NOT NULL,
  group_name TEXT NOT NULL,
  model TEXT NOT NULL,
  -- the normalised request (what providers receive), never the client's raw body
  request JSONB NOT NULL,
  request_hash TEXT NOT NULL,
  idempotency_key TEXT,
  -- input fields dropped because the model or provider cannot take them
  ignored JSONB NOT NULL DEFAULT '[]',
  -- the backend the upstream task lives on (provider, baseURL, model), once submitted
  backend JSONB,
  upstream_id TEXT,
  upstream_state JSONB,
  -- upstream submissions tried (429/5xx/connection errors are retried until the deadline)
  attempts INT NOT NULL DEFAULT 0,
  next_run_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  lease_owner TEXT,
  lease_until TIMESTAMPTZ,
  deadline_at TIMESTAMPTZ NOT NULL,
  hold_id TEXT NOT NULL UNIQUE,
  hold_micro BIGINT NOT NULL,
  -- unit prices fixed at submission (micro-credit strings), so a config change cannot reprice
  price JSONB NOT NULL,
  charged_micro BIGINT,
  -- [{key, contentType, bytes}] in result storage
  results JSONB,
  -- what the upstream reported (images produced, seconds of video)
  usage JSONB,
  error_code TEXT,
  error_message TEXT,
  webhook_url TEXT,
  -- only while the task runs: the terminal transaction signs the webhook body and clears it
  webhook_secret TEXT,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  finished_at TIMESTAMPTZ,
  UNIQUE (key_hash, idempotency_key)
);

CREATE INDEX IF NOT EXISTS tasks_due_idx ON tasks (next_run_at) WHERE status IN ('queued', 'processing');
CREATE INDEX IF NOT EXISTS tasks_deadline_idx ON tasks (deadline_at) WHERE status IN ('queued', 'processing');
