-- A planned Airflow 3 backfill (PostgreSQL). $1 is the backfill id.
SELECT dag_id::text AS dag_id,
       to_char(from_date AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS from_date,
       to_char(to_date AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS to_date,
       reprocess_behavior::text AS reprocess_behavior
FROM backfill
WHERE id = $1
