# Sourced by e2e.sh and bounds.sh: the sources of an end-to-end audit of a scenario run.sh kept.
#
#   listed_sources_in DIR NAME ONCEONLY
#
# Makes a scratch folder WORK (/tmp/onceonly-NAME.*), removed on exit with the mock provider
# stopped, and serves the sources there (serve_listed_sources).
#
#   serve_listed_sources DIR WORK ONCEONLY
#
# Serves DIR/provider_state.json with ONCEONLY's `mock-provider` (cursor pages of 1,000) in the
# background (its pid in MOCK; the caller stops it), writes WORK/listing.toml (the scenario's
# listing config pointed at it) and links Airflow's and the journal's SQLite files beside it, as
# the config names them relative to itself.
serve_listed_sources() {
    local dir=$1 work=$2 bin=$3 url
    "$bin" mock-provider --state "$dir/provider_state.json" --page-size 1000 \
        >"$work/mock.url" 2>"$work/mock.err" &
    MOCK=$!
    for _ in $(seq 1 3000); do [ -s "$work/mock.url" ] && break; sleep 0.1; done
    url=$(head -1 "$work/mock.url")
    [ -n "$url" ] || { echo "the mock provider did not start:" >&2; cat "$work/mock.err" >&2; return 1; }
    sed "s#__PROVIDER_URL__#$url#" "$dir/onceonly-listing.toml" >"$work/listing.toml"
    ln -s "$dir/airflow.db" "$work/airflow.db"
    ln -s "$dir/journal.db" "$work/journal.db"
}

listed_sources_in() {
    WORK=$(mktemp -d "/tmp/onceonly-$2.XXXXXX")
    MOCK=
    trap 'kill $MOCK 2>/dev/null || true; rm -rf "$WORK"' EXIT
    serve_listed_sources "$1" "$WORK" "$3"
}
