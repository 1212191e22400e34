//! Partitioned audits: one audit's inputs split into N snapshots that audit apart (as mapped
//! Airflow tasks, say), and a merge of their results into the report the one audit gives.
//!
//! Every rule compares rows of one DAG, or of DAGs that share a key or an object. So DAGs are
//! put together in groups: DAGs whose journal rows share an `op_key` or an `external_id`, DAGs
//! that claim one provider object (by its key or id in their journal rows, else by a key
//! template, `prepare::claims`), and all DAGs of operations whose key templates do not name the
//! DAG (their keys can collide: K003). A group goes to the partition its first `dag_id` (in
//! byte order) hashes to: the first 8 bytes of the SHA-256 of the `dag_id`'s UTF-8 bytes, read
//! as a big-endian unsigned integer, modulo N. That depends on nothing but the name.
//!
//! Provider objects go with the group that claims them. Objects no DAG claims are every
//! partition's (they may be any interval's object, SPEC §7), and L003's of the whole audit: the
//! merge counts them once.

pub mod merge;

use std::collections::HashMap;
use std::path::Path;

use polars::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::{Config, glob_match};
use crate::error::{EngineContext, Error, Location, Result};
use crate::keys::Part;
use crate::model::Table;
use crate::prepare::ProviderWindow;
use crate::prepare::{Claim, Claimants};
use crate::sources::Tables;

/// What a partition's snapshot folder records besides the snapshot: which split it is part of.
pub const PART_FILE: &str = "partition.json";
pub const FORMAT_VERSION: u32 = 1;

/// The partition a group of DAGs goes to, named by its first `dag_id`.
pub fn partition_of(dag_id: &str, partitions: usize) -> usize {
    let digest = Sha256::digest(dag_id.as_bytes());
    let first = u64::from_be_bytes(digest[..8].try_into().expect("a SHA-256 has 32 bytes"));
    (first % partitions as u64) as usize
}

/// One split as each of its parts records it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SplitInfo {
    /// What tells parts of this split from parts of another: a hash of the inputs'
    /// fingerprint, the partition count and the window.
    pub split_id: String,
    pub partitions: usize,
    /// The activity window every partition audits, RFC 3339.
    pub since: Option<String>,
    pub until: Option<String>,
    /// The margin around the tries, microseconds, as the split used it.
    pub slack: Option<i64>,
    /// The provider window of the whole audit, RFC 3339 (None: open).
    pub provider_from: Option<String>,
    pub provider_to: Option<String>,
    /// The content hash of the whole audit's tables (a plan quotes it).
    pub inputs_fingerprint: String,
    /// Rows read, per table, in table order (attempts, journal, provider).
    pub rows: [usize; 3],
    /// Provider objects no DAG claims that the audit's window keeps: in every partition.
    pub shared_objects: usize,
}

/// `partition.json` of a part's folder.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PartManifest {
    pub format_version: u32,
    pub part: usize,
    pub split: SplitInfo,
}

impl PartManifest {
    pub fn load(dir: &Path) -> Result<PartManifest> {
        let path = dir.join(PART_FILE);
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|err| Error::io(&shown, err))?;
        let manifest: PartManifest = serde_json::from_str(&text).map_err(|err| {
            Error::input(
                Location::source(&shown),
                format!("not a partition manifest (`onceonly split` writes one): {err}"),
            )
        })?;
        if manifest.format_version != FORMAT_VERSION {
            return Err(Error::input(
                Location::source(&shown),
                format!(
                    "partition format {} is not one this onceonly reads ({FORMAT_VERSION})",
                    manifest.format_version
                ),
            ));
        }
        Ok(manifest)
    }

    pub fn provider_window(&self) -> ProviderWindow {
        let at = |text: &Option<String>| text.as_deref().and_then(crate::timestamp::parse);
        ProviderWindow {
            from: at(&self.split.provider_from),
            to: at(&self.split.provider_to),
        }
    }
}

/// Groups of DAGs that must audit together, as a union-find over DAG numbers.
struct Groups {
    names: Vec<String>,
    numbers: HashMap<String, usize>,
    parent: Vec<usize>,
}

impl Groups {
    fn new() -> Groups {
        Groups {
            names: Vec::new(),
            numbers: HashMap::new(),
            parent: Vec::new(),
        }
    }

    fn number(&mut self, dag: &str) -> usize {
        if let Some(&number) = self.numbers.get(dag) {
            return number;
        }
        let number = self.names.len();
        self.names.push(dag.to_string());
        self.numbers.insert(dag.to_string(), number);
        self.parent.push(number);
        number
    }

    fn root(&mut self, mut number: usize) -> usize {
        while self.parent[number] != number {
            self.parent[number] = self.parent[self.parent[number]];
            number = self.parent[number];
        }
        number
    }

    fn join(&mut self, a: usize, b: usize) {
        let (a, b) = (self.root(a), self.root(b));
        if a != b {
            self.parent[a.max(b)] = a.min(b);
        }
    }

    /// Each DAG's partition: that of its group's first name.
    fn partitions(&mut self, partitions: usize) -> Vec<usize> {
        let mut first: HashMap<usize, usize> = HashMap::new();
        for number in 0..self.names.len() {
            let root = self.root(number);
            let known = first.entry(root).or_insert(number);
            if self.names[number] < self.names[*known] {
                *known = number;
            }
        }
        let mut of_group: HashMap<usize, usize> = HashMap::new();
        (0..self.names.len())
            .map(|number| {
                let root = self.root(number);
                *of_group
                    .entry(root)
                    .or_insert_with(|| partition_of(&self.names[first[&root]], partitions))
            })
            .collect()
    }
}

/// Where each row of the tables goes.
pub struct Assignment {
    /// Per attempts row, per journal row: the partition.
    pub attempts: Vec<usize>,
    pub journal: Vec<usize>,
    /// Per provider row: the partition, None for an object no DAG claims (every partition's).
    pub provider: Vec<Option<usize>>,
}

/// Groups the DAGs of `tables` and says which partition each row goes to.
pub fn assign(config: &Config, tables: &Tables, partitions: usize) -> Result<Assignment> {
    let mut groups = Groups::new();
    let attempt_dags = crate::cells::text_column(&tables.attempts, "dag_id")?;
    let attempts: Vec<usize> = attempt_dags
        .iter()
        .map(|dag| groups.number(dag.unwrap_or_default()))
        .collect();
    let journal_dags = crate::cells::text_column(&tables.journal, "dag_id")?;
    let journal: Vec<usize> = journal_dags
        .iter()
        .map(|dag| groups.number(dag.unwrap_or_default()))
        .collect();
    // DAGs whose journal rows share a key or an object.
    let mut dag_of_key: HashMap<&str, usize> = HashMap::new();
    let mut dag_of_id: HashMap<&str, usize> = HashMap::new();
    let keys = crate::cells::text_column(&tables.journal, "op_key")?;
    let ids = crate::cells::text_column(&tables.journal, "external_id")?;
    for ((&dag, key), id) in journal.iter().zip(keys.iter()).zip(ids.iter()) {
        for (value, seen) in [(key, &mut dag_of_key), (id, &mut dag_of_id)] {
            if let Some(value) = value {
                let first = *seen.entry(value).or_insert(dag);
                groups.join(first, dag);
            }
        }
    }
    // Operations whose key templates do not name the DAG: their DAGs' keys may collide.
    let known: Vec<String> = groups.names.clone();
    let mut unnamed: Option<usize> = None;
    for operation in &config.operations {
        let Some(template) = &operation.key else {
            continue;
        };
        if template
            .parts
            .iter()
            .any(|part| matches!(part, Part::Field("dag_id")))
        {
            continue;
        }
        for dag in known
            .iter()
            .filter(|dag| glob_match(&operation.dag_id, dag))
        {
            let number = groups.numbers[dag.as_str()];
            let first = *unnamed.get_or_insert(number);
            groups.join(first, number);
        }
    }
    // Provider objects: claimed by the journal rows that name them, else by key templates.
    let claimants = Claimants::new(config);
    let object_keys = crate::cells::text_column(&tables.provider, "op_key")?;
    let object_ids = crate::cells::text_column(&tables.provider, "external_id")?;
    let mut claimed_by: Vec<Option<usize>> = Vec::with_capacity(tables.provider.height());
    for (key, id) in object_keys.iter().zip(object_ids.iter()) {
        let mut claimers: Vec<usize> = [
            key.and_then(|key| dag_of_key.get(key)),
            id.and_then(|id| dag_of_id.get(id)),
        ]
        .into_iter()
        .flatten()
        .copied()
        .collect();
        if claimers.is_empty()
            && let Some(key) = key
        {
            for claim in claimants.of(key) {
                match claim {
                    Claim::Dag(dag) => claimers.push(groups.number(&dag)),
                    Claim::Operation(name) => {
                        let pattern = config
                            .operations
                            .iter()
                            .find(|operation| operation.name == name)
                            .map(|operation| operation.dag_id.as_str())
                            .unwrap_or_default();
                        claimers.extend(
                            known
                                .iter()
                                .filter(|dag| glob_match(pattern, dag))
                                .map(|dag| groups.numbers[dag.as_str()]),
                        );
                    }
                }
            }
        }
        for pair in claimers.windows(2) {
            groups.join(pair[0], pair[1]);
        }
        claimed_by.push(claimers.first().copied());
    }
    let partition = groups.partitions(partitions);
    Ok(Assignment {
        attempts: attempts.iter().map(|&dag| partition[dag]).collect(),
        journal: journal.iter().map(|&dag| partition[dag]).collect(),
        provider: claimed_by
            .iter()
            .map(|dag| dag.map(|dag| partition[dag]))
            .collect(),
    })
}

/// The rows of `frame` whose partition is `part` (or None, when `shared` keeps those).
fn rows_of<T: Copy>(
    frame: &DataFrame,
    assigned: &[T],
    keep: impl Fn(T) -> bool,
) -> Result<DataFrame> {
    let mask: BooleanChunked = assigned.iter().map(|&at| Some(keep(at))).collect();
    frame.filter(&mask).engine("splitting a table")
}

/// The tables of partition `part`.
pub fn part_tables(tables: &Tables, assignment: &Assignment, part: usize) -> Result<Tables> {
    Ok(Tables {
        attempts: rows_of(&tables.attempts, &assignment.attempts, |at| at == part)?,
        journal: rows_of(&tables.journal, &assignment.journal, |at| at == part)?,
        provider: rows_of(&tables.provider, &assignment.provider, |at| {
            at.is_none_or(|at| at == part)
        })?,
        warnings: tables.warnings.clone(),
        origins: tables.origins.clone(),
        listed_window: tables.listed_window,
        snapshot_hash: None,
        read_at: None,
    })
}

/// How many of the objects no DAG claims the provider window keeps (an audit with an activity
/// window reads the objects created in it, ends included).
pub fn shared_in_window(
    tables: &Tables,
    assignment: &Assignment,
    window: Option<ProviderWindow>,
) -> Result<usize> {
    let created = crate::cells::int_column(&tables.provider, "created_at")?;
    Ok(assignment
        .provider
        .iter()
        .zip(created.iter())
        .filter(|(at, _)| at.is_none())
        .filter(|(_, created)| match (window, created) {
            (None, _) => true,
            (Some(window), Some(created)) => {
                window.from.is_none_or(|from| *created >= from)
                    && window.to.is_none_or(|to| *created <= to)
            }
            (Some(_), None) => false,
        })
        .count())
}

/// The hash that names a split.
pub fn split_id(fingerprint: &str, partitions: usize, window: &[Option<String>]) -> String {
    let parts: Vec<String> = std::iter::once(fingerprint.to_string())
        .chain(std::iter::once(partitions.to_string()))
        .chain(window.iter().map(|part| part.clone().unwrap_or_default()))
        .collect();
    crate::identity::stable_id("split", parts.iter().map(String::as_str))
}

/// Rows per table, in table order.
pub fn rows(tables: &Tables) -> [usize; 3] {
    Table::ALL.map(|table| tables.get(table).height())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_partition_of_a_dag_depends_on_its_name_alone() {
        // Fixed values (SHA-256 as any other implementation computes it): a change of hash
        // would move DAGs between the parts of splits made by different versions.
        assert_eq!(partition_of("synth_000", 7), 6);
        assert_eq!(partition_of("synth_001", 7), 3);
        assert_eq!(partition_of("reports_eu", 7), 4);
        assert_eq!(partition_of("reports_eu", 2), 1);
        let spread: std::collections::BTreeSet<usize> = (0..40)
            .map(|n| partition_of(&format!("synth_{n:03}"), 7))
            .collect();
        assert_eq!(spread.len(), 7, "forty DAGs reach every one of seven parts");
        assert_eq!(partition_of("anything", 1), 0);
    }
}
