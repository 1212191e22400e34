-- What a planned Airflow 3 backfill decided for each logical date (SQLite): a run it created or
-- cleared (dag_run_id), or why it leaves the date alone (exception_reason: a run exists, or is
-- in flight). ?1 is the backfill id.
SELECT CAST(logical_date AS TEXT) AS logical_date,
       CAST(exception_reason AS TEXT) AS exception_reason
FROM backfill_dag_run
WHERE backfill_id = ?1 AND logical_date IS NOT NULL
