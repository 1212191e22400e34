//! Database URLs as users write them, including Airflow's own
//! `AIRFLOW__DATABASE__SQL_ALCHEMY_CONN` form, turned into sqlx URLs; how a database is named
//! in messages (never with its password); read-only sessions, and the errors of a read. How a
//! source reads a database in one transaction is [`read_transaction`](super::read_transaction).

use std::borrow::Cow;
use std::path::Path;
use std::time::Duration;

use sqlx::any::AnyConnectOptions;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{AnyConnection, AssertSqlSafe, ConnectOptions, Connection};

use crate::error::{Error, Location, Result};
use crate::timestamp;

/// How long a read waits for a database that another process holds locked, unless the config
/// says otherwise (`busy_timeout`): long enough to outlast Airflow's own short write
/// transactions, short enough that a stuck lock fails the nightly audit.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// The file of an SQLite database, which reads open directly (`sqlite_rows`).
    pub sqlite_path: Option<std::path::PathBuf>,
    /// How long a read waits for a lock another process holds: SQLite's busy timeout,
    /// PostgreSQL's `lock_timeout`, MySQL's `lock_wait_timeout`.
    pub busy_timeout: Duration,
}

impl Database {
    /// The database with its busy timeout set, where the config gives one.
    pub fn with_busy_timeout(mut self, wait: Option<Duration>) -> Database {
        if let Some(wait) = wait {
            self.busy_timeout = wait;
        }
        self
    }
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
                    busy_timeout: DEFAULT_BUSY_TIMEOUT,
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
                    busy_timeout: DEFAULT_BUSY_TIMEOUT,
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

    /// Whether `other` is this database: the same SQLite file, or the same server, database
    /// and user. Two sources in one database are read in one transaction (`sources::load`).
    pub fn same_database(&self, other: &Database) -> bool {
        match (&self.sqlite_path, &other.sqlite_path) {
            (Some(one), Some(two)) => {
                let canonical = |path: &Path| std::fs::canonicalize(path).ok();
                one == two || canonical(one).is_some_and(|one| Some(one) == canonical(two))
            }
            (None, None) => self.url == other.url,
            _ => false,
        }
    }

    /// Opens a read-only connection: SQLite by `mode=ro` in the URL, PostgreSQL and MySQL by
    /// making every transaction of the session read-only. Times are read in UTC; a statement
    /// waits at most `busy_timeout` for a lock.
    pub async fn connect(&self) -> Result<AnyConnection> {
        sqlx::any::install_default_drivers();
        self.open::<AnyConnectOptions>().await
    }

    /// [`connect`](Self::connect) to PostgreSQL through sqlx's own PostgreSQL driver, whose
    /// rows are read in the binary format: times arrive as microseconds, text is borrowed from
    /// the row, and the server formats nothing.
    pub async fn connect_postgres(&self) -> Result<PgConnection> {
        self.open::<PgConnectOptions>().await
    }

    async fn open<O>(&self) -> Result<O::Connection>
    where
        O: ConnectOptions + std::str::FromStr<Err = sqlx::Error>,
        O::Connection: Sized,
        for<'c> &'c mut O::Connection:
            sqlx::Executor<'c, Database = <O::Connection as Connection>::Database>,
    {
        let options: O = self.url.parse().map_err(|err| self.error(&err))?;
        let mut connection = options
            .connect()
            .await
            .map_err(|err| self.unreachable(&err))?;
        for statement in self.session() {
            sqlx::raw_sql(AssertSqlSafe(statement))
                .execute(&mut connection)
                .await
                .map_err(|err| self.error(&err))?;
        }
        Ok(connection)
    }

    fn unreachable(&self, err: &sqlx::Error) -> Error {
        Error::input(
            Location::source(&self.shown),
            format!("cannot connect: {}", self.scrub(&err.to_string())),
        )
    }

    /// The statements that make a session read-only, in UTC, with the lock wait bounded.
    fn session(&self) -> Vec<String> {
        let millis = self.busy_timeout.as_millis().max(1);
        match self.dialect {
            Dialect::Sqlite => vec![],
            Dialect::Postgres => vec![
                "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY".to_string(),
                "SET TIME ZONE 'UTC'".to_string(),
                format!("SET lock_timeout = {millis}"),
            ],
            Dialect::Mysql => vec![
                "SET SESSION TRANSACTION READ ONLY".to_string(),
                "SET time_zone = '+00:00'".to_string(),
                format!("SET SESSION lock_wait_timeout = {}", millis.div_ceil(1000)),
            ],
        }
    }

    pub fn error(&self, err: &sqlx::Error) -> Error {
        Error::input(Location::source(&self.shown), self.scrub(&err.to_string()))
    }

    /// The error of a read that waited `busy_timeout` for another process's lock: nothing of
    /// the source was used.
    pub fn locked(&self, what: &str) -> Error {
        Error::input(
            Location::source(&self.shown),
            format!(
                "locked: another process held the database past the busy timeout of {} while reading {what}; nothing was read (raise `busy_timeout` in the config to wait longer)",
                timestamp::format_setting(self.busy_timeout)
            ),
        )
    }

    /// A driver's error while reading `what`, as exit-2 input naming the database.
    pub(super) fn read_error(&self, what: &str, err: &sqlx::Error) -> Error {
        let code = match err {
            sqlx::Error::Database(database) => database.code().map(Cow::into_owned),
            _ => None,
        };
        match (self.dialect, code.as_deref()) {
            // lock_not_available (lock_timeout); ER_LOCK_WAIT_TIMEOUT.
            (Dialect::Postgres, Some("55P03")) | (Dialect::Mysql, Some("HY000"))
                if err.to_string().contains("lock") =>
            {
                self.locked(what)
            }
            _ => Error::input(
                Location::source(&self.shown),
                format!("cannot read {what}: {}", self.scrub(&err.to_string())),
            ),
        }
    }
}

/// A bind value of a query: text or an integer.
#[derive(Debug, Clone, Copy)]
pub enum Param<'a> {
    Text(&'a str),
    Int(i64),
}

/// `text` with every byte but RFC 3986's unreserved characters percent-encoded: safe in a URL's
/// user, password or path segment.
pub(crate) fn percent_encode(text: &str) -> String {
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

    #[test]
    fn one_database_is_recognised_however_it_is_written() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        std::fs::write(dir.path().join("airflow.db"), b"").unwrap();
        let parse = |url: &str, base: &Path| Database::parse(url, base, None).unwrap();
        let direct = parse("sqlite:///airflow.db", dir.path());
        let around = parse("sqlite:///../airflow.db", &dir.path().join("etc"));
        let other = parse("sqlite:///journal.db", dir.path());
        assert!(direct.same_database(&around));
        assert!(!direct.same_database(&other));

        let base = Path::new("/");
        let postgres = parse("postgresql+psycopg2://airflow@db/airflow", base);
        assert!(postgres.same_database(&parse("postgres://airflow@db/airflow", base)));
        assert!(!postgres.same_database(&parse("postgres://journal@db/airflow", base)));
        assert!(!postgres.same_database(&direct));
    }
}
