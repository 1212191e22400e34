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

/// What the prepared codes borrow of the cut: the whole journal's texts, and the objects'
/// when the provider was read with them; and the window the audited tries need. The audited
/// tries and journal rows themselves ([`ScopedTries`]) go to [`Early::of`], which lets them go
/// once they are prepared.
pub struct Cut {
    window: Option<ProviderWindow>,
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
    fn of(tables: &Tables, window: Option<ProviderWindow>) -> Result<CutProvider> {
        let (objects, window) = scope::cut_provider(tables, window)?;
        let texts = ObjectTexts::of(&objects)?;
        Ok(CutProvider {
            objects,
            window,
            texts,
        })
    }
}

impl Cut {
    /// The cut, and the audited tries and journal rows for [`Early::of`].
    pub fn of(read: &Read<'_>, options: &AuditOptions) -> Result<(Cut, ScopedTries)> {
        let tries = scope::cut_tries(read.attempts(), read.journal(), options)?;
        let journal_texts = JournalTexts::of(read.journal())?;
        let provider = match read.whole() {
            Some(tables) => Some(CutProvider::of(tables, tries.window())?),
            None => None,
        };
        let cut = Cut {
            window: tries.window(),
            journal_texts,
            provider,
        };
        Ok((cut, tries))
    }
}

/// The tries and the journal prepared ([`Prepared::early`]), the provider not needed yet.
pub struct Early<'c> {
    cut: &'c Cut,
    prepared: crate::prepare::Early<'c>,
    /// How many attempts and journal rows the audit is about.
    scoped_rows: (usize, usize),
}

impl<'c> Early<'c> {
    /// Prepares `tries`, the rows `Cut::of` gave with `cut`. They are let go here: the
    /// prepared frames hold what the rest of the audit reads of them.
    pub fn of(config: &Config, cut: &'c Cut, tries: ScopedTries) -> Result<Early<'c>> {
        let started = std::time::Instant::now();
        let prepared = Prepared::early(
            config,
            &tries.attempts,
            &tries.journal,
            &cut.journal_texts,
            cut.provider.as_ref().map(|provider| &provider.texts),
        )?;
        crate::timing::phase("prepare:early", started);
        Ok(Early {
            cut,
            prepared,
            scoped_rows: (tries.attempts.height(), tries.journal.height()),
        })
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
                provider_now = CutProvider::of(tables, cut.window)?;
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
        let (attempts, journal) = self.scoped_rows;
        let scoped = Scoped {
            attempts,
            journal,
            window: provider.window,
        };
        Ok((prepared, objects_left_out, scoped))
    }
}
