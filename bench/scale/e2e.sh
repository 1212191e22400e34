#!/usr/bin/env bash
# End-to-end comparison of builds, run by hand (not a test), on a scenario run.sh kept (KEEP=1):
#
#   bench/scale/e2e.sh DIR ROUNDS ONCEONLY...
#   bench/scale/e2e.sh /tmp/onceonly-scale/n1000000 3 ./old-onceonly ./new-onceonly
#
# Serves DIR/provider_state.json with the first binary's `mock-provider` (cursor pages of 1,000),
# then, ROUNDS times, runs each binary in turn on the same sources as run.sh's end-to-end line:
# Airflow's SQLite database, the journal's, the provider listed over HTTP, every rule, --plan.
# Prints each run's wall time, peak RSS and read-phase timings (ONCEONLY_TIMINGS), each binary's
# fastest and median wall time and read phase, the median time after the listing's last page
# (the listing itself is paced by the config's requests_per_second), their ratio to the first
# binary's, and checks that every binary wrote the same report and plan, byte for byte.
#
# FINGERPRINT_CHANGED=1 compares the plans without their `inputs_fingerprint` line, for builds
# on either side of a change to what the fingerprint hashes (the reports are still compared
# whole).
set -euo pipefail
DIR=$1
ROUNDS=$2
shift 2
[ $# -ge 1 ] || { echo "usage: $0 DIR ROUNDS ONCEONLY..." >&2; exit 2; }
. "$(dirname "$0")/listed_sources.sh"
listed_sources_in "$DIR" e2e "$1" || exit 1

same_plan() {
    if [ "${FINGERPRINT_CHANGED:-0}" = 1 ]; then
        cmp -s <(grep -v '^  "inputs_fingerprint": ' "$1") <(grep -v '^  "inputs_fingerprint": ' "$2")
    else
        cmp -s "$1" "$2"
    fi
}

for round in $(seq 1 "$ROUNDS"); do
    for index in $(seq 1 $#); do
        bin=${!index}
        out=$WORK/$index
        set +e
        ONCEONLY_TIMINGS=1 /usr/bin/time -v -o "$out.time" "$bin" audit --config "$WORK/listing.toml" \
            --format json --plan "$out.plan.json" >"$out.json" 2>"$out.err"
        code=$?
        set -e
        [ $code -le 1 ] || { echo "$bin failed ($code):" >&2; cat "$out.err" >&2; exit 1; }
        wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,p,":"); s=0; for(i=1;i<=n;i++) s=s*60+p[i]; print s}' "$out.time")
        rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2/1024}' "$out.time")
        read=$(sed -n 's/^onceonly timing: read \([0-9.]*\)s.*/\1/p' "$out.err")
        # The listing is paced by the scenario's requests_per_second: what follows its last page
        # (its end, `at` of read:provider:fetch, to the process's end) is onceonly's own tail.
        listed=$(sed -n 's/^onceonly timing: read:provider:fetch .* at \([0-9.]*\)s$/\1/p' "$out.err")
        tail=$(echo "$wall - ${listed:-0}" | bc -l)
        echo "$index|$wall|$read|$tail" >>"$WORK/results"
        printf 'round %s  %-40s wall %7.2f s  read %7.2f s  after the listing %5.2f s  peak RSS %5s MiB\n' \
            "$round" "$bin" "$wall" "$read" "$tail" "$rss"
        grep '^onceonly timing: read:' "$out.err" | sed 's/^onceonly timing: /      /'
        if [ "$index" -gt 1 ]; then
            cmp -s "$WORK/1.json" "$out.json" && same_plan "$WORK/1.plan.json" "$out.plan.json" \
                || { echo "      the report or plan differs from $1's" >&2; exit 1; }
        fi
    done
    if [ "${FINGERPRINT_CHANGED:-0}" = 1 ]; then
        echo "      reports byte-identical across the builds, plans but for their inputs_fingerprint"
    else
        echo "      reports and plans byte-identical across the builds"
    fi
done

stat() { # binary index, field (2 = wall, 3 = read, 4 = after the listing), min|median
    awk -F'|' -v i="$1" -v f="$2" '$1 == i { print $f }' "$WORK/results" | sort -n \
        | awk -v how="$3" '{ v[NR] = $1 } END { if (how == "min") print v[1]; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
echo
printf '%-40s %10s %10s %10s %10s %10s %12s %12s\n' build "min wall" "med wall" "min read" "med read" "med after" "wall ratio" "read ratio"
for index in $(seq 1 $#); do
    bin=${!index}
    printf '%-40s %10.2f %10.2f %10.2f %10.2f %10.2f %12.2f %12.2f\n' "$bin" \
        "$(stat "$index" 2 min)" "$(stat "$index" 2 median)" "$(stat "$index" 3 min)" "$(stat "$index" 3 median)" \
        "$(stat "$index" 4 median)" \
        "$(echo "$(stat "$index" 2 median) / $(stat 1 2 median)" | bc -l)" \
        "$(echo "$(stat "$index" 3 median) / $(stat 1 3 median)" | bc -l)"
done
echo "(ratios: median against $1's median; \"after\": from the listing's last page to the end)"
