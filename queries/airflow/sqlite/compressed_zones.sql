-- The DAGs whose newest serialized version is stored compressed ([core] compress_serialized_dags:
-- `data` NULL, `data_compressed` the zlib of the serialized JSON), which runs.sql's zones give
-- no zone for: the reader decompresses each and takes its dag.timezone.
-- Parameter ?1: dag_id LIKE pattern (escape character \); '%' when the audit has no --dag.
SELECT dag_id, compressed
FROM (
    SELECT CAST(s.dag_id AS TEXT) AS dag_id,
           CASE WHEN s.data IS NULL THEN hex(s.data_compressed) END AS compressed
    FROM serialized_dag AS s
    WHERE s.dag_id LIKE ?1 ESCAPE '\'
      AND s.last_updated = (SELECT MAX(t.last_updated) FROM serialized_dag AS t
                            WHERE t.dag_id = s.dag_id)
) AS newest
WHERE compressed IS NOT NULL AND compressed <> ''
ORDER BY dag_id
