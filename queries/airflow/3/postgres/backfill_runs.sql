-- What a planned Airflow 3 backfill decided for each logical date (PostgreSQL): a run it created
-- or cleared (dag_run_id), or why it leaves the date alone (exception_reason: a run exists, or
-- is in flight). $1 is the backfill id.
SELECT to_char(logical_date AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS logical_date,
       exception_reason::text AS exception_reason
FROM backfill_dag_run
WHERE backfill_id = $1 AND logical_date IS NOT NULL
