-- The DAGs whose newest serialized version is stored compressed ([core] compress_serialized_dags:
-- `data` NULL, `data_compressed` the zlib of the serialized JSON), which attempts.sql's zones
-- give no zone for: the reader decompresses each and takes its dag.timezone.
-- Parameter $1: dag_id LIKE pattern (escape character \); '%' when the audit has no --dag.
SELECT dag_id, compressed
FROM (
    SELECT DISTINCT ON (dag_id) dag_id::text AS dag_id,
           CASE WHEN data IS NULL THEN encode(data_compressed, 'hex') END AS compressed
    FROM serialized_dag
    WHERE dag_id LIKE $1 ESCAPE '\'
    ORDER BY dag_id, last_updated DESC
) AS newest
WHERE compressed IS NOT NULL AND compressed <> ''
ORDER BY dag_id
