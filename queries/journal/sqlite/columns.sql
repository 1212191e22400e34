-- The columns of the journal table (SQLite). ?1 is the table name.
SELECT CAST(name AS TEXT) AS column_name FROM pragma_table_info(?1) ORDER BY cid
