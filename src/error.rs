//! Typed errors, so the binary can tell bad input (exit 2, the thing named) from findings.

use std::fmt;

/// Where a bad value was found: a file or URL, then as much as is known of the place in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    /// The file, URL or source name.
    pub source: String,
    /// 1-based row or line, as the user would count it in that file.
    pub row: Option<usize>,
    pub column: Option<String>,
}

impl Location {
    pub fn source(source: impl Into<String>) -> Self {
        Location {
            source: source.into(),
            ..Location::default()
        }
    }

    pub fn row(mut self, row: usize) -> Self {
        self.row = Some(row);
        self
    }

    pub fn column(mut self, column: impl Into<String>) -> Self {
        self.column = Some(column.into());
        self
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        if let Some(row) = self.row {
            write!(f, ", row {row}")?;
        }
        if let Some(column) = &self.column {
            write!(f, ", column `{column}`")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration file is wrong; the message names the key and line.
    #[error("{path}: {message}")]
    Config { path: String, message: String },

    /// A source gave data that cannot be read as its canonical table.
    #[error("{location}: {message}")]
    Input { location: Location, message: String },

    /// A source could not be read completely; findings over it would be partial.
    #[error("incomplete input: {source_name} was only partly read: {reason}")]
    Incomplete { source_name: String, reason: String },

    /// A command-line flag has a value that cannot be used.
    #[error("{flag}: {message}")]
    Usage { flag: String, message: String },

    /// Polars failed on data that passed validation: a bug, reported as such.
    #[error("internal error while {doing}: {message}")]
    Engine { doing: String, message: String },

    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn input(location: Location, message: impl Into<String>) -> Self {
        Error::Input {
            location,
            message: message.into(),
        }
    }

    pub fn config(path: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Config {
            path: path.into(),
            message: message.into(),
        }
    }

    pub fn usage(flag: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Usage {
            flag: flag.into(),
            message: message.into(),
        }
    }

    pub fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// Lets polars calls use `?` where a failure can only be a bug in onceonly's own plans.
pub trait EngineContext<T> {
    fn engine(self, doing: &str) -> Result<T>;
}

impl<T> EngineContext<T> for polars::prelude::PolarsResult<T> {
    fn engine(self, doing: &str) -> Result<T> {
        self.map_err(|err| Error::Engine {
            doing: doing.to_string(),
            message: err.to_string(),
        })
    }
}
