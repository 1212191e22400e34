#!/usr/bin/env bash
# Whether two builds give byte-identical results, run by hand before merging a change that
# should not change any output:
#
#   bench/identity.sh BASE_BIN NEW_BIN [SYNTH_DIR ...]
#
# Each binary audits the same inputs and writes every output into a folder of its own; the two
# folders are then compared file by file (`diff -r`), exit codes included. The inputs:
#
# * every scenario of fixtures/rules (with their shared config), fixtures/demo and the real
#   Airflow runs of fixtures/airflow/out (2.10.5 and 3.3.2, journal in SQLite), copied to a
#   scratch folder;
# * `onceonly demo` in every format;
# * each SYNTH_DIR, a scenario `onceonly synth` wrote (audited from its snapshot).
#
# For each: the report in every format (table, json, ndjson, csv, markdown, html), the plan
# (json, md, txt), the SQL script (journal in a database), the verdicts (csv, ndjson), the
# metrics (less the line that times the audit) and the exit code; the same per DAG (`--dag`)
# and for an activity window and an interval range; `trace` of every run (json and table, by
# run, by interval start and by key) and `ttl-risk` of every DAG (json and table, three
# moments, with and without `--ttl`). A synth scenario gets the audits, a few traces and one
# DAG's `ttl-risk`: each of those audits the whole scenario again.
#
# OUT=DIR keeps the outputs there (default: a temporary folder, removed when they agree).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BASE=$(realpath "$1") NEW=$(realpath "$2")
shift 2
SYNTH=("$@")
OUT=${OUT:-$(mktemp -d /tmp/onceonly-identity.XXXXXX)}
mkdir -p "$OUT"
SCRATCH=$OUT/inputs
rm -rf "$SCRATCH"
mkdir -p "$SCRATCH"

# The fixtures, each in a folder of its own with its config.
for dir in "$ROOT"/fixtures/rules/*/; do
    name=$(basename "$dir")
    if [ -f "$dir/attempts.csv" ]; then
        mkdir -p "$SCRATCH/rules-$name"
        cp "$dir"/*.csv "$ROOT/fixtures/rules/onceonly.toml" "$SCRATCH/rules-$name/"
    fi
    for case in fires near-miss; do
        [ -d "$dir/$case" ] || continue
        mkdir -p "$SCRATCH/rules-$name-$case"
        cp "$dir/$case"/*.csv "$ROOT/fixtures/rules/onceonly.toml" "$SCRATCH/rules-$name-$case/"
    done
done
cp -r "$ROOT/fixtures/demo" "$SCRATCH/demo"
for version in airflow-2.10.5 airflow-3.3.2; do
    mkdir -p "$SCRATCH/$version"
    find "$ROOT/fixtures/airflow/out/$version" -maxdepth 1 -type f -exec cp {} "$SCRATCH/$version/" \;
done
mkdir -p "$SCRATCH/airflow-3.3.2-backfill"
cp "$SCRATCH/airflow-3.3.2"/* "$SCRATCH/airflow-3.3.2-backfill/"
cp "$ROOT/fixtures/airflow/out/airflow-3.3.2-backfill/airflow.db" "$SCRATCH/airflow-3.3.2-backfill/"

# run OUTFILE -- ARGS...: stdout to OUTFILE, the exit code to OUTFILE.exit (stderr is dropped:
# it may name temporary paths).
run() {
    local out=$1
    shift 2
    "$BIN" "$@" >"$out" 2>/dev/null
    echo $? >"$out.exit"
}

# audits NAME CONFIG ARGS...: every output of one audit.
audits() {
    local name=$1 config=$2
    shift 2
    local o=$DEST/$name
    for format in table json ndjson csv markdown html; do
        run "$o.$format" -- audit --config "$config" --format "$format" "$@"
    done
    run "$o.run1" -- audit --config "$config" --format json --fail-on info "$@" \
        --plan "$o.plan.json" --verdicts "$o.verdicts.csv" --metrics "$o.prom" --html "$o.page.html"
    run "$o.run2" -- audit --config "$config" --format json --fail-on never "$@" \
        --plan "$o.plan.md" --verdicts "$o.verdicts.ndjson"
    run "$o.run3" -- audit --config "$config" --format json "$@" --plan "$o.plan.txt"
    if grep -q '^url = "sqlite' <(sed -n '/^\[journal\]/,/^\[/p' "$config"); then
        run "$o.run4" -- audit --config "$config" --format json "$@" --sql "$o.sql"
    fi
    [ -f "$o.prom" ] && grep -v 'duration' "$o.prom" >"$o.prom.stable" && rm "$o.prom"
}

# dags VERDICTS_CSV: the DAGs of an audit's verdicts.
dags() {
    python3 -c 'import csv,sys; print("\n".join(sorted({r["dag_id"] for r in csv.DictReader(open(sys.argv[1]))})))' "$1"
}

# traces NAME CONFIG VERDICTS_CSV LIMIT ARGS...: trace runs, interval starts and keys.
traces() {
    local name=$1 config=$2 verdicts=$3 limit=$4
    shift 4
    python3 - "$verdicts" "$limit" <<'PY' | while IFS=$'\t' read -r kind dag value; do
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
limit = int(sys.argv[2])
picks = []
# Tries with something to show first, then the rest, in a fixed order.
rows.sort(key=lambda r: (r["verdict"] in ("committed", "no-operation"), r["dag_id"], r["run_id"], r["op_key"]))
seen = set()
for r in rows:
    for kind, value in (("run-id", r["run_id"]), ("interval", r["interval"].split("/")[0]), ("key", r["op_key"])):
        if value and (kind, r["dag_id"], value) not in seen:
            seen.add((kind, r["dag_id"], value))
            picks.append((kind, r["dag_id"], value))
for kind, dag, value in picks[:limit]:
    print(f"{kind}\t{dag}\t{value}")
PY
        local tag
        tag=$(printf '%s-%s-%s' "$kind" "$dag" "$value" | tr -c 'A-Za-z0-9._-' '_')
        run "$DEST/$name.trace.$tag.json" -- trace --config "$config" --dag "$dag" "--$kind" "$value" --format json "$@"
        run "$DEST/$name.trace.$tag.txt" -- trace --config "$config" --dag "$dag" "--$kind" "$value" "$@"
    done
}

# risks NAME CONFIG DAG [MOMENT ...]: ttl-risk of one DAG at each moment (by default three), with
# and without --ttl.
risks() {
    local name=$1 config=$2 dag=$3
    shift 3
    local moments=("$@")
    [ ${#moments[@]} -gt 0 ] || moments=(2024-01-03T00:00:00Z 2026-11-02T00:00:00Z 2030-01-01T00:00:00Z)
    local o=$DEST/$name.ttl.$(printf '%s' "$dag" | tr -c 'A-Za-z0-9._-' '_')
    for at in "${moments[@]}"; do
        run "$o.$at.json" -- ttl-risk --config "$config" --dag "$dag" --from 2000-01-01 --to 2100-01-01 --at "$at" --format json
        run "$o.$at.txt" -- ttl-risk --config "$config" --dag "$dag" --from 2000-01-01 --to 2100-01-01 --at "$at"
        run "$o.$at.ttl.json" -- ttl-risk --config "$config" --dag "$dag" --from 2000-01-01 --to 2100-01-01 --at "$at" --ttl 24h --format json
    done
}

produce() {
    BIN=$1 DEST=$2
    rm -rf "$DEST"
    mkdir -p "$DEST"
    # The demo's temporary folder and the mock provider's port differ from run to run.
    for format in table json ndjson csv markdown html; do
        run "$DEST/demo-command.$format" -- demo --format "$format"
        sed -i -E 's#onceonly-demo-[0-9]+#onceonly-demo-PID#g; s#127\.0\.0\.1:[0-9]+#127.0.0.1:PORT#g' "$DEST/demo-command.$format"
    done
    for dir in "$SCRATCH"/*/; do
        local name config
        name=$(basename "$dir")
        config=$dir/onceonly.toml
        [ "$name" = airflow-3.3.2-backfill ] && continue
        audits "$name" "$config"
        audits "$name.window" "$config" --since 2026-11-01 --until 2026-11-03
        audits "$name.range" "$config" --interval-from 2026-11-01 --interval-to 2026-11-02T12:00:00Z
        local dag
        for dag in $(dags "$DEST/$name.verdicts.csv"); do
            audits "$name.dag.$dag" "$config" --dag "$dag"
            risks "$name" "$config" "$dag"
        done
        traces "$name" "$config" "$DEST/$name.verdicts.csv" 1000
    done
    local backfill=$SCRATCH/airflow-3.3.2-backfill/onceonly.toml
    run "$DEST/backfill.ttl.json" -- ttl-risk --config "$backfill" --backfill-id 1 --at 2026-11-02T00:00:00Z --format json
    run "$DEST/backfill.ttl.txt" -- ttl-risk --config "$backfill" --backfill-id 1 --at 2030-01-01T00:00:00Z
    local synth
    for synth in "${SYNTH[@]}"; do
        local name=synth-$(basename "$synth") config=$synth/onceonly.toml
        local from=(--from-snapshot "$synth")
        audits "$name" "$config" "${from[@]}"
        run "$DEST/$name.five.json" -- audit --config "$config" "${from[@]}" --format json \
            --rule D001 --rule L001 --rule L002 --rule L003 --rule M001
        local first
        first=$(dags "$DEST/$name.verdicts.csv" | sed -n 1p)
        run "$DEST/$name.dag.json" -- audit --config "$config" "${from[@]}" --format json --dag "$first" --plan "$DEST/$name.dag.plan.json"
        run "$DEST/$name.window.json" -- audit --config "$config" "${from[@]}" --format json --since 2024-01-02 --until 2024-01-03 --plan "$DEST/$name.window.plan.json"
        run "$DEST/$name.range.json" -- audit --config "$config" "${from[@]}" --format json --interval-from 2024-01-02 --interval-to 2024-01-03 --plan "$DEST/$name.range.plan.json"
        # trace and ttl-risk read the configured sources (the synth's SQLite databases).
        traces "$name" "$config" "$DEST/$name.verdicts.csv" 3
        risks "$name" "$config" "$first" 2024-01-03T00:00:00Z
    done
}

# The two builds side by side.
produce "$BASE" "$OUT/base" &
produce "$NEW" "$OUT/new"
wait
files=$(find "$OUT/base" -type f | wc -l)
if diff -r "$OUT/base" "$OUT/new" >"$OUT/diff.txt"; then
    echo "identical: $files files ($OUT)"
    [ -n "${KEEP:-}" ] || rm -rf "$OUT"
else
    echo "DIFFERENT: $(grep -c '^diff\|^Only' "$OUT/diff.txt") of $files files differ; see $OUT/diff.txt"
    exit 1
fi
