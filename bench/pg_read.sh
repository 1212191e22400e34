#!/usr/bin/env bash
# Benchmark, run by hand (not a test): read 1,000,000 task tries from PostgreSQL into onceonly's
# `attempts` table (onceonly::sources::airflow_db::read, the code path of `onceonly audit`) and
# compare it, on the same data in the same run, with
#   * psql copying the same rows read straight from the tables: the union of task_instance and
#     task_instance_history joined to dag_run, no sort (`\copy (...) to /dev/null`);
#   * psql copying the result of onceonly's own query (queries/airflow/3/postgres/attempts.sql).
# Prints wall-time medians, both ratios and the peak RSS of every client (targets: onceonly at
# most 1.5x the plain copy, under 1 GiB). See bench/README.md.
#
#   bench/pg_read.sh            (as root: .ci/postgres.sh starts a private PostgreSQL cluster
#                                with the real Airflow 3.3.2 schema, stopped again at the end)
#
# Environment:
#   ONCEONLY_TEST_PG_URL, ONCEONLY_TEST_PG_PASSWORD
#                     use this running server (Airflow 3.x schema) instead of starting one; the
#                     benchmark adds its data there (DAGs named bench_*, replaced on each run)
#   BENCH_RUNS=3      measurements of each kind, interleaved
#   BENCH_DIAG=1      also print the server's own time for each query and the plan of
#                     onceonly's (EXPLAIN ANALYZE), 0: only the client measurements
#   BENCH_REUSE=0     1: keep benchmark data already in the database when the count is right
#   BENCH_BASELINE    another build's bench_read_attempts binary (say, of main), measured in
#                     the same rounds as "baseline read"
#   CARGO_TARGET_DIR  default /var/cache/onceonly/release
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${BENCH_RUNS:-3}
DIAG=${BENCH_DIAG:-1}
TARGET_ROWS=1000000
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/cache/onceonly/release}
WORK=$(mktemp -d /tmp/onceonly-bench.XXXXXX)

if [ -z "${ONCEONLY_TEST_PG_URL:-}" ]; then
    echo "== starting PostgreSQL with the real Airflow schema (.ci/postgres.sh)"
    # shellcheck source=.ci/postgres.sh
    source .ci/postgres.sh
    set -euo pipefail
    trap 'stop_postgres; rm -rf "$WORK"' EXIT
else
    trap 'rm -rf "$WORK"' EXIT
fi
: "${ONCEONLY_TEST_PG_PASSWORD:?ONCEONLY_TEST_PG_PASSWORD is not set}"
export ONCEONLY_TEST_PG_URL ONCEONLY_TEST_PG_PASSWORD
# libpq wants postgresql://, not SQLAlchemy's postgresql+psycopg2://
PG_URI=$(printf '%s' "$ONCEONLY_TEST_PG_URL" | sed -E 's|^postgres(ql)?(\+[a-z0-9_]+)?://|postgresql://|')
pg() { PGPASSWORD=$ONCEONLY_TEST_PG_PASSWORD psql -X -v ON_ERROR_STOP=1 "$PG_URI" "$@"; }

echo "== building examples/bench_read_attempts (release, $CARGO_TARGET_DIR)"
nice -n 10 cargo build --quiet --release --example bench_read_attempts
BIN=$CARGO_TARGET_DIR/release/examples/bench_read_attempts

# The attempts query exactly as onceonly runs it without --dag, --since or --until: the lines
# only a filtered audit keeps left out, the parameters substituted (onceonly's open bounds,
# every DAG), comments dropped so that it fits on one line.
SQL_FILE=queries/airflow/3/postgres/attempts.sql
QUERY=$(grep -v -e '-- onceonly: only when filtered$' -e '^[[:space:]]*--' "$SQL_FILE" \
    | sed -e "s/\$1/'0001-01-01T00:00:00Z'/g" -e "s/\$2/'9999-12-31T23:59:59Z'/g" -e "s/\$3/'%'/g" \
    | tr '\n' ' ')
# The same rows read straight from the tables: the columns onceonly reads, both try tables
# joined to dag_run, no sort, no conversion.
TRY_COLUMNS="dag_id, task_id, map_index, run_id, try_number, state, start_date, end_date, hostname, pid, queued_dttm"
RUN_COLUMNS="dr.run_type, dr.data_interval_start, dr.data_interval_end, dr.logical_date, dr.run_after, dr.conf, dr.clear_number"
PLAIN_QUERY="SELECT $(echo "$TRY_COLUMNS" | sed 's/\([a-z_][a-z_]*\)/h.\1/g'), $RUN_COLUMNS
    FROM task_instance_history AS h JOIN dag_run AS dr ON dr.dag_id = h.dag_id AND dr.run_id = h.run_id
    UNION ALL
    SELECT $(echo "$TRY_COLUMNS" | sed 's/\([a-z_][a-z_]*\)/ti.\1/g'), $RUN_COLUMNS
    FROM task_instance AS ti JOIN dag_run AS dr ON dr.dag_id = ti.dag_id AND dr.run_id = ti.run_id"
PLAIN_QUERY=$(echo "$PLAIN_QUERY" | tr '\n' ' ')

echo "== data"
rows=$(pg -Atc "SELECT count(*) FROM ($QUERY) AS q")
bench_runs=$(pg -Atc "SELECT count(*) FROM dag_run WHERE dag_id LIKE 'bench\_%'")
if [ "${BENCH_REUSE:-0}" = 1 ] && [ "$rows" = "$TARGET_ROWS" ] && [ "$bench_runs" -gt 0 ]; then
    echo "reusing the benchmark data already there"
else
    existing=$(pg -Atc "SELECT count(*) FROM ($QUERY) AS q WHERE dag_id NOT LIKE 'bench\_%'")
    if [ "$existing" -gt 100000 ]; then
        echo "pg_read.sh: the database already holds $existing tries; use an emptier one" >&2
        exit 1
    fi
    echo "synthesizing $((TARGET_ROWS - existing)) tries (the database held $existing) ..."
    start=$(date +%s)
    pg -q -v synth=$((TARGET_ROWS - existing)) -f - <<'SQL'
-- Synthetic Airflow 3.x history at scale, inside the real schema (created by `airflow db migrate`).
-- psql variables: synth = how many tries the attempts query must gain (1,000,000 minus what the
-- database already holds). Shape: 100 DAGs x 770 daily runs x 10 task instances = 770,000
-- task_instance rows; 230,000 task_instance_history rows (19/77 of the task instances retried
-- once, 2/77 twice), less the few needed to make the total exact.
\set ON_ERROR_STOP on
BEGIN;
-- An earlier benchmark's data (dag_run cascades to task_instance and task_instance_history,
-- dag to dag_version).
DELETE FROM dag_run WHERE dag_id LIKE 'bench\_%';
DELETE FROM dag WHERE dag_id LIKE 'bench\_%';

INSERT INTO dag (dag_id, is_paused, is_stale, exceeds_max_non_backfill, last_parsed_time,
                 last_parse_duration, fileloc, relative_fileloc, bundle_name, owners, description,
                 timetable_type, timetable_summary, timetable_description, timetable_partitioned,
                 timetable_periodic, partition_mapper_info, max_active_tasks, max_active_runs,
                 max_consecutive_failed_dag_runs, has_task_concurrency_limits, has_import_errors,
                 fail_fast, allowed_run_types)
SELECT format('bench_partner_sync_%s', lpad(d::text, 3, '0')), false, false, false,
       now(), 0.05 + (d % 7) * 0.01,
       format('/opt/airflow/dags/partners/partner_sync_%s.py', lpad(d::text, 3, '0')),
       format('partners/partner_sync_%s.py', lpad(d::text, 3, '0')),
       'dags-folder', 'data-eng', format('Daily export to partner %s', d),
       CASE WHEN d % 2 = 0 THEN 'CronDataIntervalTimetable' ELSE 'CronTriggerTimetable' END,
       '0 2 * * *', 'At 02:00', false, true, '[]', 16, 1, 0, false, false, false, 'null'
FROM generate_series(0, 99) AS d;

INSERT INTO dag_version (id, version_number, dag_id, bundle_name, bundle_version, version_data,
                         created_at, last_updated)
SELECT gen_random_uuid(), 1, dag_id, 'dags-folder', NULL, 'null', '2024-06-30 12:00:00+00',
       '2024-06-30 12:00:00+00'
FROM dag WHERE dag_id LIKE 'bench\_%';

-- 770 daily runs per DAG from 2024-07-01: the first 20 a backfill, 2% manual triggers (half of
-- them without a logical date, as 3.x does), the rest scheduled; 2.5% of scheduled runs cleared.
CREATE TEMP TABLE bench_run AS
SELECT d, r, format('bench_partner_sync_%s', lpad(d::text, 3, '0')) AS dag_id,
       '2024-07-01 02:00:00+00'::timestamptz + r * interval '1 day' AS l,
       CASE WHEN r < 20 THEN 'backfill'
            WHEN (r * 31 + d) % 50 = 7 THEN 'manual'
            ELSE 'scheduled' END AS run_type
FROM generate_series(0, 99) AS d, generate_series(0, 769) AS r;
ALTER TABLE bench_run ADD COLUMN run_after timestamptz, ADD COLUMN logical_date timestamptz,
    ADD COLUMN interval_start timestamptz, ADD COLUMN interval_end timestamptz;
UPDATE bench_run SET
    run_after = CASE WHEN run_type = 'manual'
                     THEN l + interval '7 hours' + ((d * 37 + r * 11) % 3600) * interval '1 second'
                          + ((d * 7919 + r * 104729) % 1000000) * interval '1 microsecond'
                     WHEN d % 2 = 0 THEN l + interval '1 day'
                     ELSE l END;
UPDATE bench_run SET
    logical_date = CASE WHEN run_type <> 'manual' THEN l
                        WHEN r % 4 < 2 THEN NULL ELSE run_after END,
    interval_start = CASE WHEN run_type <> 'manual' THEN l
                          WHEN r % 4 < 2 THEN NULL ELSE run_after END,
    interval_end = CASE WHEN run_type <> 'manual' THEN (CASE WHEN d % 2 = 0 THEN l + interval '1 day' ELSE l END)
                        WHEN r % 4 < 2 THEN NULL ELSE run_after END;

INSERT INTO dag_run (dag_id, queued_at, logical_date, start_date, end_date, state, run_id,
                     run_type, triggered_by, triggering_user_name, conf, data_interval_start,
                     data_interval_end, run_after, last_scheduling_decision, log_template_id,
                     created_at, updated_at, clear_number, context_carrier,
                     created_dag_version_id)
SELECT b.dag_id, b.run_after + interval '1.2 seconds', b.logical_date,
       b.run_after + ((2 + (b.r * 7 + b.d) % 38) * interval '1 second'),
       b.run_after + ((1500 + (b.r * 13 + b.d) % 900) * interval '1 second'),
       'success',
       CASE b.run_type
           WHEN 'manual' THEN 'manual__' || to_char(b.run_after AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') || '+00:00'
           ELSE b.run_type || '__' || to_char(b.l AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') || '+00:00'
       END,
       b.run_type,
       CASE b.run_type WHEN 'manual' THEN 'UI' WHEN 'backfill' THEN 'BACKFILL' ELSE 'TIMETABLE' END,
       CASE WHEN b.run_type = 'manual' THEN 'ops.oncall' END,
       CASE WHEN b.run_type = 'manual' THEN jsonb_build_object(
                'reason', 'partner reported missing export',
                'ticket', format('OPS-%s', 1000 + b.d * 7 + b.r),
                'partition', to_char(b.l AT TIME ZONE 'UTC', 'YYYY-MM-DD'),
                'force', (b.r % 3 = 0),
                'targets', jsonb_build_array('s3://partner-drop/' || b.d, 'sftp://partner-' || b.d || '.example.com/in'))
            ELSE '{}'::jsonb END,
       b.interval_start, b.interval_end, b.run_after,
       b.run_after + ((1500 + (b.r * 13 + b.d) % 900) * interval '1 second'),
       (SELECT max(id) FROM log_template),
       b.run_after + interval '1 second', b.run_after + interval '1 hour',
       CASE WHEN b.run_type = 'scheduled' AND (b.r * 17 + b.d) % 40 = 0 THEN 1 ELSE 0 END,
       jsonb_build_object('__var', jsonb_build_object('traceparent',
           '00-' || md5(b.dag_id || b.r) || '-' || left(md5(b.r || b.dag_id), 16) || '-00'), '__type', 'dict'),
       v.id
FROM bench_run AS b JOIN dag_version AS v ON v.dag_id = b.dag_id
ORDER BY b.d, b.r;

-- Ten task instances per run (push_partition is mapped over two partitions), and their tries.
CREATE TEMP TABLE bench_ti AS
WITH tasks(task_no, task_id, map_index, operator, custom_operator_name) AS (VALUES
    (0, 'extract', -1, 'PythonOperator', NULL),
    (1, 'validate_schema', -1, 'PythonOperator', NULL),
    (2, 'transform', -1, 'SparkSubmitOperator', NULL),
    (3, 'load_warehouse', -1, 'SQLExecuteQueryOperator', NULL),
    (4, 'quality_check', -1, 'SQLCheckOperator', NULL),
    (5, 'push_partition', 0, '_PythonDecoratedOperator', '@task'),
    (6, 'push_partition', 1, '_PythonDecoratedOperator', '@task'),
    (7, 'export_partner', -1, '_PythonDecoratedOperator', '@task'),
    (8, 'notify', -1, 'EmailOperator', NULL),
    (9, 'cleanup', -1, 'BashOperator', NULL))
SELECT (row_number() OVER (ORDER BY dr.id, t.task_no) - 1)::bigint AS i,
       dr.dag_id, dr.run_id, dr.start_date AS run_start, dr.clear_number,
       dr.created_dag_version_id AS dag_version_id, t.*
FROM dag_run AS dr CROSS JOIN tasks AS t
WHERE dr.dag_id LIKE 'bench\_%';
ALTER TABLE bench_ti ADD COLUMN tries int;
UPDATE bench_ti SET tries = CASE WHEN (i * 7919) % 77 < 19 THEN 2
                                 WHEN (i * 7919) % 77 < 21 THEN 3 ELSE 1 END;
-- What the database already held counts towards the 1,000,000.
UPDATE bench_ti SET tries = 1
WHERE i IN (SELECT i FROM bench_ti WHERE tries = 2 ORDER BY i
            LIMIT (SELECT count(*) FROM bench_ti) + 230000 - :synth);

CREATE TEMP TABLE bench_try AS
SELECT ti.*, t,
       ti.run_start + ti.task_no * interval '95 seconds' + (t - 1) * interval '6 minutes'
           + ((ti.i * 13 + t) % 60) * interval '1 second'
           + ((ti.i * 104729 + t * 7919) % 1000000) * interval '1 microsecond' AS start_date,
       (3 + (ti.i * 31 + t * 7) % 400) + ((ti.i * 15485863 + t) % 1000000) / 1e6 AS duration,
       CASE WHEN t < ti.tries THEN (CASE WHEN ti.clear_number > 0 THEN 'success' ELSE 'failed' END)
            WHEN ti.tries = 3 AND (ti.i * 7919) % 77 = 20 THEN 'failed'
            WHEN ti.task_id = 'notify' AND ti.i % 97 = 8 THEN 'skipped'
            ELSE 'success' END AS state,
       format('airflow-worker-%s.airflow-worker.airflow.svc.cluster.local', (ti.i * 7 + t) % 12) AS hostname,
       1000 + ((ti.i * 7919 + t * 15485863) % 60000) AS pid
FROM bench_ti AS ti, generate_series(1, ti.tries) AS t;

INSERT INTO task_instance (id, task_id, dag_id, run_id, map_index, start_date, end_date, duration,
                           state, try_number, max_tries, hostname, unixname, pool, pool_slots,
                           queue, priority_weight, operator, custom_operator_name, queued_dttm,
                           scheduled_dttm, queued_by_job_id, last_heartbeat_at, pid, executor,
                           executor_config, updated_at, rendered_map_index, context_carrier,
                           task_display_name, dag_version_id)
SELECT gen_random_uuid(), task_id, dag_id, run_id, map_index, start_date,
       start_date + duration * interval '1 second', duration, state, t, 2, hostname, 'airflow',
       'default_pool', 1, 'default', 10 - task_no, operator, custom_operator_name,
       start_date - (1 + i % 4) * interval '1 second' - interval '0.123456 seconds',
       start_date - (2 + i % 4) * interval '1 second', 1,
       start_date + duration * interval '1 second' - interval '0.5 seconds', pid, NULL,
       '\x80057d942e', start_date + duration * interval '1 second' + interval '0.02 seconds',
       CASE WHEN map_index >= 0 THEN 'partition ' || map_index END,
       jsonb_build_object('__var', jsonb_build_object('traceparent',
           '00-' || md5(run_id || task_id) || '-' || left(md5(i::text), 16) || '-00'), '__type', 'dict'),
       task_id, dag_version_id
FROM bench_try WHERE t = tries;

INSERT INTO task_instance_history (task_instance_id, task_id, dag_id, run_id, map_index,
                                   try_number, start_date, end_date, duration, state, max_tries,
                                   hostname, unixname, pool, pool_slots, queue, priority_weight,
                                   operator, custom_operator_name, queued_dttm, scheduled_dttm,
                                   queued_by_job_id, pid, executor, executor_config, updated_at,
                                   rendered_map_index, context_carrier, task_display_name,
                                   dag_version_id)
SELECT gen_random_uuid(), task_id, dag_id, run_id, map_index, t, start_date,
       start_date + duration * interval '1 second', duration, state, 2, hostname, 'airflow',
       'default_pool', 1, 'default', 10 - task_no, operator, custom_operator_name,
       start_date - (1 + i % 4) * interval '1 second' - interval '0.123456 seconds',
       start_date - (2 + i % 4) * interval '1 second', 1, pid, NULL, '\x80057d942e',
       start_date + duration * interval '1 second' + interval '0.02 seconds',
       CASE WHEN map_index >= 0 THEN 'partition ' || map_index END,
       jsonb_build_object('__var', jsonb_build_object('traceparent',
           '00-' || md5(run_id || task_id) || '-' || left(md5(i::text || t), 16) || '-00'), '__type', 'dict'),
       task_id, dag_version_id
FROM bench_try WHERE t < tries;
COMMIT;
VACUUM (ANALYZE) dag_run;
VACUUM (ANALYZE) task_instance;
VACUUM (ANALYZE) task_instance_history;
SQL
    echo "synthesized in $(($(date +%s) - start)) s"
    rows=$(pg -Atc "SELECT count(*) FROM ($QUERY) AS q")
fi
if [ "$rows" != "$TARGET_ROWS" ]; then
    echo "pg_read.sh: the attempts query returns $rows rows, not $TARGET_ROWS" >&2
    exit 1
fi
pg -q <<'SQL'
\pset footer off
SELECT (SELECT count(*) FROM dag) AS dags,
       (SELECT count(*) FROM dag_run) AS dag_runs,
       (SELECT count(*) FROM task_instance) AS task_instances,
       (SELECT count(*) FROM task_instance_history) AS history_rows,
       pg_size_pretty(pg_total_relation_size('task_instance')) AS task_instance_size,
       pg_size_pretty(pg_total_relation_size('task_instance_history')) AS history_size;
SELECT run_type, count(*) AS runs, count(logical_date) AS with_logical_date,
       sum(clear_number) AS cleared, count(*) FILTER (WHERE conf::text <> '{}') AS with_conf
FROM dag_run GROUP BY run_type ORDER BY runs DESC;
SELECT try_number AS tries, count(*) AS task_instances FROM task_instance GROUP BY 1 ORDER BY 1;
SQL
echo "attempts query ($SQL_FILE): $rows rows"

# One measurement: wall time in ms (date, around the whole process, connection included) and
# peak RSS in KiB (/usr/bin/time -v) of the client process; appended to $WORK/results.
measure() {
    local label=$1 expect=$2
    shift 2
    local t0 t1
    t0=$(date +%s%N)
    if ! /usr/bin/time -v -o "$WORK/time" "$@" > "$WORK/out" 2> "$WORK/err"; then
        echo "pg_read.sh: $label failed:" >&2
        cat "$WORK/err" "$WORK/out" >&2
        exit 1
    fi
    t1=$(date +%s%N)
    if ! grep -q -- "$expect" "$WORK/out"; then
        echo "pg_read.sh: $label printed no \"$expect\":" >&2
        cat "$WORK/out" >&2
        exit 1
    fi
    local ms=$(((t1 - t0) / 1000000))
    local rss
    rss=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$WORK/time")
    echo "$label|$ms|$rss" >> "$WORK/results"
    printf '  %-34s %8.3f s  %7.1f MiB   %s\n' "$label" "$(echo "$ms / 1000" | bc -l)" \
        "$(echo "$rss / 1024" | bc -l)" "$(tr '\n' ' ' < "$WORK/out" | cut -c1-80)"
}
# The server's own time for the query: EXPLAIN ANALYZE executes it without sending rows.
server_time() {
    local label=$1 query=$2 ms
    ms=$(pg -Atc "EXPLAIN (ANALYZE, TIMING OFF) $query" | sed -n 's/^Execution Time: \([0-9.]*\) ms$/\1/p')
    echo "$label|${ms%.*}|" >> "$WORK/results"
    printf '  %-34s %8.3f s\n' "$label" "$(echo "$ms / 1000" | bc -l)"
}

PLAIN="psql copy, plain tables"
PSQL="psql copy, onceonly's query"
ONCE="onceonly read"
BASE="baseline read"
plain_rows=$(pg -Atc "SELECT count(*) FROM ($PLAIN_QUERY) AS q")
echo "plain union of the try tables joined to dag_run: $plain_rows rows"
if [ "$DIAG" = 1 ]; then
    echo "== the plan of onceonly's query (EXPLAIN ANALYZE, rows not sent)"
    pg -Atc "EXPLAIN (ANALYZE, TIMING OFF, COSTS OFF) $QUERY" | sed 's/^/    /'
fi
echo "== warm-up (not counted)"
PGPASSWORD=$ONCEONLY_TEST_PG_PASSWORD psql -X "$PG_URI" -c "\\copy ($PLAIN_QUERY) to /dev/null" > /dev/null
PGPASSWORD=$ONCEONLY_TEST_PG_PASSWORD psql -X "$PG_URI" -c "\\copy ($QUERY) to /dev/null" > /dev/null
"$BIN" read > /dev/null
[ -z "${BENCH_BASELINE:-}" ] || "$BENCH_BASELINE" read > /dev/null

: > "$WORK/results"
for run in $(seq 1 "$RUNS"); do
    echo "== round $run of $RUNS"
    measure "$PLAIN" "COPY $plain_rows" \
        env PGPASSWORD="$ONCEONLY_TEST_PG_PASSWORD" psql -X "$PG_URI" -c "\\copy ($PLAIN_QUERY) to /dev/null"
    measure "$PSQL" "COPY $TARGET_ROWS" \
        env PGPASSWORD="$ONCEONLY_TEST_PG_PASSWORD" psql -X "$PG_URI" -c "\\copy ($QUERY) to /dev/null"
    measure "$ONCE" "rows=$TARGET_ROWS" "$BIN" read
    [ -z "${BENCH_BASELINE:-}" ] || measure "$BASE" "rows=$TARGET_ROWS" "$BENCH_BASELINE" read
    if [ "$DIAG" = 1 ]; then
        server_time "server only, plain tables" "$PLAIN_QUERY"
        server_time "server only, onceonly's query" "$QUERY"
    fi
done

median() { # label, field (2 = ms, 3 = KiB)
    awk -F'|' -v label="$1" -v field="$2" '$1 == label { print $field }' "$WORK/results" | sort -n \
        | awk '{ v[NR] = $1 } END { if (NR == 0 || v[1] == "") print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
mib() { [ -n "$1" ] && printf '%.1f MiB' "$(echo "$1 / 1024" | bc -l)" || printf -- '-'; }
sec() { printf '%.3f s' "$(echo "$1 / 1000" | bc -l)"; }

echo
echo "== results: $TARGET_ROWS tries, $RUNS interleaved runs each, medians (wall time of the whole client process)"
printf '%-36s %12s %14s\n' measurement "wall" "peak RSS"
cut -d'|' -f1 "$WORK/results" | awk '!seen[$0]++' | while read -r label; do
    printf '%-36s %12s %14s\n' "$label" "$(sec "$(median "$label" 2)")" "$(mib "$(median "$label" 3)")"
done
plain_ms=$(median "$PLAIN" 2)
psql_ms=$(median "$PSQL" 2)
once_ms=$(median "$ONCE" 2)
once_rss=$(median "$ONCE" 3)
ratio=$(echo "$once_ms / $plain_ms" | bc -l)
printf '\nratio onceonly / psql copy of the plain tables: %.2f (target <= 1.50: %s)\n' "$ratio" \
    "$(echo "$ratio <= 1.5" | bc -l | sed 's/1/met/;s/0/MISSED/')"
printf "ratio onceonly / psql copy of onceonly's query: %.2f\n" "$(echo "$once_ms / $psql_ms" | bc -l)"
if [ -n "${BENCH_BASELINE:-}" ]; then
    printf 'ratio baseline / psql copy of the plain tables: %.2f; onceonly / baseline: %.2f\n' \
        "$(echo "$(median "$BASE" 2) / $plain_ms" | bc -l)" "$(echo "$once_ms / $(median "$BASE" 2)" | bc -l)"
fi
printf 'onceonly peak RSS: %s (target < 1024 MiB: %s); psql peak RSS: %s\n' "$(mib "$once_rss")" \
    "$( [ "$once_rss" -lt $((1024 * 1024)) ] && echo met || echo MISSED)" "$(mib "$(median "$PLAIN" 3)")"
