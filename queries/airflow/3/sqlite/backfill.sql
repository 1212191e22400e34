-- A planned Airflow 3 backfill (SQLite). ?1 is the backfill id.
SELECT CAST(dag_id AS TEXT) AS dag_id,
       CAST(from_date AS TEXT) AS from_date,
       CAST(to_date AS TEXT) AS to_date,
       CAST(reprocess_behavior AS TEXT) AS reprocess_behavior
FROM backfill
WHERE id = ?1
