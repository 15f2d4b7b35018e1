-- Usage per key, model and UTC day beside the hourly rollup (020): a month of every account read
-- from the hourly rows took 1.3 s at 10 million records (bench/RESULTS.md); from days it reads
-- 24 times fewer rows. The same trigger keeps both, one grouped upsert each per statement.
-- Statements end mid-line inside the body: migrations split on ';' at line ends.
CREATE TABLE IF NOT EXISTS usage_daily (
  day TIMESTAMPTZ NOT NULL,
  key_hash TEXT NOT NULL,
  model TEXT NOT NULL,
  key_name TEXT NOT NULL,
  account TEXT NOT NULL,
  requests BIGINT NOT NULL,
  errors BIGINT NOT NULL,
  input_tokens BIGINT NOT NULL,
  cached_input_tokens BIGINT NOT NULL,
  output_tokens BIGINT NOT NULL,
  credits BIGINT NOT NULL,
  PRIMARY KEY (key_hash, day, model)
);

CREATE INDEX IF NOT EXISTS usage_daily_account_idx ON usage_daily (account, day);
CREATE INDEX IF NOT EXISTS usage_daily_day_idx ON usage_daily (day);

INSERT INTO usage_daily (day, key_hash, model, key_name, account, requests, errors, input_tokens, cached_input_tokens, output_tokens, credits)
SELECT date_trunc('day', hour, 'UTC'), key_hash, model, max(key_name), max(account), sum(requests), sum(errors),
       sum(input_tokens), sum(cached_input_tokens), sum(output_tokens), sum(credits)
  FROM usage_hourly GROUP BY 1, 2, 3
ON CONFLICT DO NOTHING;

CREATE OR REPLACE FUNCTION usage_rollup() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  INSERT INTO usage_hourly AS h (hour, key_hash, model, key_name, account, requests, errors, input_tokens, cached_input_tokens, output_tokens, credits)
  SELECT date_trunc('hour', created_at, 'UTC'), key_hash, model, max(key_name), max(account), count(*), count(*) FILTER (WHERE status <> 'ok'),
         sum(input_tokens), sum(cached_input_tokens), sum(output_tokens), sum(credits)
    FROM new_usage GROUP BY 1, 2, 3
  ON CONFLICT (key_hash, hour, model) DO UPDATE SET
    requests = h.requests + EXCLUDED.requests, errors = h.errors + EXCLUDED.errors, input_tokens = h.input_tokens + EXCLUDED.input_tokens,
    cached_input_tokens = h.cached_input_tokens + EXCLUDED.cached_input_tokens, output_tokens = h.output_tokens + EXCLUDED.output_tokens,
    credits = h.credits + EXCLUDED.credits, key_name = EXCLUDED.key_name; INSERT INTO usage_daily AS d (day, key_hash, model, key_name, account, requests, errors, input_tokens, cached_input_tokens, output_tokens, credits)
  SELECT date_trunc('day', created_at, 'UTC'), key_hash, model, max(key_name), max(account), count(*), count(*) FILTER (WHERE status <> 'ok'),
         sum(input_tokens), sum(cached_input_tokens), sum(output_tokens), sum(credits)
    FROM new_usage GROUP BY 1, 2, 3
  ON CONFLICT (key_hash, day, model) DO UPDATE SET
    requests = d.requests + EXCLUDED.requests, errors = d.errors + EXCLUDED.errors, input_tokens = d.input_tokens + EXCLUDED.input_tokens,
    cached_input_tokens = d.cached_input_tokens + EXCLUDED.cached_input_tokens, output_tokens = d.output_tokens + EXCLUDED.output_tokens,
    credits = d.credits + EXCLUDED.credits, key_name = EXCLUDED.key_name; RETURN NULL; END $fn$;
