-- The columns of the journal table (MySQL). ? is the table name.
SELECT CAST(column_name AS CHAR) AS column_name
FROM information_schema.columns
WHERE table_schema = DATABASE() AND table_name = ?
ORDER BY ordinal_position
