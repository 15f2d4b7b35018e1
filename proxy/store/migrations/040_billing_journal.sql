-- The billing journal as a table (TOLLGATE_BILLING_JOURNAL_TABLE, proxy/billing/table-journal.ts):
-- a settled request's charge becomes durable as one row here (one row for every charge that
-- settled meanwhile) before its answer's last bytes, and billing_commit() takes the rows' lines
-- behind, in large batches, as it takes a local journal's. A row is an insert into a table with
-- one index: about a quarter of billing_commit()'s work for one request, and the WAL flush is the
-- same. The rows of a replica that died are folded by any replica's sweeper once they are old;
-- lines are billing_commit() records, so folding a row twice charges nothing twice.
CREATE TABLE IF NOT EXISTS billing_journal (
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at TIMESTAMPTZ NOT NULL DEFAULT now(),
  -- billing_commit() records, one JSON object a line.
  lines TEXT NOT NULL
);
