-- try_bounds_of, Airflow 2.x and 3.x on SQLite: try_bounds.sql for one try table, for an audit
-- of every run (no --dag, --since or --until). task_instance and task_instance_history are
-- each scanned on a connection of their own at the same time, and onceonly takes the earliest
-- start and the latest start and end of the two: the listing waits for these bounds, and the
-- task_instance scan alone is most of the time try_bounds.sql takes.
-- onceonly fills in the table: task_instance or task_instance_history.
SELECT CAST(min(start_date) AS TEXT) AS first_start,
       CAST(max(start_date) AS TEXT) AS last_start,
       CAST(max(end_date) AS TEXT) AS last_end
FROM {table}
WHERE try_number >= 1
