-- Every DAG the metadata database knows (parsed, or with a run) and each task of it that has
-- a task instance: what tells a --dag or an [[operation]] that matches nothing from one that
-- had no run in the audited window. Same text for SQLite and PostgreSQL.
SELECT dag_id, task_id FROM task_instance GROUP BY dag_id, task_id
UNION
SELECT dag_id, CAST(NULL AS TEXT) FROM dag_run GROUP BY dag_id
UNION
SELECT dag_id, CAST(NULL AS TEXT) FROM serialized_dag GROUP BY dag_id
