-- The columns of the tables the attempts query reads (SQLite). One row per column.
SELECT CAST(m.name AS TEXT) AS table_name, CAST(p.name AS TEXT) AS column_name
FROM sqlite_master AS m
JOIN pragma_table_info(m.name) AS p
WHERE m.type = 'table' AND m.name IN ('task_instance', 'task_instance_history', 'dag_run', 'alembic_version', 'serialized_dag', 'job')
ORDER BY 1, 2
