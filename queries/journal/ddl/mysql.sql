-- The recommended operation journal (MySQL 8). One row per phase of one try's operation.
-- onceonly reads these column names without any [journal.columns] mapping.
CREATE TABLE IF NOT EXISTS onceonly_journal (
    op_key              VARCHAR(512) NOT NULL,  -- the idempotency key sent to the provider
    dag_id              VARCHAR(250) NOT NULL,
    task_id             VARCHAR(250) NOT NULL,
    map_index           INT          NOT NULL DEFAULT -1,
    run_id              VARCHAR(250) NOT NULL,
    try_number          INT          NOT NULL,
    phase               VARCHAR(16)  NOT NULL CHECK (phase IN ('intent', 'committed', 'failed', 'reconciled')),
    external_id         VARCHAR(512),           -- the provider's id, on committed/reconciled rows
    payload_hash        VARCHAR(128),           -- e.g. sha256 of the request body
    recorded_at         DATETIME(6)  NOT NULL,  -- UTC
    approval_id         VARCHAR(250),
    approval_expires_at DATETIME(6),
    -- MySQL has no partial index: this column holds the key on committed rows only, so its
    -- unique index allows one committed object per key.
    committed_key       VARCHAR(512) AS (CASE WHEN phase = 'committed' THEN op_key END) STORED,
    -- Writing a phase twice (a retried journal write) is a no-op, not a second row.
    UNIQUE KEY onceonly_journal_phase (op_key(191), run_id(191), map_index, try_number, phase),
    UNIQUE KEY onceonly_journal_one_commit (committed_key(191)),
    KEY onceonly_journal_by_run (dag_id(191), run_id(191))
);
