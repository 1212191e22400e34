#!/usr/bin/env bash
# Per-phase timings of builds side by side, run by hand (not a test):
#
#   bench/scale/phases.sh SCENARIO_DIR ROUNDS BINARY...
#
# SCENARIO_DIR is one `onceonly synth` wrote. Each round audits the snapshot with every binary
# in turn (all rules, --plan, JSON), with ONCEONLY_TIMINGS=1; FIVE=1 runs only the five rules
# DuckDB is compared on (D001 L001 L002 L003 M001), without --plan. Prints, per phase, each
# binary's median seconds over the rounds and its ratio to the first binary's, then the median
# wall, user and system time and the peak RSS; and checks every binary wrote the same report
# and plan, byte for byte.
set -euo pipefail
DIR=$1 ROUNDS=$2
shift 2
[ $# -ge 1 ] || { echo "usage: $0 SCENARIO_DIR ROUNDS BINARY..." >&2; exit 2; }
WORK=$(mktemp -d /tmp/onceonly-phases.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
RULES=()
[ "${FIVE:-0}" = 1 ] && RULES=(--rule D001 --rule L001 --rule L002 --rule L003 --rule M001)
cd "$DIR"
for round in $(seq "$ROUNDS"); do
    for index in $(seq 1 $#); do
        bin=${!index}
        out=$WORK/$index
        PLAN=()
        [ "${FIVE:-0}" = 1 ] || PLAN=(--plan "$out.plan.json")
        set +e
        ONCEONLY_TIMINGS=1 /usr/bin/time -f "time %e %U %S %M" -o "$out.time" "$bin" audit \
            --config onceonly.toml --from-snapshot . --format json "${RULES[@]}" "${PLAN[@]}" \
            >"$out.json" 2>"$out.err"
        code=$?
        set -e
        [ $code -le 1 ] || { echo "$bin failed ($code):" >&2; cat "$out.err" >&2; exit 1; }
        # phase seconds, then the process's wall, user, system seconds and peak RSS (MiB)
        sed -n 's/^onceonly timing: \([^ ]*\) \([0-9.]*\)s.*/\1 \2/p' "$out.err" \
            | awk -v i="$index" -v r="$round" '{ print i, r, $1, $2 }' >>"$WORK/phases"
        awk -v i="$index" -v r="$round" '/^time / { print i, r, "(wall)", $2; print i, r, "(user)", $3;
            print i, r, "(system)", $4; print i, r, "(peak-MiB)", $5 / 1024 }' "$out.time" >>"$WORK/phases"
        if [ "$index" -gt 1 ]; then
            cmp -s "$WORK/1.json" "$out.json" || { echo "$bin: the report differs from $1's" >&2; exit 1; }
            [ "${FIVE:-0}" = 1 ] || cmp -s "$WORK/1.plan.json" "$out.plan.json" \
                || { echo "$bin: the plan differs from $1's" >&2; exit 1; }
        fi
    done
done
echo "reports$([ "${FIVE:-0}" = 1 ] || echo ' and plans') byte-identical across the builds; medians of $ROUNDS rounds"
awk -v n=$# '
    { key = $3; if (!(key in seen)) { seen[key] = ++count; name[count] = key }
      values[$1, key] = values[$1, key] " " $4 }
    function median(list,   v, k, i, j, t) {
        k = split(list, v, " ")
        for (i = 2; i <= k; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] + 0 > t + 0; j--) v[j + 1] = v[j]; v[j + 1] = t }
        return k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
    }
    END {
        printf "%-34s", "phase"
        for (i = 1; i <= n; i++) printf " %10s %7s", "build " i, "ratio"
        printf "\n"
        for (c = 1; c <= count; c++) {
            key = name[c]; printf "%-34s", key
            base = median(values[1, key])
            for (i = 1; i <= n; i++) {
                if (values[i, key] == "") { printf " %10s %7s", "-", "-"; continue }
                m = median(values[i, key])
                printf " %10.3f %7s", m, (base > 0 ? sprintf("%.2f", m / base) : "-")
            }
            printf "\n"
        }
    }' "$WORK/phases"
