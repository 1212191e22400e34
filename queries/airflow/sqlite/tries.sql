-- tries, Airflow 2.x and 3.x on SQLite: every try of every task instance, without its run's
-- columns (the reader joins each try to its row of runs.sql by dag_id and run_id).
-- Earlier tries are rows of task_instance_history; the latest try is the task_instance row,
-- unless history already holds that try number (a try being retried is in both). Every
-- history row comes first, then every task_instance row marked `latest`; the reader leaves out
-- a latest row whose try it has read from the history. SQLite would look each task_instance
-- row up in the history's index (a b-tree descent a try, most of this query's time).
-- `{heartbeat}` is the latest try's last heartbeat, as the reader fills it in for the major
-- version: Airflow 3 keeps it on the row (`last_heartbeat_at`), Airflow 2 on the try's
-- LocalTaskJob (`job.latest_heartbeat`). History rows are finished tries: they have none.
-- Both arms give it as TEXT: arms of different affinities keep SQLite from flattening the
-- compound, and then it no longer gives the history's rows first.
-- Parameters: ?1 since, ?2 until (activity window, 'YYYY-MM-DD HH:MM:SS.ffffff' UTC),
--             ?3 dag_id LIKE pattern (escape character \).
-- A line ending `-- onceonly: only when filtered` is left out when the audit has no --dag,
-- --since or --until: the semi-join to audited_runs then keeps every run and costs most of the read.
-- The integers are not CAST: a text such as 'abc' would become 0; the reader refuses it naming
-- the row. Nor are tries left out here: a try number below 1 is the reader's to judge (0: the
-- instance never ran; below 0: bad input).
-- No ORDER BY: the audit does not depend on row order, and sorting a million tries here took
-- a quarter of the read.
-- No join to dag_run: SQLite joins by looking each try's run up in dag_run's index and then in
-- the table, two b-tree descents a try; the runs are read in one scan instead (runs.sql) and
-- joined by hash as the tries arrive.
WITH tries AS (
    SELECT dag_id, task_id, map_index, run_id, try_number, state, start_date, end_date,
           hostname, pid, queued_dttm, CAST(NULL AS TEXT) AS heartbeat_at, 0 AS latest
    FROM task_instance_history
    UNION ALL
    SELECT ti.dag_id, ti.task_id, ti.map_index, ti.run_id, ti.try_number, ti.state, ti.start_date,
           ti.end_date, ti.hostname, ti.pid, ti.queued_dttm, CAST({heartbeat} AS TEXT) AS heartbeat_at, 1 AS latest
    FROM task_instance AS ti
),
-- A latest row whose try the history holds does not make its run audited: only the tries
-- read do.
audited_runs AS (
    SELECT DISTINCT dag_id, run_id
    FROM tries AS t
    WHERE dag_id LIKE ?3 ESCAPE '\'
      AND ((start_date >= ?1 AND start_date < ?2) OR (end_date >= ?1 AND end_date < ?2))
      AND NOT (t.latest = 1 AND EXISTS (
          SELECT 1 FROM task_instance_history AS h
          WHERE h.dag_id = t.dag_id AND h.task_id = t.task_id AND h.run_id = t.run_id
            AND h.map_index = t.map_index AND h.try_number = t.try_number
      ))
)
SELECT CAST(t.dag_id AS TEXT) AS dag_id,
       CAST(t.task_id AS TEXT) AS task_id,
       t.map_index AS map_index,
       CAST(t.run_id AS TEXT) AS run_id,
       t.try_number AS try_number,
       CAST(t.state AS TEXT) AS state,
       CAST(t.start_date AS TEXT) AS start_date,
       CAST(t.end_date AS TEXT) AS end_date,
       CAST(t.hostname AS TEXT) AS hostname,
       t.pid AS pid,
       CAST(t.queued_dttm AS TEXT) AS queued_at,
       CAST(t.heartbeat_at AS TEXT) AS heartbeat_at,
       t.latest AS latest
FROM tries AS t
JOIN audited_runs AS a ON a.dag_id = t.dag_id AND a.run_id = t.run_id  -- onceonly: only when filtered
