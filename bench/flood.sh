#!/usr/bin/env bash
# Peak memory of an audit with a flood of findings, by output: run by hand, prints figures.
#
#   bench/flood.sh [BIN] [INTERVALS]      # default: target/release/onceonly, 300000
#
# Synthesizes a scenario where 60% of the intervals have an unclaimed object (an L003 each,
# `synth --rates L003=0.6`) besides every other case, and audits it from its snapshot four
# ways: the terminal table to a file (the baseline: it lists the first 50 findings per DAG and
# rule, so its text is small), the table with the JSON plan, JSON to a file, JSON with the
# JSON plan, and JSON on stdout.
# Each line gives the peak resident memory (GNU time's %M) and its ratio to the baseline's:
# what the outputs themselves cost beyond the audit.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/target/release/onceonly}
INTERVALS=${2:-300000}
DIR=$(mktemp -d /tmp/onceonly-flood.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
"$BIN" synth --intervals "$INTERVALS" --rates L003=0.6 --snapshot-only --out "$DIR/s" -q >/dev/null
peak() {  # peak NAME ARGS...: the peak RSS in kB of an audit of the snapshot
    local name=$1; shift
    /usr/bin/time -f "%M" -o "$DIR/$name.rss" "$BIN" audit --config "$DIR/s/onceonly.toml" \
        --from-snapshot "$DIR/s" "$@" >/dev/null 2>"$DIR/$name.err" || true
    tail -1 "$DIR/$name.rss"
}
base=$(peak table --format table --output "$DIR/report.txt")
printf '%-26s %10s  %s\n' output "peak MiB" "x table"
row() { printf '%-26s %10d  %.2f\n' "$1" $(($2 / 1024)) "$(echo "$2 / $base" | bc -l)"; }
row "table (baseline)" "$base"
row "table + json plan" "$(peak tplan --format table --output "$DIR/report.txt" --plan "$DIR/plan.json")"
row "json file" "$(peak json --format json --output "$DIR/report.json")"
row "json file + json plan" "$(peak plan --format json --output "$DIR/report.json" --plan "$DIR/plan.json")"
row "json on stdout" "$(peak stdout --format json)"
echo "findings: $(grep -c '"code"' "$DIR/report.json" || true); report $(du -m "$DIR/report.json" | cut -f1) MiB, plan $(du -m "$DIR/plan.json" | cut -f1) MiB"
