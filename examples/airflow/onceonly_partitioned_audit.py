"""The nightly onceonly audit in parts: split, one mapped audit task per part, merge.

For installations whose nightly (or quarterly) audit outgrows one worker's memory. `split`
reads the sources once and writes one snapshot per part; each part is audited by a mapped
task instance (dynamic task mapping, `.expand`), on whichever worker the executor gives it;
`merge` puts the parts' results together into the report one audit would have written, byte
for byte, and behaves as the nightly DAG (onceonly_nightly_audit.py) does: it compares with
the previous night's report and fails only when a finding is *new* (`--fail-on-new`), and
writes the HTML page, the repair plan, the SQL script and the metrics.

Set ONCEONLY_CONFIG to the onceonly.toml of the installation, ONCEONLY_REPORTS to a folder
every worker can read and write (the parts and results go there, and the previous report must
be there the next night), and ONCEONLY_PARTITIONS to the number of parts (default 4). Only the
split task reads the sources (Airflow's database, the journal, the provider); the part audits
and the merge read files alone.
"""
import os
from datetime import datetime, timedelta

try:  # Airflow 3
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.sdk import DAG, CronDataIntervalTimetable, task
except ImportError:  # Airflow 2
    from airflow import DAG
    from airflow.decorators import task
    from airflow.operators.bash import BashOperator
    from airflow.timetables.interval import CronDataIntervalTimetable

PARTITIONS = int(os.environ.get("ONCEONLY_PARTITIONS", "4"))

SPLIT = r"""
set -euo pipefail
night="${ONCEONLY_REPORTS:-/var/lib/onceonly}/{{ data_interval_end | ds }}.parts"
rm -rf "$night"
mkdir -p "$night"
onceonly split --config "$ONCEONLY_CONFIG" \
    --since "{{ data_interval_start | ts }}" --until "{{ data_interval_end | ts }}" \
    --partitions "$PARTITIONS" --out "$night/parts" > /dev/null
"""

# One mapped instance per part: PART is the part's number. Findings are the merge's to judge,
# so a part's audit fails only on bad input (exit 2).
AUDIT_PART = r"""
set -euo pipefail
night="${ONCEONLY_REPORTS:-/var/lib/onceonly}/{{ data_interval_end | ds }}.parts"
status=0
onceonly audit --config "$ONCEONLY_CONFIG" --from-snapshot "$night/parts/part-$PART" \
    --partition-out "$night/results/$PART" --format json --output "$night/part-$PART.json" \
    --fail-on never || status=$?
exit "$status"
"""

MERGE = r"""
set -euo pipefail
reports="${ONCEONLY_REPORTS:-/var/lib/onceonly}"
night="$reports/{{ data_interval_end | ds }}.parts"
today="$reports/{{ data_interval_end | ds }}"
baseline=()
if [ -f "$reports/latest.json" ]; then
    baseline=(--baseline "$reports/latest.json" --fail-on-new)
fi
status=0
onceonly merge --config "$ONCEONLY_CONFIG" "$night"/results/* \
    --format json --output "$today.json" --html "$today.html" \
    --plan "$today.plan.md" --sql "$today.repair.sql" \
    --metrics "${ONCEONLY_METRICS:-$reports/onceonly.prom}" \
    "${baseline[@]}" || status=$?
# Exit 2 is a missing or foreign part, or an unreadable result: no report for tomorrow.
if [ "$status" -ne 2 ]; then
    cp "$today.json" "$reports/latest.json"
    cp "$today.html" "$reports/report.html"
fi
exit "$status"
"""


@task
def parts():
    """The environment of each part's audit: one mapped task instance per part."""
    return [{"PART": str(part)} for part in range(PARTITIONS)]


with DAG(
    dag_id="onceonly_partitioned_audit",
    # Each run audits the day before it (its data interval), on Airflow 3 as on Airflow 2:
    # Airflow 3 reads "@daily" as a point in time, a data interval that starts where it ends.
    # A run triggered by hand audits the last whole day before its logical date (the UI and
    # the REST API take one; `airflow dags trigger` on Airflow 3 takes the time it is run).
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=10)},
    tags=["onceonly", "audit"],
) as dag:
    split = BashOperator(
        task_id="split",
        bash_command=SPLIT,
        env={"PARTITIONS": str(PARTITIONS)},
        append_env=True,
    )
    audit_part = BashOperator.partial(
        task_id="audit_part", bash_command=AUDIT_PART, append_env=True
    ).expand(env=parts())
    # Not retried: its exit 1 is a judgement (new findings), not a passing fault, and a retry
    # would compare the night's report with itself (the latest.json the failed try wrote) and
    # pass. A missing or unreadable part (exit 2) needs its part audited again, not the merge.
    merge = BashOperator(task_id="merge", bash_command=MERGE, retries=0)
    split >> audit_part >> merge
