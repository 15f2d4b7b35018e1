-- Group commits write ONE capture row per lease (per account, for captures without a lease)
-- instead of one per request: a request's charge and its idempotency live in its usage record
-- (operation_id is unique), and the capture row carries the sum of the records inserted with it.
-- Half the rows and index entries per request; the ledger invariant is unchanged (balance and
-- held are the sums of the ledger rows; a lease's remaining is its rows' sum).
-- The two-argument billing_commit() of migration 006 stays: during a rolling upgrade, replicas of
-- the previous version still call it, and both keep the invariant.
-- Statements end mid-line inside the body: migrations split on ';' at line ends.

CREATE OR REPLACE FUNCTION billing_commit(records JSON) RETURNS TABLE (applied INT, lost TEXT[]) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
BEGIN
  RETURN QUERY
  WITH v AS (
      -- Short keys: the batch is parsed as JSON on every commit, and the names were most of it.
      SELECT o AS operation_id, l AS lease, r AS request_id, kn AS key_name, kh AS key_hash, a AS account, g AS group_name,
             m AS model, um AS upstream_model, p AS protocol, it AS input_tokens, ct AS cached_input_tokens,
             wt AS cache_write_tokens, ot AS output_tokens, rt AS reasoning_tokens, c AS credits, us AS usage_source, s AS status,
             hs AS http_status, ms AS latency_ms, tt AS ttft_ms
        FROM json_to_recordset(records) AS x(o TEXT, l TEXT, r TEXT, kn TEXT, kh TEXT, a TEXT, g TEXT, m TEXT, um TEXT, p TEXT,
             it BIGINT, ct BIGINT, wt BIGINT, ot BIGINT, rt BIGINT, c BIGINT, us TEXT, s TEXT, hs INT, ms INT, tt INT)
    ), lk AS (
      -- Leases first, in hold id order: every ledger writer locks a hold before its account. A
      -- lease locked by another commit is read as that commit left it.
      SELECT hold_id, remaining FROM holds WHERE hold_id IN (SELECT lease FROM v) ORDER BY hold_id FOR UPDATE
    ), rec AS (
      -- A replayed operation id (a retried commit that did land) is skipped, and so is its charge.
      INSERT INTO usage_records (operation_id, request_id, key_name, key_hash, account, group_name, model, upstream_model, protocol,
        input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, reasoning_tokens, credits, usage_source, status,
        http_status, latency_ms, ttft_ms)
      SELECT operation_id, request_id, key_name, key_hash, account, group_name, model, upstream_model, protocol,
        input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, reasoning_tokens, credits, usage_source, status,
        http_status, latency_ms, ttft_ms FROM v
      ON CONFLICT (operation_id) DO NOTHING
      RETURNING operation_id, account, key_hash, credits
    ), charged AS (
      SELECT rec.*, v.lease FROM rec JOIN v USING (operation_id) WHERE rec.credits > 0
    ), per AS (
      SELECT account, lease, SUM(credits)::bigint AS credits, COUNT(*) AS requests, MIN(operation_id) AS first FROM charged GROUP BY account, lease
    ), c AS (
      -- A capture settles at most what its lease has left; any excess is charged to the balance
      -- alone (actual cost may exceed the hold). A lease already released settles nothing (and
      -- LEAST ignores NULLs, hence the CASE).
      SELECT per.*, CASE WHEN h.hold_id IS NULL THEN 0 ELSE LEAST(per.credits, h.remaining) END AS settles, (per.lease IS NOT NULL AND h.hold_id IS NULL) AS gone
        FROM per LEFT JOIN lk h ON h.hold_id = per.lease
    ), ins AS (
      -- Named after a request of this commit: an operation id is inserted once, so this one is new.
      INSERT INTO ledger (account, operation_id, kind, delta_balance, delta_held, hold_id, meta)
      SELECT account, 'commit:' || first, 'capture', -credits, -settles, lease, jsonb_build_object('requests', requests) FROM c
      RETURNING account, delta_balance, delta_held, hold_id
    ), acc AS (
      UPDATE accounts a SET balance = a.balance + s.db, held = a.held + s.dh, updated_at = now()
        FROM (SELECT account, SUM(delta_balance)::bigint AS db, SUM(delta_held)::bigint AS dh FROM ins GROUP BY account) s
       WHERE a.account = s.account
    ), lease AS (
      UPDATE holds h SET remaining = h.remaining + ins.delta_held FROM ins WHERE h.hold_id = ins.hold_id AND ins.delta_held <> 0
    ), spend AS (
      INSERT INTO key_spend (key_hash, spent)
      SELECT key_hash, SUM(credits)::bigint FROM charged GROUP BY key_hash
      ON CONFLICT (key_hash) DO UPDATE SET spent = key_spend.spent + EXCLUDED.spent, updated_at = now()
    )
    -- (acc, lease and spend run to completion whether read or not)
    SELECT (SELECT COUNT(*)::int FROM rec), ARRAY(SELECT c.lease FROM c WHERE c.gone); END
$fn$;
