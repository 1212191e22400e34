"""The nightly onceonly audit as an Airflow DAG.

Every night it audits the tries that ran during the previous day, keeps the report, and
compares it with the previous night's report: the task fails only when a finding is *new*
(`--fail-on-new`), so a known problem that is being worked on does not page anyone twice.
It also writes metrics for node_exporter's textfile collector, and beside the JSON report a
self-contained HTML page (report.html: coverage, counts, a picture of every DAG's intervals,
the findings with each rule's explanation) and a repair plan and SQL script for whoever picks
the failure up.

Set ONCEONLY_CONFIG to the onceonly.toml of the installation and ONCEONLY_REPORTS to a folder
the workers share (the previous report must be there the next night).
"""
from datetime import datetime, timedelta

try:  # Airflow 3
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.sdk import DAG, CronDataIntervalTimetable
except ImportError:  # Airflow 2
    from airflow import DAG
    from airflow.operators.bash import BashOperator
    from airflow.timetables.interval import CronDataIntervalTimetable

AUDIT = r"""
set -euo pipefail
reports="${ONCEONLY_REPORTS:-/var/lib/onceonly}"
mkdir -p "$reports"
today="$reports/{{ data_interval_end | ds }}"
# The night's first try fixes what the night is compared with: the previous night's report (or
# none). A retry compares with the same, not with the latest.json its failed try wrote, which
# would make every finding of tonight "persisting" and pass.
if [ ! -e "$today.baseline.json" ] && [ ! -e "$today.no-baseline" ]; then
    if [ -f "$reports/latest.json" ]; then
        cp "$reports/latest.json" "$today.baseline.json"
    else
        : > "$today.no-baseline"
    fi
fi
baseline=()
if [ -f "$today.baseline.json" ]; then
    baseline=(--baseline "$today.baseline.json" --fail-on-new)
fi
status=0
onceonly audit --config "$ONCEONLY_CONFIG" \
    --since "{{ data_interval_start | ts }}" --until "{{ data_interval_end | ts }}" \
    --format json --output "$today.json" --html "$today.html" \
    --plan "$today.plan.md" --sql "$today.repair.sql" \
    --metrics "${ONCEONLY_METRICS:-$reports/onceonly.prom}" \
    --save-snapshot "$today.evidence" \
    "${baseline[@]}" || status=$?
# Exit 2 is an incomplete or unreadable source: no report to compare against tomorrow.
if [ "$status" -ne 2 ]; then
    cp "$today.json" "$reports/latest.json"
    cp "$today.html" "$reports/report.html"
fi
exit "$status"
"""

with DAG(
    dag_id="onceonly_nightly_audit",
    # Each run audits the day before it (its data interval), on Airflow 3 as on Airflow 2:
    # Airflow 3 reads "@daily" as a point in time, a data interval that starts where it ends.
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=10)},
    tags=["onceonly", "audit"],
) as dag:
    BashOperator(task_id="audit", bash_command=AUDIT)
