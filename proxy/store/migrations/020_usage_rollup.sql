-- Usage per key, model and UTC hour, kept by a statement trigger on usage_records: the console's
-- charts and the summary endpoints read these rows, not the records, so an answer over a month
-- reads at most (hours x models) rows per key whatever the number of requests. One grouped upsert
-- per inserting statement (a group commit's batch is one statement), not one per row.
-- Statements end mid-line inside the body: migrations split on ';' at line ends.
CREATE TABLE IF NOT EXISTS usage_hourly (
  hour TIMESTAMPTZ NOT NULL,
  key_hash TEXT NOT NULL,
  model TEXT NOT NULL,
  key_name TEXT NOT NULL,
  account TEXT NOT NULL,
  requests BIGINT NOT NULL,
  -- records whose status is not 'ok'
  errors BIGINT NOT NULL,
  input_tokens BIGINT NOT NULL,
  cached_input_tokens BIGINT NOT NULL,
  output_tokens BIGINT NOT NULL,
  credits BIGINT NOT NULL,
  PRIMARY KEY (key_hash, hour, model)
);

CREATE INDEX IF NOT EXISTS usage_hourly_account_idx ON usage_hourly (account, hour);
CREATE INDEX IF NOT EXISTS usage_hourly_hour_idx ON usage_hourly (hour);

-- The admin usage explorer filters the records by model or key name, newest first.
CREATE INDEX IF NOT EXISTS usage_model_idx ON usage_records (model, id);
CREATE INDEX IF NOT EXISTS usage_key_name_idx ON usage_records (key_name, id);

CREATE OR REPLACE FUNCTION usage_rollup() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  INSERT INTO usage_hourly AS h (hour, key_hash, model, key_name, account, requests, errors, input_tokens, cached_input_tokens, output_tokens, credits)
  SELECT date_trunc('hour', created_at, 'UTC'), key_hash, model, max(key_name), max(account), count(*), count(*) FILTER (WHERE status <> 'ok'),
         sum(input_tokens), sum(cached_input_tokens), sum(output_tokens), sum(credits)
    FROM new_usage GROUP BY 1, 2, 3
  ON CONFLICT (key_hash, hour, model) DO UPDATE SET
    requests = h.requests + EXCLUDED.requests, errors = h.errors + EXCLUDED.errors, input_tokens = h.input_tokens + EXCLUDED.input_tokens,
    cached_input_tokens = h.cached_input_tokens + EXCLUDED.cached_input_tokens, output_tokens = h.output_tokens + EXCLUDED.output_tokens,
    credits = h.credits + EXCLUDED.credits, key_name = EXCLUDED.key_name; RETURN NULL; END $fn$;

-- Records written before this migration, once (the trigger counts the later ones).
INSERT INTO usage_hourly (hour, key_hash, model, key_name, account, requests, errors, input_tokens, cached_input_tokens, output_tokens, credits)
SELECT date_trunc('hour', created_at, 'UTC'), key_hash, model, max(key_name), max(account), count(*), count(*) FILTER (WHERE status <> 'ok'),
       sum(input_tokens), sum(cached_input_tokens), sum(output_tokens), sum(credits)
  FROM usage_records GROUP BY 1, 2, 3
ON CONFLICT DO NOTHING;

DROP TRIGGER IF EXISTS usage_rollup ON usage_records;
CREATE TRIGGER usage_rollup AFTER INSERT ON usage_records REFERENCING NEW TABLE AS new_usage FOR EACH STATEMENT EXECUTE FUNCTION usage_rollup();
-- The consoles list a key's tasks and the whole queue, newest first.
CREATE INDEX IF NOT EXISTS tasks_created_idx ON tasks (created_at);
CREATE INDEX IF NOT EXISTS tasks_key_created_idx ON tasks (key_hash, created_at);
