-- try_bounds, Airflow 2.x and 3.x on SQLite: the earliest try start, the latest try start and
-- the latest try end of the tries the attempts query reads, so that the provider listing can
-- start before they are read (SPEC §3's window). A plain scan of both try tables: unlike the
-- attempts query it neither drops a task_instance row whose try history holds too nor joins
-- dag_run, so it can differ from the tries read in rare cases; the reader compares it with the
-- tries once they are read and lists again if it did (sources::load).
-- Parameters: ?1 since, ?2 until (activity window, 'YYYY-MM-DD HH:MM:SS.ffffff' UTC),
--             ?3 dag_id LIKE pattern (escape character \).
-- Used when the audit has a --dag, --since or --until (so the line marked `-- onceonly: only
-- when filtered` is always kept); without them, try_bounds_of.sql scans the two tables at
-- once, on connections of their own.
WITH tries AS (
    SELECT dag_id, run_id, start_date, end_date FROM task_instance_history WHERE try_number >= 1
    UNION ALL
    SELECT dag_id, run_id, start_date, end_date FROM task_instance WHERE try_number >= 1
),
audited_runs AS (
    SELECT DISTINCT dag_id, run_id
    FROM tries
    WHERE dag_id LIKE ?3 ESCAPE '\'
      AND ((start_date >= ?1 AND start_date < ?2) OR (end_date >= ?1 AND end_date < ?2))
)
SELECT CAST(min(t.start_date) AS TEXT) AS first_start,
       CAST(max(t.start_date) AS TEXT) AS last_start,
       CAST(max(t.end_date) AS TEXT) AS last_end
FROM tries AS t
JOIN audited_runs AS a ON a.dag_id = t.dag_id AND a.run_id = t.run_id  -- onceonly: only when filtered
