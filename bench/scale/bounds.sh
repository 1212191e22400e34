#!/usr/bin/env bash
# The tries' bounds query of builds side by side, run by hand (not a test):
#
#   bench/scale/bounds.sh DIR ROUNDS ONCEONLY...
#
# The provider listing of an end-to-end audit starts once Airflow's database has given the
# tries' time bounds (`read:attempts:bounds`). On the sources of a scenario run.sh kept (as
# e2e.sh serves them), each round starts each binary's audit with ONCEONLY_TIMINGS=1, stops it
# after 3 seconds (the bounds come well before) and prints each binary's bounds times, sorted.
set -uo pipefail
DIR=$1 ROUNDS=$2
shift 2
[ $# -ge 1 ] || { echo "usage: $0 DIR ROUNDS ONCEONLY..." >&2; exit 2; }
. "$(dirname "$0")/listed_sources.sh"
listed_sources_in "$DIR" bounds "$1" || exit 1
for _ in $(seq "$ROUNDS"); do
    for bin in "$@"; do
        ONCEONLY_TIMINGS=1 timeout -s INT 3 "$bin" audit --config "$WORK/listing.toml" \
            --format json >/dev/null 2>"$WORK/err"
        echo "$bin $(sed -n 's/^onceonly timing: read:attempts:bounds \([0-9.]*\)s.*/\1/p' "$WORK/err")"
    done
done | sort -k1,1 -k2,2n | awk '{ times[$1] = times[$1] " " $2 } END { for (bin in times) print bin ":" times[bin] }'
