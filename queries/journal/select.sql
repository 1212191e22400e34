-- The journal rows, every mapped column read as text so that one checker validates types,
-- timestamps and phase values for every dialect. onceonly fills in the column list (each the
-- journal's own column, cast to text, named as the canonical column) and the table; both are
-- identifiers checked against the table's real columns first. The whole table is read: even a
-- --dag audit needs other DAGs' rows to recognise their objects.
SELECT {columns}
FROM {table}
