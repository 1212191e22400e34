-- The columns of the tables the attempts query reads (PostgreSQL). One row per column.
SELECT table_name::text AS table_name, column_name::text AS column_name
FROM information_schema.columns
WHERE table_schema = current_schema()
  AND table_name IN ('task_instance', 'task_instance_history', 'dag_run', 'alembic_version', 'serialized_dag', 'job')
ORDER BY 1, 2
