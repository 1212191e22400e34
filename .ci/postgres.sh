#!/usr/bin/env bash
# Starts a private PostgreSQL cluster on 127.0.0.1 from Debian's packages, creates the Airflow
# schema in it with the real `airflow db migrate` (apache-airflow 3.3.2 from PyPI) and runs the
# fixture scenarios with the real scheduler (fixtures/airflow/postgres_scenario.sh).
#
#   source .ci/postgres.sh   # exports ONCEONLY_TEST_PG_URL, ONCEONLY_TEST_PG_PASSWORD,
#                            # ONCEONLY_TEST_PG_OUT; stop_postgres stops the cluster
set -euo pipefail

if ! ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
PGDIR=$(mktemp -d /tmp/onceonly-pg.XXXXXX)
chown postgres "$PGDIR"
PGPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
su postgres -c "$PGBIN/initdb -D $PGDIR/data -A trust -U postgres" >/dev/null
su postgres -c "$PGBIN/pg_ctl -D $PGDIR/data -o '-c listen_addresses=127.0.0.1 -p $PGPORT -k $PGDIR' -l $PGDIR/log -w start" >/dev/null

stop_postgres() {
    su postgres -c "$PGBIN/pg_ctl -D $PGDIR/data -m fast stop" >/dev/null 2>&1 || true
}

ONCEONLY_TEST_PG_PASSWORD="ci-$(python3 -c 'import secrets; print(secrets.token_hex(8))')"
"$PGBIN/psql" -q -h 127.0.0.1 -p "$PGPORT" -U postgres \
    -c "CREATE USER airflow PASSWORD '$ONCEONLY_TEST_PG_PASSWORD'" \
    -c "CREATE DATABASE airflow OWNER airflow"
# From here on the server asks for passwords.
sed -i 's/ trust$/ scram-sha-256/' "$PGDIR/data/pg_hba.conf"
su postgres -c "$PGBIN/pg_ctl -D $PGDIR/data reload" >/dev/null

ONCEONLY_TEST_PG_OUT="$PGDIR/scenario"
# A real scheduler on a shared machine: if a scenario did not come out as designed (the
# generator checks), run it once more from an empty schema before giving up.
scenario() {
    bash fixtures/airflow/postgres_scenario.sh \
        "postgresql://airflow:$ONCEONLY_TEST_PG_PASSWORD@127.0.0.1:$PGPORT/airflow" "$ONCEONLY_TEST_PG_OUT" "$@" \
        >> "$PGDIR/scenario.log" 2>&1
}
scenario || { echo "the PostgreSQL scenario failed once; again from an empty schema"; scenario --reset; } \
    || { tail -40 "$PGDIR/scenario.log"; stop_postgres; exit 1; }
python3 fixtures/airflow/export_snapshots.py "$ONCEONLY_TEST_PG_OUT"

export ONCEONLY_TEST_PG_URL="postgresql+psycopg2://airflow@127.0.0.1:$PGPORT/airflow"
export ONCEONLY_TEST_PG_PASSWORD ONCEONLY_TEST_PG_OUT
export ONCEONLY_TEST_AIRFLOW_PYTHON=/opt/venvs/airflow-3.3.2/bin/python
set +euo pipefail
