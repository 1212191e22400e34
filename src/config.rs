//! The TOML configuration, validated up front into typed settings.
//!
//! Every error names the file, the key and the line: `toml` reports spans for syntax and
//! unknown fields; the checks here find the key's line themselves. `[airflow]` and
//! `[provider]` are read in typed layers ([`table`]): a key of another source kind, pagination
//! style or auth kind is refused at its line, naming where it belongs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::keys::KeyTemplate;
use crate::model::{JOURNAL, JOURNAL_WRITTEN_ONLY, PHASES};
use crate::sources::TableSources;
use crate::sources::database::Database;
/// Where each table is read from; defined with the sources that read them, named from here too.
pub use crate::sources::{JournalSettings, Source};

mod airflow;
mod provider;
mod table;

/// Operations match DAGs and tasks by glob; kept importable from here for the commands.
pub use crate::glob::glob_match;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    journal: Option<RawJournal>,
    #[serde(default)]
    operation: Vec<RawOperation>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJournal {
    snapshot: Option<PathBuf>,
    /// A database URL holding the journal table (sqlx or SQLAlchemy form).
    url: Option<String>,
    /// The journal table, with `url`.
    table: Option<String>,
    password_env: Option<String>,
    /// With `url`: how long a read waits for a lock another process holds (`30s`, `500ms`).
    busy_timeout: Option<String>,
    #[serde(default)]
    columns: BTreeMap<String, String>,
    phases: Option<BTreeMap<String, Vec<String>>>,
}

/// `[provider]`: the keys every provider source has; a listing API's keys are read by
/// [`provider`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProvider {
    snapshot: Option<PathBuf>,
    /// The provider's listing endpoint (`http://host/v1/exports`), instead of a snapshot.
    url: Option<String>,
    key_ttl: Option<String>,
    #[serde(default = "default_void_statuses")]
    void_statuses: Vec<String>,
    #[serde(default)]
    replay: Replay,
    /// With `snapshot`: how many objects the file holds, checked when it is read.
    snapshot_rows: Option<u64>,
    /// With `snapshot`: the file's SHA-256 (hex), checked when it is read.
    snapshot_sha256: Option<String>,
}

fn default_void_statuses() -> Vec<String> {
    ["cancelled", "canceled", "voided", "deleted"]
        .map(String::from)
        .to_vec()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOperation {
    name: Option<String>,
    dag_id: String,
    task_id: String,
    key: Option<String>,
    /// Overrides `[provider] key_ttl` for this operation (providers differ by endpoint).
    key_ttl: Option<String>,
    /// The IANA zone the key template's times are formatted in, where a placeholder names none
    /// (default: the DAG's own zone from the metadata, else UTC).
    timezone: Option<String>,
}

/// What a provider returns when a key it still remembers is sent again (SPEC §3): `ttl-risk`
/// and K002 say what a re-run gets back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Replay {
    /// The first response, frozen, whatever happened to the object since.
    #[default]
    Frozen,
    /// The object with its latest status.
    Latest,
    /// The object's current state.
    Current,
    /// A changed body under the key is refused (HTTP 422, as Stripe does); the same body gets
    /// the first response.
    Reject,
}

#[derive(Debug, Clone)]
pub struct ProviderSettings {
    pub source: Source,
    /// How long the provider remembers an idempotency key, in microseconds.
    pub key_ttl: Option<i64>,
    /// Where the TTL comes from: a preset with its public source, or the configured duration.
    pub key_ttl_source: Option<String>,
    pub void_statuses: Vec<String>,
    pub replay: Replay,
    /// What a provider file must hold (`snapshot_rows`, `snapshot_sha256`).
    pub file_check: crate::sources::snapshot::FileCheck,
}

/// An `[[operation]]`: which task's tries cause a side effect, and how its key is derived.
#[derive(Debug, Clone)]
pub struct Operation {
    pub name: String,
    pub dag_id: String,
    pub task_id: String,
    pub key: Option<KeyTemplate>,
    pub key_ttl: Option<i64>,
}

impl Operation {
    pub fn matches(&self, dag_id: &str, task_id: &str) -> bool {
        glob_match(&self.dag_id, dag_id) && glob_match(&self.task_id, task_id)
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub path: PathBuf,
    pub attempts: Source,
    /// `[airflow] heartbeat_timeout`: how old a running try's last heartbeat may be before it
    /// is named probably dead.
    pub heartbeat_timeout: Duration,
    pub journal: JournalSettings,
    pub provider: ProviderSettings,
    pub operations: Vec<Operation>,
}

impl Config {
    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path)
            .map_err(|err| Error::io(path.display().to_string(), err))?;
        Config::parse(&text, path)
    }

    /// Parses config text; relative paths are taken from `path`'s folder.
    pub fn parse(text: &str, path: &Path) -> Result<Config> {
        let shown = path.display().to_string();
        let file = table::Source { text, path: &shown };
        let mut document = toml::de::DeTable::parse(text).map_err(|err| file.toml_error(&err))?;
        // `[airflow]` and `[provider]` are read in layers of their own (see `table`).
        let airflow = document.get_mut().remove("airflow");
        let provider = document.get_mut().remove("provider");
        let raw = RawConfig::deserialize(toml::de::Deserializer::from(document))
            .map_err(|err| file.toml_error(&err))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let at = Locator { text, path: &shown };

        let airflow = airflow.ok_or_else(|| {
            Error::config(
                &shown,
                "missing [airflow]: where to read Airflow's task tries",
            )
        })?;
        let journal = raw.journal.ok_or_else(|| {
            Error::config(
                &shown,
                "missing [journal]: where to read the operation journal",
            )
        })?;
        let mut provider_table = table::Table::new(
            "provider",
            provider.ok_or_else(|| {
                Error::config(
                    &shown,
                    "missing [provider]: where to read the provider's objects",
                )
            })?,
            file,
        )?;
        let provider: RawProvider = provider_table.take()?;
        let file_check = crate::sources::snapshot::FileCheck {
            rows: provider.snapshot_rows,
            sha256: match &provider.snapshot_sha256 {
                Some(hex) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    Some(hex.to_ascii_lowercase())
                }
                Some(hex) => {
                    return Err(at.error(
                        "snapshot_sha256",
                        format!(
                            "[provider] snapshot_sha256 = {hex:?} is not a SHA-256 (64 hex digits)"
                        ),
                    ));
                }
                None => None,
            },
        };
        if provider.url.is_some() && (file_check.rows.is_some() || file_check.sha256.is_some()) {
            let key = if file_check.rows.is_some() {
                "snapshot_rows"
            } else {
                "snapshot_sha256"
            };
            return Err(at.error(
                key,
                format!(
                    "[provider] `{key}` checks a snapshot file: it needs `snapshot`, not `url`"
                ),
            ));
        }

        for (canonical, own) in &journal.columns {
            if !JOURNAL.iter().any(|spec| spec.name == canonical)
                && !JOURNAL_WRITTEN_ONLY.contains(&canonical.as_str())
            {
                let known: Vec<_> = JOURNAL
                    .iter()
                    .map(|spec| spec.name)
                    .chain(JOURNAL_WRITTEN_ONLY)
                    .collect();
                return Err(at.error(canonical, format!(
                    "[journal.columns] names `{canonical}`, which is not a journal column (known: {})",
                    known.join(", ")
                )));
            }
            if own.trim().is_empty() {
                return Err(at.error(
                    canonical,
                    format!("[journal.columns] `{canonical}` maps to an empty name"),
                ));
            }
            if own.chars().any(char::is_control) {
                return Err(at.error(
                    canonical,
                    format!("[journal.columns] `{canonical}` = {own:?} holds a control character"),
                ));
            }
        }
        // Table and column names go into repair scripts as quoted identifiers; a NUL would end
        // the statement early in SQLite's parser, so no control character is accepted.
        if let Some(table) = &journal.table
            && table.chars().any(char::is_control)
        {
            return Err(at.error(
                "table",
                format!("[journal] table = {table:?} holds a control character"),
            ));
        }
        let phases = phase_mapping(journal.phases.as_ref(), &at)?;

        let duration = |text: &Option<String>, table: &str| -> Result<Option<i64>> {
            match text {
                None => Ok(None),
                Some(text) => Ok(Some(crate::retention::KeyTtl::parse(text).map(|ttl| ttl.micros).ok_or_else(|| {
                    at.error(
                        "key_ttl",
                        format!(
                            "{table} key_ttl = {text:?} is neither a duration (24h, 7d, 90d, 6h30m) nor a provider preset ({})",
                            crate::retention::preset_names()
                        ),
                    )
                })?)),
            }
        };
        let key_ttl = duration(&provider.key_ttl, "[provider]")?;
        let key_ttl_source = provider
            .key_ttl
            .as_deref()
            .and_then(crate::retention::KeyTtl::parse)
            .map(|ttl| ttl.source);

        if raw.operation.is_empty() {
            return Err(Error::config(
                &shown,
                "no [[operation]]: name at least one dag_id/task_id whose tries cause a side effect",
            ));
        }
        let mut operations = Vec::with_capacity(raw.operation.len());
        for (index, op) in raw.operation.into_iter().enumerate() {
            let name = op
                .name
                .clone()
                .unwrap_or_else(|| format!("{}.{}", op.dag_id, op.task_id));
            if operations
                .iter()
                .any(|known: &Operation| known.name == name)
            {
                return Err(at.error(
                    "name",
                    format!(
                        "[[operation]] #{}: the name `{name}` is used twice",
                        index + 1
                    ),
                ));
            }
            for (field, value) in [("dag_id", &op.dag_id), ("task_id", &op.task_id)] {
                if value.trim().is_empty() {
                    return Err(at.error(
                        field,
                        format!("[[operation]] #{}: `{field}` is empty", index + 1),
                    ));
                }
            }
            let key = match &op.key {
                None => None,
                Some(template) => Some(KeyTemplate::parse(template).map_err(|message| {
                    at.error_at_value(
                        "key",
                        template,
                        format!("[[operation]] `{name}`: key template {template:?}: {message}"),
                    )
                })?),
            };
            let key = match (&op.timezone, key) {
                (None, key) => key,
                (Some(zone), None) => {
                    return Err(at.error_at_value(
                        "timezone",
                        zone,
                        format!(
                            "[[operation]] `{name}`: `timezone` formats the key template's times: it needs `key`"
                        ),
                    ));
                }
                (Some(zone), Some(key)) => Some(key.in_zone(
                    crate::keys::Zone::iana(zone.trim()).map_err(|message| {
                        at.error_at_value(
                            "timezone",
                            zone,
                            format!("[[operation]] `{name}`: timezone: {message}"),
                        )
                    })?,
                )),
            };
            let key_ttl = duration(&op.key_ttl, "[[operation]]")?;
            operations.push(Operation {
                name,
                dag_id: op.dag_id,
                task_id: op.task_id,
                key,
                key_ttl,
            });
        }

        let airflow = airflow::settings(table::Table::new("airflow", airflow, file)?, base)?;
        let attempts = airflow.source;

        if journal.busy_timeout.is_some() && journal.url.is_none() {
            return Err(at.error(
                "busy_timeout",
                "[journal] `busy_timeout` applies to a database: it needs `url`".into(),
            ));
        }
        let journal_source = match (journal.snapshot, &journal.url, &journal.table) {
            (Some(snapshot), None, None) => Source::Snapshot(base.join(snapshot)),
            (None, Some(url), Some(_)) => {
                let password = match &journal.password_env {
                    None => None,
                    Some(name) => Some(std::env::var(name).map_err(|_| {
                        at.error(
                            "password_env",
                            format!("[journal] password_env names {name}, which is not set"),
                        )
                    })?),
                };
                let database = Database::parse(url, base, password)
                    .map_err(|message| at.error("url", format!("[journal] url: {message}")))?;
                let wait = busy_timeout(&journal.busy_timeout)
                    .map_err(|message| at.error("busy_timeout", format!("[journal] {message}")))?;
                Source::Database(database.with_busy_timeout(wait))
            }
            (None, Some(_), None) => {
                return Err(at.error(
                    "url",
                    "[journal] url needs `table`, the journal table's name".into(),
                ));
            }
            _ => {
                return Err(Error::config(
                    &shown,
                    "[journal] needs exactly one of `snapshot` (a file) or `url` with `table` (a database)",
                ));
            }
        };

        Ok(Config {
            path: path.to_path_buf(),
            attempts,
            heartbeat_timeout: airflow.heartbeat_timeout,
            journal: JournalSettings {
                source: journal_source,
                table: journal.table,
                columns: journal.columns,
                phases,
            },
            provider: ProviderSettings {
                source: match (&provider.snapshot, &provider.url) {
                    (Some(snapshot), None) => {
                        provider::snapshot(&provider_table)?;
                        Source::Snapshot(base.join(snapshot))
                    }
                    (None, Some(url)) => provider::listing(url, provider_table)?,
                    _ => {
                        return Err(Error::config(
                            &shown,
                            "[provider] needs exactly one of `snapshot` (a file) or `url` (the provider's listing API)",
                        ));
                    }
                },
                key_ttl,
                key_ttl_source,
                void_statuses: provider.void_statuses,
                replay: provider.replay,
                file_check,
            },
            operations,
        })
    }

    /// Where each canonical table is read from.
    pub fn sources(&self) -> TableSources<'_> {
        TableSources {
            attempts: &self.attempts,
            journal: &self.journal,
            provider: &self.provider.source,
            provider_check: &self.provider.file_check,
        }
    }

    /// The operation a task belongs to: the first `[[operation]]` whose globs match.
    pub fn operation_for(&self, dag_id: &str, task_id: &str) -> Option<&Operation> {
        self.operations
            .iter()
            .find(|op| op.matches(dag_id, task_id))
    }
}

/// `busy_timeout` of `[airflow]` or `[journal]`: a duration above zero, if the config gives one.
/// The environment variables a config's text names (`[airflow]` `password_env` and
/// `token_env`, `[journal]` `password_env`, `[provider.auth]` `env`) that are not set, each
/// with its key, in the file's order of sections: for `doctor` to name them all where loading
/// stops at the first. `[provider.auth]` refuses an empty value too, so an empty one counts.
pub fn unset_environment(text: &str) -> Vec<(String, String)> {
    let Ok(file) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    let places: [(&[&str], &str, bool); 4] = [
        (&["airflow"], "password_env", false),
        (&["airflow"], "token_env", false),
        (&["journal"], "password_env", false),
        (&["provider", "auth"], "env", true),
    ];
    let mut unset = Vec::new();
    for (path, key, empty_counts) in places {
        let mut table = Some(&file);
        for name in path {
            table = table
                .and_then(|table| table.get(*name))
                .and_then(|value| value.as_table());
        }
        let Some(name) = table
            .and_then(|table| table.get(key))
            .and_then(|value| value.as_str())
        else {
            continue;
        };
        let missing = match std::env::var(name) {
            Ok(value) => empty_counts && value.is_empty(),
            Err(_) => true,
        };
        if missing {
            unset.push((format!("[{}] {key}", path.join(".")), name.to_string()));
        }
    }
    unset
}

fn busy_timeout(text: &Option<String>) -> std::result::Result<Option<Duration>, String> {
    duration_above_zero("busy_timeout", text, "\"30s\" or \"500ms\"")
}

/// A duration setting `key` of the config: above zero, if the config gives one; the message
/// of one that is not names the key and `examples`.
fn duration_above_zero(
    key: &str,
    text: &Option<String>,
    examples: &str,
) -> std::result::Result<Option<Duration>, String> {
    match text {
        None => Ok(None),
        Some(text) => crate::timestamp::parse_wait(text)
            .filter(|wait| !wait.is_zero())
            .map(Some)
            .ok_or_else(|| format!("{key} = {text:?}: give a duration such as {examples}")),
    }
}

/// Builds "own value -> canonical phase"; without `[journal.phases]` the canonical names map
/// to themselves.
fn phase_mapping(
    phases: Option<&BTreeMap<String, Vec<String>>>,
    at: &Locator<'_>,
) -> Result<BTreeMap<String, String>> {
    let mut mapping = BTreeMap::new();
    let Some(phases) = phases else {
        for phase in PHASES {
            mapping.insert(phase.to_string(), phase.to_string());
        }
        return Ok(mapping);
    };
    for (canonical, values) in phases {
        if !PHASES.contains(&canonical.as_str()) {
            return Err(at.error(
                canonical,
                format!(
                    "[journal.phases] names `{canonical}`, which is not a phase (known: {})",
                    PHASES.join(", ")
                ),
            ));
        }
        for value in values {
            if let Some(previous) = mapping.insert(value.clone(), canonical.clone()) {
                return Err(at.error(
                    canonical,
                    format!(
                        "[journal.phases] maps {value:?} to both `{previous}` and `{canonical}`"
                    ),
                ));
            }
        }
    }
    for required in ["intent", "committed"] {
        if !mapping.values().any(|phase| phase == required) {
            return Err(at.error(
                "phases",
                format!("[journal.phases] gives no value for `{required}`; the rules need it"),
            ));
        }
    }
    Ok(mapping)
}

/// Names the line a key is set on, for checks that run after parsing.
struct Locator<'a> {
    text: &'a str,
    path: &'a str,
}

impl Locator<'_> {
    /// Like `error`, on the line that sets `key` to `value` (an `[[operation]]` key that many
    /// operations set), else the first line setting `key`.
    fn error_at_value(&self, key: &str, value: &str, message: String) -> Error {
        let quoted = toml::Value::String(value.to_string()).to_string();
        let line = self.text.lines().position(|line| {
            let line = line.trim_start();
            line.starts_with(key)
                && line[key.len()..].trim_start().starts_with('=')
                && (line.contains(&quoted) || line.contains(&format!("'{value}'")))
        });
        match line {
            Some(index) => Error::config(self.path, format!("line {}: {message}", index + 1)),
            None => self.error(key, message),
        }
    }

    fn error(&self, key: &str, message: String) -> Error {
        let line = self.text.lines().position(|line| {
            let line = line.trim_start();
            line.starts_with(key) && line[key.len()..].trim_start().starts_with('=')
                || line.starts_with(&format!("\"{key}\""))
                || line.starts_with(&format!("[journal.{key}]"))
        });
        match line {
            Some(index) => Error::config(self.path, format!("line {}: {message}", index + 1)),
            None => Error::config(self.path, message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
[airflow]
snapshot = "attempts.csv"
[journal]
snapshot = "journal.csv"
[provider]
snapshot = "provider.csv"
key_ttl = "24h"
[[operation]]
dag_id = "orders_*"
task_id = "export"
key = "orders:{interval_start:%Y-%m-%d}"
"#;

    fn parse(text: &str) -> Result<Config> {
        Config::parse(text, Path::new("/etc/onceonly/onceonly.toml"))
    }

    #[test]
    fn minimal_config_resolves_paths_next_to_the_file() {
        let config = parse(MINIMAL).unwrap();
        assert_eq!(
            config.attempts,
            Source::Snapshot("/etc/onceonly/attempts.csv".into())
        );
        assert_eq!(config.provider.key_ttl, Some(86_400_000_000));
        assert_eq!(config.operations[0].name, "orders_*.export");
        assert_eq!(
            config.journal.phases.get("committed").map(String::as_str),
            Some("committed")
        );
    }

    #[test]
    fn unknown_field_names_field_and_line() {
        let text = MINIMAL.replace("key_ttl = \"24h\"", "key_ttl = \"24h\"\nkey_tll = \"1d\"");
        let message = parse(&text).unwrap_err().to_string();
        assert!(message.contains("onceonly.toml"), "{message}");
        assert!(message.contains("line 9"), "{message}");
        assert!(message.contains("key_tll"), "{message}");
    }

    #[test]
    fn bad_duration_names_key_and_line() {
        let message = parse(&MINIMAL.replace("24h", "a day"))
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("line 8") && message.contains("key_ttl"),
            "{message}"
        );
    }

    #[test]
    fn bad_template_is_refused() {
        let message = parse(&MINIMAL.replace("{interval_start:%Y-%m-%d}", "{nope}"))
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("line 12") && message.contains("nope"),
            "{message}"
        );
    }

    #[test]
    fn phase_mapping_needs_intent_and_committed() {
        let text = format!("{MINIMAL}\n[journal.phases]\nintent = [\"STARTED\"]\n");
        let text = text.replace("[journal]\nsnapshot = \"journal.csv\"\n", "");
        let text = text.replace(
            "[journal.phases]",
            "[journal]\nsnapshot = \"journal.csv\"\n[journal.phases]",
        );
        let message = parse(&text).unwrap_err().to_string();
        assert!(message.contains("committed"), "{message}");
    }
}
