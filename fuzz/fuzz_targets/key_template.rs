//! Key templates: any text is a template or an error, and a template evaluates over attempts
//! to exactly the key a reference rendering (chrono, part by part, in each time's zone) gives;
//! never a panic.
#![no_main]

use std::fmt::Write;

use chrono::FixedOffset;
use libfuzzer_sys::fuzz_target;
use onceonly::keys::{KeyTemplate, Part, UTC, Zone, conf_column};
use polars::prelude::*;

const TIMES: [i64; 3] = [
    1_793_527_200_123_456,   // 2026-11-01T10:00:00.123456
    -2_208_988_800_000_000,  // 1900-01-01
    253_402_300_799_000_000, // 9999-12-31T23:59:59
];

/// Each row's DAG zone as Airflow serializes it (`attempts.dag_timezone`): an IANA name, a fixed
/// offset in seconds, none (UTC).
const DAG_TIMEZONES: [Option<&str>; 3] = [Some("Europe/Berlin"), Some("-18000"), None];

fn dag_zone(row: usize) -> Zone {
    [
        Zone::Named(chrono_tz::Europe::Berlin),
        Zone::Offset(FixedOffset::west_opt(5 * 3600).unwrap()),
        UTC,
    ][row]
}

fn reference(template: &KeyTemplate, row: usize, conf: &[&str]) -> Option<String> {
    let mut key = String::new();
    for part in &template.parts {
        match part {
            Part::Literal(text) => key.push_str(text),
            Part::Field(name) => key.push_str(&match *name {
                "map_index" => (row as i64 - 1).to_string(),
                other => format!("{other}-{row}"),
            }),
            Part::Time(_, format, zone) => {
                let time = chrono::DateTime::from_timestamp_micros(TIMES[row])?;
                let zone = if *zone == Zone::OfDag {
                    dag_zone(row)
                } else {
                    *zone
                };
                match zone {
                    Zone::Named(tz) => write!(key, "{}", time.with_timezone(&tz).format(format)),
                    Zone::Offset(offset) => {
                        write!(key, "{}", time.with_timezone(&offset).format(format))
                    }
                    Zone::OfDag => unreachable!("resolved above"),
                }
                .ok()?;
            }
            Part::Conf(_) => key.push_str(conf[row]),
        }
    }
    Some(key)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(template) = KeyTemplate::parse(text) else {
        return;
    };
    let rows = TIMES.len();
    let conf = ["eu-west", "\u{1b}[31m=cmd|' /c calc'!A1", ""];
    let mut columns = vec![
        Column::new(
            "dag_id".into(),
            (0..rows).map(|r| format!("dag_id-{r}")).collect::<Vec<_>>(),
        ),
        Column::new(
            "task_id".into(),
            (0..rows)
                .map(|r| format!("task_id-{r}"))
                .collect::<Vec<_>>(),
        ),
        Column::new(
            "run_id".into(),
            (0..rows).map(|r| format!("run_id-{r}")).collect::<Vec<_>>(),
        ),
        Column::new(
            "map_index".into(),
            (0..rows).map(|r| r as i64 - 1).collect::<Vec<_>>(),
        ),
        Column::new("dag_timezone".into(), DAG_TIMEZONES.to_vec()),
    ];
    for name in ["iv_start", "iv_end", "logical_date"] {
        columns.push(
            Column::new(name.into(), TIMES.to_vec())
                .cast(&onceonly::model::utc())
                .unwrap(),
        );
    }
    let mut names: Vec<&str> = template.conf_names().collect();
    names.sort();
    names.dedup();
    for name in names {
        columns.push(Column::new(conf_column(name).into(), conf.to_vec()));
    }
    let mut frame = DataFrame::new_infer_height(columns).unwrap();
    // Times are formatted (by chrono) before the key is put together; a format that cannot
    // format some row's time is an error, and only then.
    if template.add_times(&mut frame).is_err() {
        assert!(
            (0..rows).any(|row| reference(&template, row, &conf).is_none()),
            "{text:?} refused, yet chrono formats every row"
        );
        return;
    }
    let keys = frame
        .lazy()
        .select([template.expr().alias("key")])
        .collect()
        .expect("the key from the formatted columns");
    let keys: Vec<Option<String>> = keys
        .column("key")
        .unwrap()
        .str()
        .unwrap()
        .iter()
        .map(|key| key.map(str::to_string))
        .collect();
    assert_eq!(keys.len(), rows);
    for (row, key) in keys.iter().enumerate() {
        if let Some(expected) = reference(&template, row, &conf) {
            assert_eq!(
                key.as_deref(),
                Some(expected.as_str()),
                "{text:?}, row {row}"
            );
        }
    }
});
