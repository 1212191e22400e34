-- attempts, Airflow 2.x on PostgreSQL: every try of every task instance.
-- Earlier tries are rows of task_instance_history; the latest try is the task_instance row,
-- unless history already holds that try number (a try being retried is in both).
-- Times leave as timestamptz, which the reader takes in the binary format: microseconds, with
-- nothing for the server to format or the reader to parse.
-- The latest try's last heartbeat is its LocalTaskJob's (`job.latest_heartbeat`); history
-- rows are finished tries and have none.
-- A try whose run has no dag_run row is kept (LEFT JOIN, `has_run` 0) and tries of every
-- number are read: the reader refuses the first and judges the second (0: never ran; below 0:
-- bad input), where a JOIN or a WHERE would drop them unseen.
-- Parameters: $1 since, $2 until (activity window, RFC 3339), $3 dag_id LIKE pattern (escape \).
-- A line ending `-- onceonly: only when filtered` is left out when the audit has no --dag,
-- --since or --until: the semi-join to audited_runs then keeps every run and costs most of the read.
-- `tries` is inlined wherever it is used (NOT MATERIALIZED), so the planner sees the tables'
-- real sizes and hash-joins dag_run; there is no ORDER BY: the audit does not depend on the
-- rows' order, and sorting a million wide rows spilled to disk.
WITH tries AS NOT MATERIALIZED (
    SELECT dag_id, task_id, map_index, run_id, try_number, state, start_date, end_date,
           hostname, pid, queued_dttm, NULL::timestamptz AS heartbeat_at
    FROM task_instance_history
    UNION ALL
    SELECT ti.dag_id, ti.task_id, ti.map_index, ti.run_id, ti.try_number, ti.state, ti.start_date,
           ti.end_date, ti.hostname, ti.pid, ti.queued_dttm,
           {heartbeat} AS heartbeat_at
    FROM task_instance AS ti
    WHERE NOT EXISTS (
        SELECT 1 FROM task_instance_history AS h
        WHERE h.dag_id = ti.dag_id AND h.task_id = ti.task_id AND h.run_id = ti.run_id
          AND h.map_index = ti.map_index AND h.try_number = ti.try_number
    )
),
-- The DAG's own zone for key templates: dag.timezone of its newest serialized version (an
-- IANA name, or a fixed offset in seconds); NULL when the DAG is serialized compressed.
zones AS (
    SELECT DISTINCT ON (dag_id) dag_id, (data::jsonb -> 'dag' ->> 'timezone') AS timezone
    FROM serialized_dag
    ORDER BY dag_id, last_updated DESC
),
audited_runs AS (
    SELECT DISTINCT dag_id, run_id
    FROM tries
    WHERE dag_id LIKE $3 ESCAPE '\'
      AND ((start_date >= $1::timestamptz AND start_date < $2::timestamptz)
        OR (end_date >= $1::timestamptz AND end_date < $2::timestamptz))
)
SELECT t.dag_id::text AS dag_id,
       t.task_id::text AS task_id,
       t.map_index::bigint AS map_index,
       t.run_id::text AS run_id,
       dr.run_type::text AS run_type,
       t.try_number::bigint AS try_number,
       t.state::text AS state,
       t.start_date AS start_date,
       t.end_date AS end_date,
       t.hostname::text AS hostname,
       t.pid::bigint AS pid,
       t.queued_dttm AS queued_at,
       t.heartbeat_at AS heartbeat_at,
       dr.state::text AS run_state,
       dr.data_interval_start AS interval_start,
       dr.data_interval_end AS interval_end,
       dr.execution_date AS logical_date,
       -- 2.x has no run_after: a run is scheduled for its logical date.
       dr.execution_date AS run_after,
       -- 2.x pickles conf: the reader decodes the hex.
       encode(dr.conf, 'hex') AS conf_pickle,
       dr.clear_number::bigint AS clear_number,
       z.timezone::text AS dag_timezone,
       CASE WHEN dr.run_id IS NULL THEN 0 ELSE 1 END::bigint AS has_run
FROM tries AS t
JOIN audited_runs AS a ON a.dag_id = t.dag_id AND a.run_id = t.run_id  -- onceonly: only when filtered
LEFT JOIN dag_run AS dr ON dr.dag_id = t.dag_id AND dr.run_id = t.run_id
LEFT JOIN zones AS z ON z.dag_id = t.dag_id
