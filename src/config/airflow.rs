//! `[airflow]`: where Airflow's task tries are read — a snapshot file, the metadata database,
//! or the REST API, whose own keys ([`RawApi`], [`RawRetry`]) need `api`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::Source;
use super::provider::RawRetry;
use super::table::{Table, keys_of};
use crate::error::Result;
use crate::sources::airflow_api::{AirflowApi, ApiVersion, DEFAULT_RETRY};
use crate::sources::database::Database;

/// The keys every `[airflow]` source has.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAirflow {
    snapshot: Option<PathBuf>,
    /// A database URL, sqlx's or Airflow's `sql_alchemy_conn` form.
    url: Option<String>,
    /// The environment variable holding the database or API password (kept out of the file).
    password_env: Option<String>,
    /// With `url`: how long a read waits for a lock another process holds (`30s`, `500ms`).
    busy_timeout: Option<String>,
    /// The Airflow REST API's base URL (`http://host:8080`), instead of the database.
    api: Option<String>,
    /// How old a running try's last heartbeat may be before it is named probably dead
    /// (`300s`, Airflow's own default for `[scheduler] task_instance_heartbeat_timeout`, 2.x's
    /// `scheduler_zombie_task_threshold`): set it to the scheduler's value.
    heartbeat_timeout: Option<String>,
}

/// Airflow's default `[scheduler] task_instance_heartbeat_timeout`.
pub const DEFAULT_HEARTBEAT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Where the tries are read, and how old a running try's heartbeat may be.
pub(super) struct AirflowSettings {
    pub source: Source,
    pub heartbeat_timeout: std::time::Duration,
}

/// The REST API's own keys.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApi {
    /// `v1` (Airflow 2) or `v2` (Airflow 3); detected from `/api/v*/version` when absent.
    api_version: Option<String>,
    /// The API user (basic auth on v1, `POST /auth/token` on v2).
    username: Option<String>,
    /// The environment variable holding a JWT for `/api/v2`, instead of a password.
    token_env: Option<String>,
    /// Entries per API page (`limit`), at most 100.
    page_size: Option<u32>,
}

pub(super) fn settings(mut table: Table<'_>, base: &Path) -> Result<AirflowSettings> {
    let raw: RawAirflow = table.take()?;
    let heartbeat_timeout = super::duration_above_zero(
        "heartbeat_timeout",
        &raw.heartbeat_timeout,
        "\"300s\" or \"5m\"",
    )
    .map_err(|message| table.error("heartbeat_timeout", message))?
    .unwrap_or(DEFAULT_HEARTBEAT_TIMEOUT);
    let source = source(raw, table, base)?;
    Ok(AirflowSettings {
        source,
        heartbeat_timeout,
    })
}

fn source(raw: RawAirflow, mut table: Table<'_>, base: &Path) -> Result<Source> {
    let api = match &raw.api {
        None => None,
        Some(api) => Some((api, table.take::<RawApi>()?, table.take::<RawRetry>()?)),
    };
    if let Some(key) = table.leftover() {
        let of_api = keys_of::<RawApi>().contains(&key) || keys_of::<RawRetry>().contains(&key);
        return Err(if of_api && raw.api.is_none() {
            table.error(
                key,
                format!("`{key}` applies to the REST API: it needs `api`"),
            )
        } else {
            let known = [
                keys_of::<RawAirflow>(),
                keys_of::<RawApi>(),
                keys_of::<RawRetry>(),
            ];
            table.error(
                key,
                format!("unknown key `{key}` (known: {})", known.concat().join(", ")),
            )
        });
    }
    if raw.busy_timeout.is_some() && raw.url.is_none() {
        return Err(table.error(
            "busy_timeout",
            "`busy_timeout` applies to a database: it needs `url`",
        ));
    }
    let env = |key: &str, name: &Option<String>| -> Result<Option<String>> {
        match name {
            None => Ok(None),
            Some(name) => std::env::var(name)
                .map(Some)
                .map_err(|_| table.error(key, format!("{key} names {name}, which is not set"))),
        }
    };
    Ok(match (&raw.snapshot, &raw.url, api) {
        (Some(snapshot), None, None) => Source::Snapshot(base.join(snapshot)),
        (None, Some(url), None) => {
            let password = env("password_env", &raw.password_env)?;
            let wait = super::busy_timeout(&raw.busy_timeout)
                .map_err(|message| table.error("busy_timeout", message))?;
            Source::Database(
                Database::parse(url, base, password)
                    .map_err(|message| table.error("url", format!("url: {message}")))?
                    .with_busy_timeout(wait),
            )
        }
        (None, None, Some((url, keys, retry))) => {
            let version = match &keys.api_version {
                None => None,
                Some(text) => Some(ApiVersion::parse(text).ok_or_else(|| {
                    table.error(
                        "api_version",
                        format!(
                            "api_version = {text:?}: use \"v1\" (Airflow 2) or \"v2\" (Airflow 3)"
                        ),
                    )
                })?),
            };
            let password = env("password_env", &raw.password_env)?;
            let token = env("token_env", &keys.token_env)?;
            let retry = retry.policy(DEFAULT_RETRY, &table)?;
            Source::Api(
                AirflowApi::new(url, version, keys.username, password, token, keys.page_size)
                    .map_err(|message| table.error("api", format!("api: {message}")))?
                    .with_retry(retry),
            )
        }
        _ => {
            return Err(table.error(
                "",
                "needs exactly one of `snapshot` (a file), `url` (the metadata database) or `api` (the REST API)",
            ));
        }
    })
}
