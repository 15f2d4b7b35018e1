-- Credits. Every change of a balance is a ledger row with a unique (operation_id, kind), so a
-- retried operation is a no-op. accounts and holds are caches of the rows, updated in the same
-- transaction: accounts.balance = SUM(delta_balance), accounts.held = SUM(delta_held), and each
-- holds.remaining = the hold row's delta_held + the delta_held of the rows that settle it.
CREATE TABLE IF NOT EXISTS accounts (
  account TEXT PRIMARY KEY,
  balance BIGINT NOT NULL DEFAULT 0,
  held BIGINT NOT NULL DEFAULT 0,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  CHECK (held >= 0)
);

CREATE TABLE IF NOT EXISTS ledger (
  id BIGSERIAL PRIMARY KEY,
  account TEXT NOT NULL REFERENCES accounts (account),
  operation_id TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('grant', 'hold', 'capture', 'release', 'refund', 'adjustment')),
  delta_balance BIGINT NOT NULL DEFAULT 0,
  delta_held BIGINT NOT NULL DEFAULT 0,
  -- capture / release / refund: the hold this row settles
  hold_id TEXT,
  meta JSONB,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  UNIQUE (operation_id, kind)
);

CREATE INDEX IF NOT EXISTS ledger_account_idx ON ledger (account, id);
CREATE INDEX IF NOT EXISTS ledger_hold_idx ON ledger (hold_id) WHERE hold_id IS NOT NULL;

-- Open holds (a hold row leaves when it is settled to zero). The sweeper claims expired ones.
CREATE TABLE IF NOT EXISTS holds (
  hold_id TEXT PRIMARY KEY,
  account TEXT NOT NULL REFERENCES accounts (account),
  amount BIGINT NOT NULL,
  remaining BIGINT NOT NULL,
  expires_at TIMESTAMPTZ NOT NULL,
  -- who resolves it: 'request' and 'lease' holds are the billing sweeper's once expired;
  -- 'task' holds belong to the task engine, which refunds them at the task's deadline
  purpose TEXT NOT NULL DEFAULT 'request' CHECK (purpose IN ('request', 'lease', 'task')),
  -- the replica that owns it (leases), or NULL
  owner TEXT,
  meta JSONB,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  CHECK (remaining >= 0)
);

CREATE INDEX IF NOT EXISTS holds_expires_idx ON holds (expires_at);
CREATE INDEX IF NOT EXISTS holds_owner_idx ON holds (owner) WHERE owner IS NOT NULL;
