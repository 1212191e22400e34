-- The recommended operation journal (SQLite). One row per phase of one try's operation.
-- onceonly reads these column names without any [journal.columns] mapping.
CREATE TABLE IF NOT EXISTS onceonly_journal (
    op_key              TEXT    NOT NULL,  -- the idempotency key sent to the provider
    dag_id              TEXT    NOT NULL,
    task_id             TEXT    NOT NULL,
    map_index           INTEGER NOT NULL DEFAULT -1,
    run_id              TEXT    NOT NULL,
    try_number          INTEGER NOT NULL,
    phase               TEXT    NOT NULL CHECK (phase IN ('intent', 'committed', 'failed', 'reconciled')),
    external_id         TEXT,              -- the provider's id, on committed/reconciled rows
    payload_hash        TEXT,              -- e.g. sha256 of the request body
    recorded_at         TEXT    NOT NULL,  -- RFC 3339, UTC
    approval_id         TEXT,
    approval_expires_at TEXT,
    -- Writing a phase twice (a retried journal write) is a no-op, not a second row.
    UNIQUE (op_key, run_id, map_index, try_number, phase)
);
-- One committed object per key: a second writer (a zombie try, a racing re-run) fails here
-- instead of recording a second object, and learns the first one by reading the row.
CREATE UNIQUE INDEX IF NOT EXISTS onceonly_journal_one_commit
    ON onceonly_journal (op_key) WHERE phase = 'committed';
CREATE INDEX IF NOT EXISTS onceonly_journal_by_run ON onceonly_journal (dag_id, run_id);
