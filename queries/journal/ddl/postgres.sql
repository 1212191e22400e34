-- The recommended operation journal (PostgreSQL). One row per phase of one try's operation.
-- onceonly reads these column names without any [journal.columns] mapping.
CREATE TABLE IF NOT EXISTS onceonly_journal (
    op_key              text        NOT NULL,  -- the idempotency key sent to the provider
    dag_id              text        NOT NULL,
    task_id             text        NOT NULL,
    map_index           integer     NOT NULL DEFAULT -1,
    run_id              text        NOT NULL,
    try_number          integer     NOT NULL,
    phase               text        NOT NULL CHECK (phase IN ('intent', 'committed', 'failed', 'reconciled')),
    external_id         text,                  -- the provider's id, on committed/reconciled rows
    payload_hash        text,                  -- e.g. sha256 of the request body
    recorded_at         timestamptz NOT NULL DEFAULT now(),
    approval_id         text,
    approval_expires_at timestamptz,
    -- Writing a phase twice (a retried journal write) is a no-op, not a second row.
    UNIQUE (op_key, run_id, map_index, try_number, phase)
);
-- One committed object per key: a second writer (a zombie try, a racing re-run) fails here
-- instead of recording a second object, and learns the first one by reading the row.
CREATE UNIQUE INDEX IF NOT EXISTS onceonly_journal_one_commit
    ON onceonly_journal (op_key) WHERE phase = 'committed';
CREATE INDEX IF NOT EXISTS onceonly_journal_by_run ON onceonly_journal (dag_id, run_id);
