//! Which DAG a provider object belongs to when nothing the audit read ties it to one
//! (SPEC §7): a `--dag` audit reports nothing that belongs elsewhere.
//!
//! An object is claimed by the journal rows that name it or its key (`prepare` attributes
//! objects of audited rows and leaves the others out), and by the key templates that could have
//! produced its key: a template is matched against the key, `{dag_id}` capturing the DAG. What
//! no DAG claims is reported by unscoped audits only.

use polars::prelude::*;

use crate::config::{Config, glob_match};
use crate::error::{EngineContext, Result};
use crate::keys::{KeyTemplate, Part};

use super::Prepared;

/// What a scoped audit left out of the provider's objects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LeftOut {
    /// Objects another DAG's journal rows or key template claim (or journal rows of runs
    /// outside the audit).
    pub claimed_elsewhere: usize,
    /// Objects no DAG claims: an audit without `--dag` reports them.
    pub unclaimed: usize,
    /// Objects whose own interval fields put them outside `--interval-from/--interval-to`.
    #[serde(skip_serializing_if = "is_zero")]
    pub other_intervals: usize,
}

fn is_zero(count: &usize) -> bool {
    *count == 0
}

impl LeftOut {
    pub fn total(&self) -> usize {
        self.claimed_elsewhere + self.unclaimed + self.other_intervals
    }
}

/// What an audit is limited to, for the objects no audited row is home to.
#[derive(Debug, Clone, Copy, Default)]
pub struct Scope<'a> {
    /// `--dag`: a dag_id or a glob.
    pub dag: Option<&'a str>,
    /// `--interval-from/--interval-to`: interval starts from (included) and to (excluded).
    pub intervals: Option<(Option<i64>, Option<i64>)>,
}

/// Who a key template says made a key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Claim {
    /// A DAG: captured by `{dag_id}`, or the operation's only DAG.
    Dag(String),
    /// One of the DAGs of a glob operation whose template does not name the DAG.
    Operation(String),
}

/// The key templates of the config, to match keys against.
pub struct Claimants<'c> {
    templates: Vec<(&'c str, &'c str, &'c KeyTemplate)>,
}

impl<'c> Claimants<'c> {
    pub fn new(config: &'c Config) -> Claimants<'c> {
        let templates = config
            .operations
            .iter()
            .filter_map(|op| Some((op.name.as_str(), op.dag_id.as_str(), op.key.as_ref()?)))
            .collect();
        Claimants { templates }
    }

    /// Every claim the templates make on `key`. A captured DAG counts only if the operation's
    /// `dag_id` matches it.
    pub fn of(&self, key: &str) -> Vec<Claim> {
        let mut claims = Vec::new();
        for &(name, dag_pattern, template) in &self.templates {
            let Some(dags) = captured_dags(&template.parts, key) else {
                continue;
            };
            if dags.is_empty() {
                claims.push(if is_glob(dag_pattern) {
                    Claim::Operation(name.to_string())
                } else {
                    Claim::Dag(dag_pattern.to_string())
                });
            }
            claims.extend(
                dags.into_iter()
                    .filter(|dag| glob_match(dag_pattern, dag))
                    .map(Claim::Dag),
            );
        }
        claims.sort();
        claims.dedup();
        claims
    }
}

fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '['])
}

/// Whether `parts` can produce `key`: None if not, else the texts the first `{dag_id}` can
/// stand for (empty when the template has none). Placeholders stand for any non-empty text
/// (`{map_index}` for an integer), so a template claims every key of its shape.
fn captured_dags(parts: &[Part], key: &str) -> Option<Vec<String>> {
    let dag = parts
        .iter()
        .position(|part| matches!(part, Part::Field("dag_id")));
    let mut feasible = Feasible::new(parts, key);
    let Some(dag) = dag else {
        return feasible.at(0, 0).then(Vec::new);
    };
    // Where the `{dag_id}` can start: every position the parts before it can end at.
    let mut starts = vec![0];
    for part in &parts[..dag] {
        let mut next: Vec<usize> = starts.iter().flat_map(|&at| ends(part, key, at)).collect();
        next.sort_unstable();
        next.dedup();
        starts = next;
    }
    let mut dags: Vec<String> = starts
        .iter()
        .flat_map(|&start| {
            ends(&parts[dag], key, start)
                .into_iter()
                .map(move |end| (start, end))
        })
        .filter(|&(_, end)| feasible.at(dag + 1, end))
        .map(|(start, end)| key[start..end].to_string())
        .collect();
    dags.sort();
    dags.dedup();
    (!dags.is_empty()).then_some(dags)
}

/// Where a part that starts at `at` can end.
fn ends(part: &Part, key: &str, at: usize) -> Vec<usize> {
    let rest = &key[at..];
    match part {
        Part::Literal(text) if rest.starts_with(text.as_str()) => vec![at + text.len()],
        Part::Literal(_) => Vec::new(),
        Part::Field("map_index") => {
            let sign = usize::from(rest.starts_with('-'));
            let digits = rest[sign..].bytes().take_while(u8::is_ascii_digit).count();
            (1..=digits).map(|n| at + sign + n).collect()
        }
        _ => rest
            .char_indices()
            .skip(1)
            .map(|(offset, _)| at + offset)
            .chain((!rest.is_empty()).then_some(key.len()))
            .collect(),
    }
}

/// Whether the parts from `part` on can produce the key from `at` on, remembered per
/// (part, position).
struct Feasible<'a> {
    parts: &'a [Part],
    key: &'a str,
    known: Vec<Option<bool>>,
}

impl<'a> Feasible<'a> {
    fn new(parts: &'a [Part], key: &'a str) -> Feasible<'a> {
        Feasible {
            parts,
            key,
            known: vec![None; (parts.len() + 1) * (key.len() + 1)],
        }
    }

    fn at(&mut self, part: usize, at: usize) -> bool {
        let slot = part * (self.key.len() + 1) + at;
        if let Some(known) = self.known[slot] {
            return known;
        }
        let answer = match self.parts.get(part) {
            None => at == self.key.len(),
            Some(current) => ends(current, self.key, at)
                .into_iter()
                .any(|end| self.at(part + 1, end)),
        };
        self.known[slot] = Some(answer);
        answer
    }
}

/// Scopes the objects of an audit. An object with no home in the audited rows is left out
/// when its own `interval_start` is outside the interval range; and, in a `--dag` audit,
/// unless a key template claims it for an audited DAG (or, for a glob operation whose template
/// names no DAG, an audited operation). Those no DAG claims go to `unclaimed`. `dropped`
/// counts the objects `prepare` already left out because journal rows outside the audit claim
/// them.
pub fn scope_objects(
    config: &Config,
    prepared: &mut Prepared,
    scope: Scope<'_>,
    dropped: usize,
) -> Result<LeftOut> {
    let objects = &prepared.objects;
    let dags = crate::cells::text_column(objects, "dag_id")?;
    let keys = crate::cells::text_column(objects, "key")?;
    let starts = crate::cells::int_column(objects, "provider_interval_start")?;
    let pipelines = crate::cells::code_column(&prepared.tries, super::model::interval::PIPELINE)?;
    let audited: std::collections::BTreeSet<&str> = pipelines
        .iter()
        .flatten()
        .map(|code| prepared.operations.name(code))
        .collect();
    let claimants = Claimants::new(config);
    let mut keep = Vec::with_capacity(objects.height());
    let mut unclaimed = Vec::with_capacity(objects.height());
    let mut left_out = LeftOut {
        claimed_elsewhere: dropped,
        ..LeftOut::default()
    };
    for ((dag, key), start) in dags.iter().zip(keys.iter()).zip(starts.iter()) {
        let outside = match (scope.intervals, start) {
            (Some((from, to)), Some(start)) => {
                from.is_some_and(|from| start < from) || to.is_some_and(|to| start >= to)
            }
            _ => false,
        };
        let (kept, no_claim) = match (dag, scope.dag) {
            (Some(_), _) => (true, false),
            _ if outside => {
                left_out.other_intervals += 1;
                (false, false)
            }
            (None, None) => (true, false),
            (None, Some(dag)) => {
                let claims = key.map(|key| claimants.of(key)).unwrap_or_default();
                let ours = claims.iter().any(|claim| match claim {
                    Claim::Dag(claimed) => glob_match(dag, claimed),
                    Claim::Operation(name) => audited.contains(name.as_str()),
                });
                if claims.is_empty() {
                    left_out.unclaimed += 1;
                } else if !ours {
                    left_out.claimed_elsewhere += 1;
                }
                (ours, claims.is_empty())
            }
        };
        keep.push(kept);
        unclaimed.push(no_claim);
    }
    if keep.contains(&false) {
        let take = |mask: &[bool]| {
            prepared
                .objects
                .filter(&BooleanChunked::from_slice("keep".into(), mask))
                .engine("scoping provider objects")
        };
        let (kept, left) = (take(&keep)?, take(&unclaimed)?);
        prepared.set_objects(kept);
        prepared.unclaimed = left;
    }
    Ok(left_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dags(template: &str, key: &str) -> Option<Vec<String>> {
        captured_dags(&KeyTemplate::parse(template).unwrap().parts, key)
    }

    #[test]
    fn a_template_captures_the_dags_a_key_can_name() {
        let synth = "synth:{dag_id}:{interval_start:%Y-%m-%dT%H}";
        assert_eq!(
            dags(synth, "synth:synth_001:2024-01-01T05"),
            Some(vec!["synth_001".to_string()])
        );
        // A DAG with the separator in its name is one of the readings.
        assert_eq!(
            dags(synth, "synth:a:b:2024"),
            Some(vec!["a".to_string(), "a:b".to_string()])
        );
        assert_eq!(dags(synth, "other:synth_001:2024"), None);
        assert_eq!(dags(synth, "synth::2024"), None);
        assert_eq!(
            dags("orders:{interval_start:%Y-%m-%d}", "orders:2026-11-01"),
            Some(vec![])
        );
        assert_eq!(
            dags("m:{map_index}:{dag_id}", "m:-3:d"),
            Some(vec!["d".into()])
        );
        assert_eq!(dags("m:{map_index}:{dag_id}", "m:x:d"), None);
    }
}
