#!/usr/bin/env bash
# Partitioned audits at scale (issue 17), run by hand, not in CI:
#
#   bench/scale/partitions.sh [INTERVALS ...]        # default: 100000 1000000
#
# For each size: `onceonly synth --snapshot-only` writes a scenario with every fault; the one audit from its
# snapshot (all rules, JSON report, HTML page, verdicts, plan, SQL, metrics) is timed; then for
# each N in PARTITIONS (default "1 2 7") `split`, one `audit --partition-out` per part (one after
# the other) and `merge` with the same outputs are timed, each output compared byte for byte
# with the one audit's (the metrics less the line that times the run), and each step's wall
# time and peak memory (/usr/bin/time -v) printed, with the totals: the sum of the parts' times
# (what one worker would take) and the largest part's peak (what each worker must have).
#
# A 10-million-interval scenario is run the same way with more DAGs and partitions and SINGLE=0
# (the one audit would need about 30 GiB):
#   DAGS=400 PARTITIONS=32 SINGLE=0 bench/scale/partitions.sh 10000000
#
# Environment: BIN (default /var/cache/onceonly/release-part/release/onceonly, built with
# `cargo build --release` when missing), BENCH_DIR (default /tmp/onceonly-partitions), DAGS
# (default 40), SEED (default 1), PARTITIONS (default "1 2 7"), SINGLE=0 skips the one audit
# and the comparison, KEEP=1 keeps the scenarios.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-/var/cache/onceonly/release-part/release/onceonly}
WORK=${BENCH_DIR:-/tmp/onceonly-partitions}
DAGS=${DAGS:-40}
SEED=${SEED:-1}
PARTITIONS=${PARTITIONS:-1 2 7}
SINGLE=${SINGLE:-1}
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(100000 1000000)
RATES=L001=0.01,D001=0.01,D002=0.01,L002=0.01,L003=0.01,M001=0.01,M002=0.01,K002=0.01,C001=0.01,reconciled=0.01,retry=0.03,voided=0.01,check-then-create=0.02

[ -x /usr/bin/time ] || { apt-get update -qq && apt-get install -y -qq time; }
if [ ! -x "$BIN" ]; then
    (cd "$ROOT" && CARGO_TARGET_DIR=$(dirname "$(dirname "$BIN")") nice cargo build --release --bin onceonly)
fi
mkdir -p "$WORK"

# measure LABEL -- COMMAND...: runs COMMAND, prints "LABEL wall_s peak_MiB" and appends the
# figures to $FIGURES. Exit 0 and 1 (findings) are success.
measure() {
    local label=$1; shift 2
    local log=$WORK/time.log status=0
    /usr/bin/time -v "$@" > /dev/null 2> "$log" || status=$?
    if [ "$status" -gt 1 ]; then
        cat "$log" >&2
        echo "partitions.sh: $label failed (exit $status)" >&2
        exit 2
    fi
    local wall peak
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,t,":"); s=0; for(i=1;i<=n;i++) s=s*60+t[i]; print s}' "$log")
    peak=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2/1024}' "$log")
    printf '%-28s %9.1f s %8s MiB\n' "$label" "$wall" "$peak"
    echo "$label $wall $peak" >> "$FIGURES"
}

# outputs DIR: the output flags of an audit or merge writing into DIR.
outputs() {
    echo --format json --output "$1/report.json" --html "$1/report.html" \
        --verdicts "$1/verdicts.csv" --plan "$1/plan.json" --sql "$1/repair.sql" \
        --metrics "$1/metrics.prom" --fail-on never
}

same() {
    local one=$1 many=$2 file
    for file in report.json report.html verdicts.csv plan.json repair.sql; do
        cmp -s "$one/$file" "$many/$file" || { echo "DIFFERENT: $many/$file" >&2; return 1; }
    done
    diff -q <(grep -v '^onceonly_audit_duration_seconds' "$one/metrics.prom") \
        <(grep -v '^onceonly_audit_duration_seconds' "$many/metrics.prom") > /dev/null \
        || { echo "DIFFERENT: $many/metrics.prom" >&2; return 1; }
    echo "identical to the one audit: report, page, verdicts, plan, SQL, metrics"
}

for size in "${SIZES[@]}"; do
    dir=$WORK/n$size
    scenario=$dir/scenario
    FIGURES=$dir/figures.txt
    rm -rf "$dir"
    mkdir -p "$dir"
    : > "$FIGURES"
    echo "== $size intervals, $DAGS DAGs, seed $SEED"
    measure "synth" -- "$BIN" synth --intervals "$size" --dags "$DAGS" --seed "$SEED" \
        --out "$scenario" --rates "$RATES" --snapshot-only
    config=$scenario/onceonly.toml
    if [ "$SINGLE" = 1 ]; then
        mkdir -p "$dir/single"
        # shellcheck disable=SC2046
        measure "one audit" -- "$BIN" audit --config "$config" --from-snapshot "$scenario" \
            $(outputs "$dir/single")
    fi
    for n in $PARTITIONS; do
        run=$dir/n$n
        mkdir -p "$run/merged"
        measure "split into $n" -- "$BIN" split --config "$config" --from-snapshot "$scenario" \
            --partitions "$n" --out "$run/parts"
        for ((k = 0; k < n; k++)); do
            measure "  part $k of $n" -- "$BIN" audit --config "$config" \
                --from-snapshot "$run/parts/part-$k" --partition-out "$run/results/$k" \
                --format json --output /dev/null --fail-on never
        done
        # shellcheck disable=SC2046
        measure "merge of $n" -- "$BIN" merge --config "$config" "$run"/results/* \
            $(outputs "$run/merged")
        grep -E "^  part [0-9]+ of $n " "$FIGURES" | awk -v n="$n" \
            '{t += $(NF-1); if ($NF + 0 > p) p = $NF + 0}
             END {printf "%-28s %9.1f s %8s MiB (largest part)\n", "parts of " n ", total", t, p}'
        grep -E "^(split into $n|  part [0-9]+ of $n|merge of $n) " "$FIGURES" | awk -v n="$n" \
            '{t += $(NF-1); if ($NF + 0 > p) p = $NF + 0}
             END {printf "%-28s %9.1f s %8s MiB (largest step)\n", "split+parts+merge of " n, t, p}'
        if [ "$SINGLE" = 1 ]; then
            same "$dir/single" "$run/merged"
        fi
        rm -rf "$run/parts"
    done
    [ "${KEEP:-0}" = 1 ] || rm -rf "$scenario"
done
