-- The columns of the tables the attempts query reads (MySQL). One row per column.
SELECT CAST(table_name AS CHAR) AS table_name, CAST(column_name AS CHAR) AS column_name
FROM information_schema.columns
WHERE table_schema = DATABASE()
  AND table_name IN ('task_instance', 'task_instance_history', 'dag_run', 'alembic_version', 'serialized_dag')
ORDER BY 1, 2
