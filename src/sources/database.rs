//! Database URLs as users write them, including Airflow's own
//! `AIRFLOW__DATABASE__SQL_ALCHEMY_CONN` form, turned into sqlx URLs; and how a database is
//! named in messages: never with its password.

use std::path::Path;

use sqlx::any::AnyConnectOptions;
use sqlx::{AnyConnection, ConnectOptions};

use crate::error::{Error, Location};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
    Mysql,
}

impl Dialect {
    /// The activity window as bind values: text in the form Airflow stores on SQLite, RFC 3339
    /// elsewhere. Open bounds become the earliest and latest representable times.
    pub fn window_bounds(self, since: Option<i64>, until: Option<i64>) -> (String, String) {
        let format = |micros: i64| match self {
            Dialect::Sqlite => chrono::DateTime::from_timestamp_micros(micros)
                .map(|dt| dt.format("%Y-%m-%d %H:%M:%S%.6f").to_string())
                .unwrap_or_default(),
            _ => crate::timestamp::format(micros),
        };
        let since = since.map(format).unwrap_or_else(|| match self {
            Dialect::Sqlite => "0000-01-01".to_string(),
            _ => "0001-01-01T00:00:00Z".to_string(),
        });
        let until = until.map(format).unwrap_or_else(|| match self {
            Dialect::Sqlite => "9999-12-31 23:59:59.999999".to_string(),
            _ => "9999-12-31T23:59:59Z".to_string(),
        });
        (since, until)
    }
}

/// A database to read: the URL with its secret, and the name to show.
#[derive(Clone, PartialEq, Eq)]
pub struct Database {
    pub url: String,
    pub shown: String,
    pub dialect: Dialect,
    secret: Option<String>,
    /// The file of an SQLite database, which large reads open directly (`sqlite_rows`).
    pub sqlite_path: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("url", &self.shown)
            .field("dialect", &self.dialect)
            .finish()
    }
}

impl Database {
    /// Parses `sqlite:///relative.db`, `sqlite:////absolute.db`, `postgresql+psycopg2://…`,
    /// `postgres://…`, `mysql+mysqldb://…`; relative SQLite paths are taken from `base`.
    /// `password` (from the environment) replaces any password in the URL.
    pub fn parse(url: &str, base: &Path, password: Option<String>) -> Result<Database, String> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or("a database URL looks like sqlite:///airflow.db or postgresql://user@host/db")?;
        let driver = scheme
            .split('+')
            .next()
            .unwrap_or(scheme)
            .to_ascii_lowercase();
        match driver.as_str() {
            "sqlite" => {
                let path = rest.strip_prefix('/').unwrap_or(rest);
                let (path, _query) = path.split_once('?').unwrap_or((path, ""));
                if path.is_empty() {
                    return Err(
                        "an SQLite URL needs a file path (sqlite:////abs/airflow.db)".into(),
                    );
                }
                let path = base.join(path);
                let shown = format!("sqlite://{}", path.display());
                // Read-only by construction: SQLite refuses any write on this connection.
                let url = format!("sqlite://{}?mode=ro", path.display());
                Ok(Database {
                    url,
                    shown,
                    dialect: Dialect::Sqlite,
                    secret: None,
                    sqlite_path: Some(path),
                })
            }
            "postgresql" | "postgres" | "mysql" | "mariadb" => {
                let dialect = if driver.starts_with("postgres") {
                    Dialect::Postgres
                } else {
                    Dialect::Mysql
                };
                let canonical = if dialect == Dialect::Postgres {
                    "postgres"
                } else {
                    "mysql"
                };
                let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
                let (userinfo, host) = match authority.rsplit_once('@') {
                    Some((userinfo, host)) => (Some(userinfo), host),
                    None => (None, authority),
                };
                let (user, url_password) = match userinfo {
                    Some(userinfo) => match userinfo.split_once(':') {
                        Some((user, password)) => {
                            (Some(user.to_string()), Some(password.to_string()))
                        }
                        None => (Some(userinfo.to_string()), None),
                    },
                    None => (None, None),
                };
                let secret = password.map(|p| percent_encode(&p)).or(url_password);
                let credentials = match (&user, &secret) {
                    (Some(user), Some(secret)) => format!("{user}:{secret}@"),
                    (Some(user), None) => format!("{user}@"),
                    (None, _) => String::new(),
                };
                let shown_credentials = match (&user, &secret) {
                    (Some(user), Some(_)) => format!("{user}:***@"),
                    (Some(user), None) => format!("{user}@"),
                    (None, _) => String::new(),
                };
                Ok(Database {
                    url: format!("{canonical}://{credentials}{host}/{path}"),
                    shown: format!(
                        "{canonical}://{shown_credentials}{host}/{}",
                        path.split('?').next().unwrap_or("")
                    ),
                    dialect,
                    secret: secret.filter(|s| !s.is_empty()),
                    sqlite_path: None,
                })
            }
            other => Err(format!(
                "unsupported database `{other}` (use sqlite, postgresql or mysql)"
            )),
        }
    }

    /// Removes the password from a driver's message, in case the driver quoted the URL.
    pub fn scrub(&self, message: &str) -> String {
        match &self.secret {
            Some(secret) => message
                .replace(secret.as_str(), "***")
                .replace(&self.url, &self.shown),
            None => message.to_string(),
        }
    }

    /// Opens a read-only connection: SQLite by `mode=ro` in the URL, PostgreSQL and MySQL by
    /// making every transaction of the session read-only. Times are read in UTC.
    pub async fn connect(&self) -> Result<AnyConnection, Error> {
        sqlx::any::install_default_drivers();
        let options: AnyConnectOptions = self.url.parse().map_err(|err: sqlx::Error| {
            Error::input(Location::source(&self.shown), self.scrub(&err.to_string()))
        })?;
        let mut connection = options.connect().await.map_err(|err| {
            Error::input(
                Location::source(&self.shown),
                format!("cannot connect: {}", self.scrub(&err.to_string())),
            )
        })?;
        let session: &[&str] = match self.dialect {
            Dialect::Sqlite => &[],
            Dialect::Postgres => &[
                "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
                "SET TIME ZONE 'UTC'",
            ],
            Dialect::Mysql => &[
                "SET SESSION TRANSACTION READ ONLY",
                "SET time_zone = '+00:00'",
            ],
        };
        for statement in session {
            sqlx::query(*statement)
                .execute(&mut connection)
                .await
                .map_err(|err| self.error(&err))?;
        }
        Ok(connection)
    }

    pub fn error(&self, err: &sqlx::Error) -> Error {
        Error::input(Location::source(&self.shown), self.scrub(&err.to_string()))
    }
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn airflow_sqlalchemy_forms_are_translated() {
        let base = Path::new("/etc/onceonly");
        let pg = Database::parse(
            "postgresql+psycopg2://airflow:s3cr3t@127.0.0.1:5432/airflow",
            base,
            None,
        )
        .unwrap();
        assert_eq!(pg.url, "postgres://airflow:s3cr3t@127.0.0.1:5432/airflow");
        assert_eq!(pg.shown, "postgres://airflow:***@127.0.0.1:5432/airflow");
        assert!(!format!("{pg:?}").contains("s3cr3t"));
        assert_eq!(
            pg.scrub("password s3cr3t rejected"),
            "password *** rejected"
        );

        let abs = Database::parse("sqlite:////opt/airflow/airflow.db", base, None).unwrap();
        assert_eq!(abs.url, "sqlite:///opt/airflow/airflow.db?mode=ro");
        let rel = Database::parse("sqlite:///airflow.db", base, None).unwrap();
        assert_eq!(rel.url, "sqlite:///etc/onceonly/airflow.db?mode=ro");

        let env = Database::parse(
            "postgresql://airflow@db/airflow",
            base,
            Some("p@ss:w/rd".into()),
        )
        .unwrap();
        assert_eq!(env.url, "postgres://airflow:p%40ss%3Aw%2Frd@db/airflow");
        assert!(Database::parse("oracle://x/y", base, None).is_err());
    }
}
