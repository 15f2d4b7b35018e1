-- One group commit of metered chat: many requests' captures and usage records in one
-- statement, as a PL/pgSQL function so its plan is prepared once per connection (PGlite plans
-- in WebAssembly on the gateway's own thread; planning this statement cost more than running it).
-- Data-modifying CTEs, in order: lock the leases (FOR UPDATE, hold id order: every ledger
-- writer locks a hold before its account), work out what each capture settles of its lease (at
-- most what the lease has left after the captures before it; any excess is charged to the
-- balance alone), insert the capture rows (a replayed operation id is skipped by the unique
-- (operation_id, kind)), apply exactly the inserted rows to accounts, leases and key spend, and
-- insert the usage records. A capture row carries no meta: its usage record has the same
-- operation id. Returns ('applied', operation id) and ('lost', lease id) rows.
-- Statements end mid-line inside the body: migrations split on ';' at line ends.
CREATE OR REPLACE FUNCTION billing_commit(captures JSON, records JSON) RETURNS TABLE (outcome TEXT, ref TEXT) LANGUAGE plpgsql AS $fn$
BEGIN
  RETURN QUERY
  WITH v AS (
      SELECT * FROM json_to_recordset(captures) AS v(ord INT, account TEXT, op TEXT, credits BIGINT, hold TEXT, key_hash TEXT)
    ), lk AS (
      SELECT hold_id, remaining FROM holds WHERE hold_id IN (SELECT hold FROM v) ORDER BY hold_id FOR UPDATE
    ), c AS (
      SELECT v.*, CASE WHEN lk.hold_id IS NULL THEN 0 ELSE LEAST(v.credits, GREATEST(0, lk.remaining - COALESCE(SUM(v.credits)
               OVER (PARTITION BY v.hold ORDER BY v.ord ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0))) END AS settles
        FROM v LEFT JOIN lk ON lk.hold_id = v.hold
    ), ins AS (
      INSERT INTO ledger (account, operation_id, kind, delta_balance, delta_held, hold_id)
      SELECT account, op, 'capture', -credits, -settles, hold FROM c ORDER BY ord
      ON CONFLICT (operation_id, kind) DO NOTHING
      RETURNING account, operation_id, delta_balance, delta_held, hold_id
    ), acc AS (
      UPDATE accounts a SET balance = a.balance + s.db, held = a.held + s.dh, updated_at = now()
        FROM (SELECT account, SUM(delta_balance)::bigint AS db, SUM(delta_held)::bigint AS dh FROM ins GROUP BY account) s
       WHERE a.account = s.account
    ), lease AS (
      UPDATE holds h SET remaining = h.remaining + s.dh
        FROM (SELECT hold_id, SUM(delta_held)::bigint AS dh FROM ins WHERE hold_id IS NOT NULL GROUP BY hold_id) s
       WHERE h.hold_id = s.hold_id AND s.dh <> 0
    ), spend AS (
      INSERT INTO key_spend (key_hash, spent)
      SELECT v.key_hash, -SUM(ins.delta_balance)::bigint FROM ins JOIN v ON v.op = ins.operation_id GROUP BY v.key_hash
      ON CONFLICT (key_hash) DO UPDATE SET spent = key_spend.spent + EXCLUDED.spent, updated_at = now()
    ), rec AS (
      -- Free requests (errors before the first byte, zero usage) have no ledger row to
      -- deduplicate on: their own unique operation id does it.
      INSERT INTO usage_records (operation_id, request_id, key_name, key_hash, account, group_name, model, upstream_model, protocol,
        input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, reasoning_tokens, credits, usage_source, status,
        http_status, latency_ms, ttft_ms)
      SELECT u.* FROM json_to_recordset(records) AS u(operation_id TEXT, request_id TEXT, key_name TEXT, key_hash TEXT, account TEXT,
        group_name TEXT, model TEXT, upstream_model TEXT, protocol TEXT, input_tokens BIGINT, cached_input_tokens BIGINT,
        cache_write_tokens BIGINT, output_tokens BIGINT, reasoning_tokens BIGINT, credits BIGINT, usage_source TEXT, status TEXT,
        http_status INT, latency_ms INT, ttft_ms INT)
       WHERE u.credits = 0 OR u.operation_id IN (SELECT operation_id FROM ins)
      ON CONFLICT (operation_id) DO NOTHING
      RETURNING operation_id
    )
    -- (acc, lease and spend run to completion whether read or not)
    SELECT 'applied'::text, ins.operation_id FROM ins
    UNION SELECT 'applied'::text, rec.operation_id FROM rec
    UNION SELECT 'lost'::text, v.hold FROM v WHERE v.hold IS NOT NULL AND v.hold NOT IN (SELECT lk.hold_id FROM lk); END
$fn$;
