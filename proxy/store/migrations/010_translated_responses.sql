-- Responses the gateway produced by translation (a Responses client on a backend that keeps no
-- server-side state), kept so that previous_response_id can continue them: the conversation up
-- to and including the answer, owned by the key that made it, until it expires.
CREATE TABLE translated_responses (
  id TEXT PRIMARY KEY,
  account TEXT NOT NULL,
  key_name TEXT NOT NULL,
  model TEXT NOT NULL,
  conversation JSONB NOT NULL,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX translated_responses_expiry ON translated_responses (expires_at);
