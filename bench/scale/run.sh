#!/usr/bin/env bash
# Scale benchmark (issue 7), run by hand, not in CI:
#
#   bench/scale/run.sh [INTERVALS ...]        # default: 100000 1000000
#
# For each size: `onceonly synth` writes a scenario; then, with a release build, it times
#   1. the audit from the saved snapshot, all 14 rules, with --plan (phases: read, prepare,
#      rules, verdicts, plan, render, from ONCEONLY_TIMINGS; peak RSS from /usr/bin/time -v);
#   2. the audit from the snapshot with only D001 L001 L002 L003 M001, against DuckDB computing
#      the same five rules in SQL over the same Parquet files (bench/scale/duckdb_rules.py);
#      prints onceonly/DuckDB and checks both find as many;
#   3. end to end: Airflow SQLite + journal SQLite + the provider listed from the loopback mock;
# and checks that runs 1 and 3 found exactly the injected truth.
#
# Environment: CARGO_TARGET_DIR (default /var/cache/onceonly/release), BENCH_DIR (default
# /tmp/onceonly-scale), DAGS (default 20), SEED (default 1), KEEP=1 keeps the scenarios,
# GLOB=1 binds every DAG to one glob operation (`synth --glob-operation`, same truth),
# SHUFFLE=1 writes the snapshot's rows in a random order (`synth --shuffle-rows`, same truth;
# the databases of the end-to-end step keep the generated order).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/cache/onceonly/release}
BIN=$CARGO_TARGET_DIR/release/onceonly
WORK=${BENCH_DIR:-/tmp/onceonly-scale}
DAGS=${DAGS:-20}
SEED=${SEED:-1}
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(100000 1000000)
DUCK=/opt/venvs/duckdb/bin/python

[ -x /usr/bin/time ] || { apt-get update -qq && apt-get install -y -qq time; }
if ! "$DUCK" -c 'import duckdb' 2>/dev/null; then
    python3 -m venv /opt/venvs/duckdb
    /opt/venvs/duckdb/bin/pip install -q duckdb
fi
(cd "$ROOT" && nice cargo build --release --bin onceonly)
mkdir -p "$WORK"

# measure LABEL OUT -- COMMAND...: runs COMMAND with stdout to OUT, prints wall time, peak RSS
# and the phase timings the command wrote to stderr.
measure() {
    local label=$1 out=$2
    shift 3
    local stats=$WORK/time.txt errs=$WORK/stderr.txt
    set +e
    ONCEONLY_TIMINGS=1 /usr/bin/time -v -o "$stats" "$@" >"$out" 2>"$errs"
    local code=$?
    set -e
    if [ $code -gt 1 ]; then
        echo "$label failed ($code):" >&2
        cat "$errs" "$stats" >&2
        exit 1
    fi
    WALL=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,p,":"); s=0; for(i=1;i<=n;i++) s=s*60+p[i]; print s}' "$stats")
    RSS=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2/1024}' "$stats")
    printf '  %-34s wall %7.2f s   peak RSS %6s MiB\n' "$label" "$WALL" "$RSS"
    grep '^onceonly timing:' "$errs" | sed 's/^onceonly timing: /      /' || true
}

# truth_check REPORT DIR: the report's findings equal truth.json exactly.
truth_check() {
    python3 - "$1" "$2/truth.json" <<'PY'
import json, sys
report, truth = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
key = lambda f, ids: (f["code"], f["dag_id"] or "", f["interval"] or "", f["op_key"], tuple(sorted(ids)))
got = sorted(key(f, f["evidence"]["external_ids"]) for f in report["findings"])
want = sorted(key(f, f["external_ids"]) for f in truth["findings"])
print(f"      findings {len(got)}, injected {len(want)}: " + ("EXACT" if got == want else "DIFFERENT"))
sys.exit(0 if got == want else 1)
PY
}

for N in "${SIZES[@]}"; do
    DIR=$WORK/n$N
    [ "${GLOB:-0}" = 1 ] && DIR=$DIR-glob
    [ "${SHUFFLE:-0}" = 1 ] && DIR=$DIR-shuffled
    echo "== $N intervals, $DAGS DAGs, seed $SEED"
    rm -rf "$DIR"
    LAYOUT=()
    [ "${GLOB:-0}" = 1 ] && LAYOUT=(--glob-operation)
    [ "${SHUFFLE:-0}" = 1 ] && LAYOUT+=(--shuffle-rows)
    measure "synth" "$WORK/synth.txt" -- "$BIN" synth --intervals "$N" --dags "$DAGS" --seed "$SEED" --out "$DIR" "${LAYOUT[@]}"
    sed 's/^/      /' "$WORK/synth.txt"

    measure "audit from snapshot, all rules" "$WORK/all.json" -- "$BIN" audit --from-snapshot "$DIR" \
        --config "$DIR/onceonly.toml" --format json --plan "$WORK/plan.json"
    truth_check "$WORK/all.json" "$DIR"

    measure "audit from snapshot, 5 rules" "$WORK/five.json" -- "$BIN" audit --from-snapshot "$DIR" \
        --config "$DIR/onceonly.toml" --format json \
        --rule D001 --rule L001 --rule L002 --rule L003 --rule M001
    ONCE_WALL=$WALL
    ONCE_RSS=$RSS
    measure "DuckDB, the same 5 rules" "$WORK/duck.json" -- "$DUCK" "$ROOT/bench/scale/duckdb_rules.py" "$DIR"
    DUCK_WALL=$WALL
    TARGET=1.0
    [ "${SHUFFLE:-0}" = 1 ] && TARGET=1.5
    python3 - "$WORK/five.json" "$WORK/duck.json" "$ONCE_WALL" "$DUCK_WALL" "$ONCE_RSS" "$TARGET" <<'PY'
import json, sys
once, duck = json.load(open(sys.argv[1])), json.loads(open(sys.argv[2]).read())
once_wall, duck_wall, rss = float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
target = sys.argv[6]
by_rule = {code: once["summary"]["by_rule"].get(code, 0) for code in duck["counts"]}
same = by_rule == duck["counts"]
print(f"      DuckDB query (in process) {duck['query_seconds']:.2f} s")
print(f"      onceonly/DuckDB (process wall) {once_wall / duck_wall:.2f}x   "
      f"onceonly/DuckDB (DuckDB query only) {once_wall / duck['query_seconds']:.2f}x   "
      f"target <= {target}x (issue 18; rows {'shuffled' if target == '1.5' else 'in order'}), onceonly {rss} MiB")
print(f"      counts onceonly {by_rule}")
print(f"      counts DuckDB   {duck['counts']}: " + ("EQUAL" if same else "DIFFERENT"))
sys.exit(0 if same else 1)
PY

    # End to end: SQLite sources, the provider listed over HTTP from the loopback mock.
    "$BIN" mock-provider --state "$DIR/provider_state.json" --page-size 1000 >"$WORK/mock.url" 2>"$WORK/mock.err" &
    MOCK=$!
    for _ in $(seq 1 600); do [ -s "$WORK/mock.url" ] && break; sleep 0.1; done
    URL=$(head -1 "$WORK/mock.url")
    sed "s#__PROVIDER_URL__#$URL#" "$DIR/onceonly-listing.toml" >"$DIR/listing.toml"
    measure "end to end: SQLite + mock provider" "$WORK/e2e.json" -- "$BIN" audit --config "$DIR/listing.toml" \
        --format json --plan "$WORK/plan-e2e.json"
    kill "$MOCK" 2>/dev/null || true
    wait "$MOCK" 2>/dev/null || true
    truth_check "$WORK/e2e.json" "$DIR"
    echo "      (target: under 15 s, peak under 3 GiB)"
    [ "${KEEP:-0}" = 1 ] || rm -rf "$DIR"
done
