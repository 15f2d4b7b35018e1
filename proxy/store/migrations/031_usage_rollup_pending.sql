-- The rollups (020, 021) are no longer upserted in the transaction that writes the records: the
-- trigger appends one row per key, model and hour to usage_rollup_pending (a plain insert into a
-- table without indexes), and usage_rollup_fold(), which every replica runs every second or so,
-- moves those rows into usage_hourly and usage_daily in one transaction. The two upserts were a
-- quarter of PostgreSQL's work in a chat request's group commit (bench/RESULTS.md). Readers
-- add the pending rows to the rollups in one statement, so they see every record whether its
-- rows were folded yet or not (a fold's DELETE and upserts commit together). During a rolling
-- upgrade a replica of the previous version reads the rollups alone: its charts lag by the fold.
-- Statements end mid-line inside the bodies: migrations split on ';' at line ends.

-- The hourly rollup's columns, without its key and indexes: rows are only appended, then deleted.
CREATE TABLE IF NOT EXISTS usage_rollup_pending (LIKE usage_hourly);

CREATE OR REPLACE FUNCTION usage_rollup() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  INSERT INTO usage_rollup_pending (hour, key_hash, model, key_name, account, requests, errors, input_tokens, cached_input_tokens, output_tokens, credits)
  SELECT date_trunc('hour', created_at, 'UTC'), key_hash, model, max(key_name), max(account), count(*), count(*) FILTER (WHERE status <> 'ok'),
         sum(input_tokens), sum(cached_input_tokens), sum(output_tokens), sum(credits)
    FROM new_usage GROUP BY 1, 2, 3; RETURN NULL; END $fn$;

-- One fold at a time per schema (the others return at once; advisory locks are database-wide, and
-- installations in other schemas of the database fold their own); rows are upserted in key order,
-- so a fold never waits on a lock another holds in the opposite order. Returns how many pending
-- rows it moved.
CREATE OR REPLACE FUNCTION usage_rollup_fold() RETURNS INT LANGUAGE plpgsql AS $fn$
DECLARE moved INT; BEGIN
  IF NOT pg_try_advisory_xact_lock(7470708, hashtext(current_schema())) THEN RETURN 0; END IF; WITH gone AS (
      DELETE FROM usage_rollup_pending RETURNING *
    ), g AS (
      SELECT hour, key_hash, model, max(key_name) AS key_name, max(account) AS account, sum(requests) AS requests, sum(errors) AS errors,
             sum(input_tokens) AS input_tokens, sum(cached_input_tokens) AS cached_input_tokens, sum(output_tokens) AS output_tokens, sum(credits) AS credits
        FROM gone GROUP BY 1, 2, 3
    ), h AS (
      INSERT INTO usage_hourly AS h (hour, key_hash, model, key_name, account, requests, errors, input_tokens, cached_input_tokens, output_tokens, credits)
      SELECT * FROM g ORDER BY key_hash, hour, model
      ON CONFLICT (key_hash, hour, model) DO UPDATE SET
        requests = h.requests + EXCLUDED.requests, errors = h.errors + EXCLUDED.errors, input_tokens = h.input_tokens + EXCLUDED.input_tokens,
        cached_input_tokens = h.cached_input_tokens + EXCLUDED.cached_input_tokens, output_tokens = h.output_tokens + EXCLUDED.output_tokens,
        credits = h.credits + EXCLUDED.credits, key_name = EXCLUDED.key_name
    ), d AS (
      INSERT INTO usage_daily AS d (day, key_hash, model, key_name, account, requests, errors, input_tokens, cached_input_tokens, output_tokens, credits)
      SELECT date_trunc('day', hour, 'UTC'), key_hash, model, max(key_name), max(account), sum(requests), sum(errors),
             sum(input_tokens), sum(cached_input_tokens), sum(output_tokens), sum(credits)
        FROM g GROUP BY 1, 2, 3 ORDER BY 2, 1, 3
      ON CONFLICT (key_hash, day, model) DO UPDATE SET
        requests = d.requests + EXCLUDED.requests, errors = d.errors + EXCLUDED.errors, input_tokens = d.input_tokens + EXCLUDED.input_tokens,
        cached_input_tokens = d.cached_input_tokens + EXCLUDED.cached_input_tokens, output_tokens = d.output_tokens + EXCLUDED.output_tokens,
        credits = d.credits + EXCLUDED.credits, key_name = EXCLUDED.key_name
    )
  SELECT count(*)::int INTO moved FROM gone; RETURN moved; END $fn$;
