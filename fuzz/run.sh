#!/usr/bin/env bash
# Runs every fuzz target (or the ones named) for SECONDS each, one after another.
#
#   fuzz/run.sh 600                  # every target, ten minutes each
#   fuzz/run.sh 60 config timestamp  # two targets, a minute each
#
# cargo-fuzz needs nightly features; with only a stable toolchain, RUSTC_BOOTSTRAP=1 lets
# stable rustc accept them. Builds go to a target directory of their own so they do not fight
# the main build; the targets are built once, then the binaries run, so edits made to the
# tree while a long run goes on do not rebuild it half way. The committed seeds in
# fuzz/corpus/<target> are read, never written: what libFuzzer learns goes to
# $FUZZ_WORK/corpus/<target>; crashes go to fuzz/artifacts/<target>. One line per target with
# its executions is appended to $FUZZ_WORK/summary.txt.
set -euo pipefail

seconds=${1:?usage: fuzz/run.sh SECONDS [TARGET...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(provider_page config key_template timestamp sql_literal pickle retry_after)
fi
work=${FUZZ_WORK:-/var/cache/onceonly/fuzz-work}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/cache/onceonly/fuzz}
export RUSTC_BOOTSTRAP=1
mkdir -p "$work"
cd "$root"

# Sanitizer none: the targets look for panics and wrong answers in safe Rust; ASan would
# halve the executions for little gain.
if [ -z "${FUZZ_NO_BUILD:-}" ]; then
    nice cargo fuzz build -s none
fi
bin="$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release"

status=0
for target in "${targets[@]}"; do
    mkdir -p "$work/corpus/$target" "$here/artifacts/$target"
    dict=()
    if [ -f "$here/$target.dict" ]; then
        dict=(-dict="$here/$target.dict")
    fi
    log="$work/$target.log"
    echo "== $target for ${seconds}s (log: $log)"
    started=$(date +%s)
    if nice "$bin/$target" "$work/corpus/$target" "$here/corpus/$target" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
        -artifact_prefix="$here/artifacts/$target/" -print_final_stats=1 "${dict[@]}" >"$log" 2>&1; then
        outcome=ok
    else
        outcome=CRASH
        status=1
    fi
    elapsed=$(( $(date +%s) - started ))
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    line="$(date -u +%FT%TZ) $target ${outcome} ${runs:-?} executions in ${elapsed}s"
    echo "$line" | tee -a "$work/summary.txt"
    if [ "$outcome" = CRASH ]; then
        grep -A20 -m1 'panicked at\|ERROR: libFuzzer\|SUMMARY' "$log" || true
    fi
done
exit $status
