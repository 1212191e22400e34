-- runs, Airflow 2.x on SQLite: each DAG run's columns of `attempts`, keyed by dag_id and run_id,
-- for the tries of tries.sql (joined to them by the reader). A cell that fails its check
-- fails the read only where a try is joined to its run.
-- Parameters: ?3 dag_id LIKE pattern (escape character \); '%' when the audit has no --dag.
-- (?1 and ?2 are the activity window, which only the tries use.)
-- The DAG's own zone for key templates: dag.timezone of its newest serialized version (an
-- IANA name, or a fixed offset in seconds); NULL when the DAG is serialized compressed.
-- (SQLite takes the bare column from the row where MAX() is found.)
WITH zones AS (
    SELECT dag_id, CAST(json_extract(data, '$.dag.timezone') AS TEXT) AS timezone,
           MAX(last_updated) AS newest
    FROM serialized_dag
    GROUP BY dag_id
)
SELECT CAST(dr.dag_id AS TEXT) AS dag_id,
       CAST(dr.run_id AS TEXT) AS run_id,
       CAST(dr.run_type AS TEXT) AS run_type,
       CAST(dr.state AS TEXT) AS run_state,
       CAST(dr.data_interval_start AS TEXT) AS interval_start,
       CAST(dr.data_interval_end AS TEXT) AS interval_end,
       CAST(dr.execution_date AS TEXT) AS logical_date,
       -- 2.x has no run_after: a run is scheduled for its logical date.
       CAST(dr.execution_date AS TEXT) AS run_after,
       -- 2.x pickles conf: the reader decodes the hex.
       hex(dr.conf) AS conf_pickle,
       dr.clear_number AS clear_number,
       z.timezone AS dag_timezone
FROM dag_run AS dr
LEFT JOIN zones AS z ON z.dag_id = dr.dag_id
WHERE dr.dag_id LIKE ?3 ESCAPE '\'
