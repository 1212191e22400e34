//! Stage 3, prepare: the scoped rows joined into the frames the rules read (`crate::prepare`),
//! and, for an audit limited to a DAG or an interval range, the provider objects that belong
//! elsewhere set aside. What this stage returns is not changed afterwards.
//!
//! It runs in two steps so that a provider still being listed does not hold it up:
//! [`Early::of`] cuts and prepares the tries and the journal as soon as they are read, and
//! [`Early::finish`] the objects once the provider is read. When all three tables are read at
//! once (a snapshot), the first step codes the objects' keys and ids as well.

use polars::prelude::DataFrame;

use crate::config::Config;
use crate::error::Result;
use crate::prepare::{JournalTexts, LeftOut, ObjectTexts, Prepared, ProviderWindow, Scope};
use crate::sources::Tables;

use super::read::Read;
use super::scope::{self, AuditOptions, Scoped, ScopedTries};

/// The audited tries and journal rows, and the texts the prepared codes borrow: the whole
/// journal's, and the objects' when the provider was read with them.
pub struct Cut {
    tries: ScopedTries,
    journal_texts: JournalTexts,
    /// The provider cut to the tries' window, when it was read with them.
    provider: Option<CutProvider>,
}

/// The provider's objects of the tries' window, the window, and the objects' keys and ids.
struct CutProvider {
    objects: DataFrame,
    window: ProviderWindow,
    texts: ObjectTexts,
}

impl CutProvider {
    fn of(tables: &Tables, tries: &ScopedTries) -> Result<CutProvider> {
        let (objects, window) = scope::cut_provider(tables, tries)?;
        let texts = ObjectTexts::of(&objects)?;
        Ok(CutProvider {
            objects,
            window,
            texts,
        })
    }
}

impl Cut {
    pub fn of(read: &Read<'_>, options: &AuditOptions) -> Result<Cut> {
        let tries = scope::cut_tries(read.attempts(), read.journal(), options)?;
        let journal_texts = JournalTexts::of(read.journal())?;
        let provider = match read.whole() {
            Some(tables) => Some(CutProvider::of(tables, &tries)?),
            None => None,
        };
        Ok(Cut {
            tries,
            journal_texts,
            provider,
        })
    }
}

/// The tries and the journal prepared ([`Prepared::early`]), the provider not needed yet.
pub struct Early<'c> {
    cut: &'c Cut,
    prepared: crate::prepare::Early<'c>,
}

impl<'c> Early<'c> {
    pub fn of(config: &Config, cut: &'c Cut) -> Result<Early<'c>> {
        let started = std::time::Instant::now();
        let prepared = Prepared::early(
            config,
            &cut.tries.attempts,
            &cut.tries.journal,
            &cut.journal_texts,
            cut.provider.as_ref().map(|provider| &provider.texts),
        )?;
        crate::timing::phase("prepare:early", started);
        Ok(Early { cut, prepared })
    }

    /// The objects of the tries' window prepared from `tables`, and the whole prepared
    /// frames; the rows the audit is about (`Scoped`) for its coverage.
    pub fn finish(
        self,
        config: &Config,
        tables: &Tables,
        options: &AuditOptions,
    ) -> Result<(Prepared, Option<LeftOut>, Scoped)> {
        let cut = self.cut;
        let provider_now;
        let provider = match &cut.provider {
            Some(provider) => provider,
            None => {
                provider_now = CutProvider::of(tables, &cut.tries)?;
                &provider_now
            }
        };
        let mut prepared = self.prepared.finish(
            config,
            &tables.journal,
            &provider.objects,
            &provider.texts,
            provider.window,
        )?;
        // A scoped audit reports nothing that belongs elsewhere (SPEC §7): objects of audited
        // rows stay; others only if they may be the audit's (a key template claims them for
        // an audited DAG, their own interval is in the range).
        let intervals = options.intervals();
        let objects_left_out = if options.dag.is_some() || intervals.is_some() {
            let scope = Scope {
                dag: options.dag.as_deref(),
                intervals,
            };
            let dropped = provider.objects.height() - prepared.objects.height();
            Some(crate::prepare::scope_objects(
                config,
                &mut prepared,
                scope,
                dropped,
            )?)
        } else {
            None
        };
        let scoped = Scoped {
            attempts: cut.tries.attempts.height(),
            journal: cut.tries.journal.height(),
            window: provider.window,
        };
        Ok((prepared, objects_left_out, scoped))
    }
}
