"""The comparator for bench/scale/run.sh: D001, L001, L002, L003 and M001 in DuckDB SQL over
the Parquet files of an onceonly snapshot, with onceonly's semantics for these rules (void
status `cancelled`; the provider window is the tries' span plus one hour of slack).

Usage: duckdb_rules.py SNAPSHOT_DIR [--threads N]
Prints one JSON line: {"query_seconds": s, "counts": {code: n}, "total": n}.
"""

import json
import sys
import time

import duckdb

RULES = {
    # More than one live object under one key: one finding per key.
    "D001": """
        SELECT key FROM objects WHERE live AND key IS NOT NULL
        GROUP BY key HAVING count(*) > 1
    """,
    # A live object that no committed row names, under a key that has an intent.
    "L001": """
        SELECT external_id FROM objects
        WHERE live AND NOT committed
          AND key IN (SELECT op_key FROM journal WHERE phase = 'intent')
    """,
    # An intent, no committed/reconciled row, no object under the key, inside the window.
    "L002": """
        SELECT op_key FROM journal
        GROUP BY op_key
        HAVING bool_or(phase = 'intent')
           AND NOT bool_or(phase IN ('committed', 'reconciled'))
           AND min(recorded_at) FILTER (WHERE phase = 'intent')
               BETWEEN (SELECT lo FROM win) AND (SELECT hi FROM win)
           AND op_key NOT IN (SELECT key FROM objects WHERE key IS NOT NULL)
    """,
    # A live object whose id and key no journal row knows.
    "L003": """
        SELECT external_id FROM objects
        WHERE live AND NOT named AND NOT key_journaled
    """,
    # A committed row naming an id the provider does not list as live.
    "M001": """
        SELECT j.external_id FROM journal j
        WHERE j.phase IN ('committed', 'reconciled') AND j.external_id IS NOT NULL
          AND j.recorded_at BETWEEN (SELECT lo FROM win) AND (SELECT hi FROM win)
          AND j.external_id NOT IN (SELECT external_id FROM objects WHERE live)
    """,
}


def main() -> None:
    snapshot = sys.argv[1]
    threads = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 2
    started = time.perf_counter()
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.execute(f"CREATE VIEW attempts AS SELECT * FROM read_parquet('{snapshot}/attempts.parquet')")
    con.execute(f"CREATE TABLE journal AS SELECT * FROM read_parquet('{snapshot}/journal.parquet')")
    con.execute(
        """CREATE TABLE win AS SELECT min(start_date) - INTERVAL 1 HOUR AS lo,
                  greatest(max(end_date), max(start_date)) + INTERVAL 1 HOUR AS hi
           FROM attempts"""
    )
    con.execute(
        f"""CREATE TABLE objects AS
        WITH named AS (
            SELECT external_id, min(op_key) AS named_key,
                   bool_or(phase IN ('committed', 'reconciled')) AS committed
            FROM journal WHERE external_id IS NOT NULL GROUP BY external_id
        ), p AS (
            SELECT p.external_id, coalesce(p.op_key, n.named_key) AS key,
                   lower(p.status) <> 'cancelled' AS live,
                   n.external_id IS NOT NULL AS named,
                   coalesce(n.committed, false) AS committed
            FROM read_parquet('{snapshot}/provider.parquet') p
            LEFT JOIN named n USING (external_id)
        )
        SELECT p.*, p.key IN (SELECT DISTINCT op_key FROM journal) AS key_journaled FROM p"""
    )
    counts = {code: con.execute(f"SELECT count(*) FROM ({sql})").fetchone()[0] for code, sql in RULES.items()}
    elapsed = time.perf_counter() - started
    print(json.dumps({"query_seconds": round(elapsed, 3), "counts": counts, "total": sum(counts.values())}))


if __name__ == "__main__":
    main()
