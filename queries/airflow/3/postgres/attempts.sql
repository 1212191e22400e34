-- attempts, Airflow 3.x on PostgreSQL: every try of every task instance.
-- Earlier tries are rows of task_instance_history; the latest try is the task_instance row,
-- unless history already holds that try number (a try being retried is in both).
-- Times leave as RFC 3339 text in UTC.
-- Parameters: $1 since, $2 until (activity window, RFC 3339), $3 dag_id LIKE pattern (escape \).
-- A line ending `-- onceonly: only when filtered` is left out when the audit has no --dag,
-- --since or --until: the semi-join to audited_runs then keeps every run and costs most of the read.
WITH tries AS (
    SELECT dag_id, task_id, map_index, run_id, try_number, state, start_date, end_date,
           hostname, pid, queued_dttm
    FROM task_instance_history
    UNION ALL
    SELECT ti.dag_id, ti.task_id, ti.map_index, ti.run_id, ti.try_number, ti.state, ti.start_date,
           ti.end_date, ti.hostname, ti.pid, ti.queued_dttm
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
       to_char(t.start_date AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS start_date,
       to_char(t.end_date AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS end_date,
       t.hostname::text AS hostname,
       t.pid::bigint AS pid,
       to_char(t.queued_dttm AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS queued_at,
       to_char(dr.data_interval_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS interval_start,
       to_char(dr.data_interval_end AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS interval_end,
       to_char(dr.logical_date AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS logical_date,
       to_char(dr.run_after AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS run_after,
       dr.conf::text AS conf,
       dr.clear_number::bigint AS clear_number,
       z.timezone::text AS dag_timezone
FROM tries AS t
JOIN audited_runs AS a ON a.dag_id = t.dag_id AND a.run_id = t.run_id  -- onceonly: only when filtered
JOIN dag_run AS dr ON dr.dag_id = t.dag_id AND dr.run_id = t.run_id
LEFT JOIN zones AS z ON z.dag_id = t.dag_id
WHERE t.try_number >= 1
ORDER BY t.dag_id, t.run_id, t.task_id, t.map_index, t.try_number
