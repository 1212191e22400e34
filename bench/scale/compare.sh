#!/usr/bin/env bash
# Interleaved five-rule audits of one or more onceonly binaries against DuckDB, run by hand:
#
#   bench/scale/compare.sh SCENARIO_DIR ROUNDS BINARY...
#
# SCENARIO_DIR is one `onceonly synth` wrote (bench/scale/run.sh with KEEP=1 leaves them in
# /tmp/onceonly-scale/nN). Each round runs every binary, then DuckDB, one after another, so a
# busy machine slows them alike; it prints each one's fastest wall and user time, its median
# system time and minor page faults (the kernel's share: faulting in and zeroing fresh pages,
# and unmapping them at exit), its walls, and its peak RSS in the last round.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=$1 ROUNDS=$2
shift 2
DUCK=/opt/venvs/duckdb/bin/python
TIMES=$(mktemp)
trap 'rm -f "$TIMES"' EXIT
cd "$DIR"
for _ in $(seq "$ROUNDS"); do
    for bin in "$@"; do
        /usr/bin/time -f "%e %U %M %S %R" -o "$TIMES" "$bin" audit --config onceonly.toml --from-snapshot . \
            --rule D001 --rule L001 --rule L002 --rule L003 --rule M001 --format json >/dev/null 2>&1 || true
        echo "$bin $(tail -1 "$TIMES")"
    done
    /usr/bin/time -f "%e %U %M %S %R" -o "$TIMES" "$DUCK" "$ROOT/bench/scale/duckdb_rules.py" . >/dev/null
    echo "duckdb $(tail -1 "$TIMES")"
done | awk '{
    if (!($1 in wall) || $2 < wall[$1]) wall[$1] = $2
    if (!($1 in user) || $3 < user[$1]) user[$1] = $3
    rss[$1] = $4; walls[$1] = walls[$1] " " $2; n[$1]++; sys[$1, n[$1]] = $5; faults[$1, n[$1]] = $6
}
function median(name, values,   count, i, j, t, v) {
    count = n[name]
    for (i = 1; i <= count; i++) v[i] = values[name, i]
    for (i = 2; i <= count; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] + 0 > t + 0; j--) v[j + 1] = v[j]; v[j + 1] = t }
    return count % 2 ? v[(count + 1) / 2] : (v[count / 2] + v[count / 2 + 1]) / 2
}
END {
    for (k in wall) printf "%-40s min wall %6.2f s  min user %6.2f s  median system %5.2f s  median faults %5dk  peak RSS %5d MiB  walls:%s\n", k, wall[k], user[k], median(k, sys), median(k, faults) / 1000, rss[k] / 1024, walls[k]
    if ("duckdb" in wall) for (k in wall) if (k != "duckdb") printf "%-40s %.2fx DuckDB (fastest walls)\n", k, wall[k] / wall["duckdb"]
}'
