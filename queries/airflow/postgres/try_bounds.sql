-- try_bounds, Airflow 2.x and 3.x on PostgreSQL: the earliest try start, the latest try start
-- and the latest try end of the tries the attempts query reads, so that the provider listing
-- can start before they are read (SPEC §3's window). A plain scan of both try tables: unlike
-- the attempts query it neither drops a task_instance row whose try history holds too nor
-- joins dag_run, so it can differ from the tries read in rare cases; the reader compares it
-- with the tries once they are read and lists again if it did (sources::load).
-- Parameters: $1 since, $2 until (activity window, RFC 3339), $3 dag_id LIKE pattern (escape \).
-- A line ending `-- onceonly: only when filtered` is left out when the audit has no --dag,
-- --since or --until.
WITH tries AS NOT MATERIALIZED (
    SELECT dag_id, run_id, start_date, end_date FROM task_instance_history WHERE try_number >= 1
    UNION ALL
    SELECT dag_id, run_id, start_date, end_date FROM task_instance WHERE try_number >= 1
),
audited_runs AS (
    SELECT DISTINCT dag_id, run_id
    FROM tries
    WHERE dag_id LIKE $3 ESCAPE '\'
      AND ((start_date >= $1::timestamptz AND start_date < $2::timestamptz)
        OR (end_date >= $1::timestamptz AND end_date < $2::timestamptz))
)
SELECT min(t.start_date) AS first_start,
       max(t.start_date) AS last_start,
       max(t.end_date) AS last_end
FROM tries AS t
JOIN audited_runs AS a ON a.dag_id = t.dag_id AND a.run_id = t.run_id  -- onceonly: only when filtered
