//! Stage 3, prepare: the scoped rows joined into the frames the rules read (`crate::prepare`),
//! and, for an audit limited to a DAG or an interval range, the provider objects that belong
//! elsewhere set aside. What this stage returns is not changed afterwards.

use crate::config::Config;
use crate::error::Result;
use crate::prepare::{LeftOut, Prepared, Scope};
use crate::sources::Tables;

use super::scope::{AuditOptions, Scoped};

pub fn tables(
    config: &Config,
    tables: &Tables,
    scoped: &Scoped,
    options: &AuditOptions,
) -> Result<(Prepared, Option<LeftOut>)> {
    let mut prepared = Prepared::build(
        config,
        &scoped.attempts,
        &scoped.journal,
        &tables.journal,
        &scoped.provider,
        scoped.window,
    )?;
    // A scoped audit reports nothing that belongs elsewhere (SPEC §7): objects of audited
    // rows stay; others only if they may be the audit's (a key template claims them for an
    // audited DAG, their own interval is in the range).
    let intervals = options.intervals();
    let objects_left_out = if options.dag.is_some() || intervals.is_some() {
        let scope = Scope {
            dag: options.dag.as_deref(),
            intervals,
        };
        let dropped = scoped.provider.height() - prepared.objects.height();
        Some(crate::prepare::scope_objects(
            config,
            &mut prepared,
            scope,
            dropped,
        )?)
    } else {
        None
    };
    // What preparing freed goes back before the rules and the verdicts allocate on threads of
    // their own.
    crate::memory::release_free();
    Ok((prepared, objects_left_out))
}
