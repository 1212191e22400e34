-- The columns of the journal table (PostgreSQL). $1 is the table name, optionally schema.table.
SELECT column_name::text AS column_name
FROM information_schema.columns
WHERE table_name = split_part($1, '.', -1)
  AND table_schema = CASE WHEN strpos($1, '.') > 0 THEN split_part($1, '.', 1) ELSE current_schema() END
ORDER BY ordinal_position
