-- A replica's lease taken or grown in one statement (ledger.ts topUpLease, from leases.ts). As a
-- transaction of separate statements it was seven round trips for a new lease and nine for a
-- top-up, holding the account's row lock across them: the first request of an account on a
-- replica, and its first after the lease was handed back for being idle, waited for all of them.
-- It writes what that transaction wrote: a new lease as hold() writes a hold, a growth as a
-- 'hold' row pointing at the lease (hold_id), under the same check and in the ledger's lock order
-- (the hold before its account). Replicas of the previous version, during a rolling upgrade,
-- still write the same rows in separate statements; both keep the invariant.
--   p_lease: the lease to grow, or NULL; when it is gone (released by a sweeper) a new one is
--   taken as p_new_lease. Takes p_shortfall plus p_slice, or plus half of what is free beyond
--   the shortfall if less. Returns outcome 'refused' (free is below the shortfall; nothing is
--   written), 'grown' or 'taken', what was free before, and what the lease took. A replayed
--   operation id writes nothing and returns what it would have taken.
-- Statements end mid-line inside the body: migrations split on ';' at line ends.

CREATE OR REPLACE FUNCTION billing_lease_topup(p_account TEXT, p_lease TEXT, p_topup_op TEXT, p_new_lease TEXT, p_shortfall BIGINT, p_slice BIGINT,
    p_expires TIMESTAMPTZ, p_owner TEXT) RETURNS TABLE (outcome TEXT, free BIGINT, took BIGINT) LANGUAGE plpgsql AS $fn$
DECLARE
  f BIGINT; t BIGINT; open_lease BOOLEAN := false; BEGIN
  IF p_lease IS NOT NULL THEN
    PERFORM 1 FROM holds WHERE hold_id = p_lease FOR UPDATE; open_lease := FOUND; END IF; SELECT a.balance - a.held INTO f FROM accounts a
   WHERE a.account = p_account FOR UPDATE; IF f IS NULL OR f < p_shortfall THEN
    RETURN QUERY SELECT 'refused'::text, COALESCE(f, 0::bigint), 0::bigint; RETURN; END IF; t := p_shortfall + LEAST(p_slice, (f - p_shortfall) / 2); IF open_lease THEN
    IF NOT EXISTS (SELECT 1 FROM ledger l WHERE l.operation_id = p_topup_op AND l.kind = 'hold') THEN
      UPDATE accounts SET held = held + t, updated_at = now() WHERE account = p_account; INSERT INTO ledger (account, operation_id, kind, delta_held, hold_id)
      VALUES (p_account, p_topup_op, 'hold', t, p_lease); UPDATE holds SET amount = amount + t, remaining = remaining + t,
      expires_at = GREATEST(expires_at, p_expires) WHERE hold_id = p_lease; END IF; RETURN QUERY SELECT 'grown'::text, f, t; RETURN; END IF; IF NOT EXISTS (
      SELECT 1 FROM ledger l WHERE l.operation_id = p_new_lease AND l.kind = 'hold') THEN
    UPDATE accounts SET held = held + t, updated_at = now() WHERE account = p_account; INSERT INTO ledger (account, operation_id, kind, delta_held)
    VALUES (p_account, p_new_lease, 'hold', t); INSERT INTO holds (hold_id, account, amount, remaining, expires_at, purpose, owner)
    VALUES (p_new_lease, p_account, t, t, p_expires, 'lease', p_owner); END IF; RETURN QUERY SELECT 'taken'::text, f, t; END
$fn$;
