//! Progress of the reads, on stderr, for a person watching a terminal (SPEC §7).
//!
//! A source opens a [`Line`] for what it reads and reports to it: rows, pages and objects, a
//! retry waiting out `Retry-After`. Sources never learn whether or how that is shown; the
//! binary decides once, at start ([`install`]):
//!
//! * stderr not a terminal, or `--quiet`: nothing at all (the default of the library, so tests
//!   and other callers print nothing);
//! * a terminal: one line per source, redrawn in place (indicatif) a few times a second and
//!   cleared when the source is read; coloured unless `NO_COLOR` is set;
//! * `TERM=dumb`, which cannot redraw: a plain line per source every few seconds while it is
//!   read and one when it ends, without colour, carriage returns or escape sequences.
//!
//! Results never go to stderr, so progress can never mix with a report.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Hidden,
    /// Lines redrawn in place; `colour` unless `NO_COLOR` asks for none.
    Redraw {
        colour: bool,
    },
    /// Plain lines now and then, for a terminal that cannot redraw (`TERM=dumb`).
    Lines,
}

impl Mode {
    /// The mode for this process: `--quiet`, whether stderr is a terminal, `TERM`, `NO_COLOR`.
    pub fn from_environment(quiet: bool) -> Mode {
        Mode::choose(
            quiet,
            std::io::stderr().is_terminal(),
            std::env::var("TERM").ok().as_deref(),
            std::env::var("NO_COLOR").ok().as_deref(),
        )
    }

    fn choose(quiet: bool, terminal: bool, term: Option<&str>, no_color: Option<&str>) -> Mode {
        if quiet || !terminal {
            return Mode::Hidden;
        }
        // A terminal that cannot move its cursor: an unset TERM is treated as one too.
        if term.is_none_or(|term| term.is_empty() || term == "dumb") {
            return Mode::Lines;
        }
        // no-color.org: a NO_COLOR that is present and not empty turns colour off.
        Mode::Redraw {
            colour: no_color.is_none_or(str::is_empty),
        }
    }
}

enum Display {
    Redraw { bars: MultiProgress, colour: bool },
    Lines,
}

static DISPLAY: OnceLock<Option<Display>> = OnceLock::new();

/// Chooses how progress is shown, once per process, before any source is read; without it
/// nothing is shown.
pub fn install(mode: Mode) {
    let display = match mode {
        Mode::Hidden => None,
        Mode::Redraw { colour } => Some(Display::Redraw {
            bars: MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(8)),
            colour,
        }),
        Mode::Lines => Some(Display::Lines),
    };
    let _ = DISPLAY.set(display);
}

fn display() -> Option<&'static Display> {
    DISPLAY.get().and_then(Option::as_ref)
}

/// Rows between two reports of [`Line::row`].
const ROWS_BETWEEN_REPORTS: usize = 16_384;

/// How often a `TERM=dumb` terminal gets a line per source.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

/// One source's progress: cheap to clone, and free when nothing is shown.
#[derive(Clone, Default)]
pub struct Line {
    shown: Option<Arc<Shown>>,
}

struct Shown {
    /// `attempts`, `journal`, `provider`.
    table: &'static str,
    /// The source as reports name it (no credentials).
    source: String,
    started: Instant,
    rows: AtomicU64,
    pages: AtomicU64,
    objects: AtomicU64,
    /// What a retry waits for, while it waits.
    waiting: Mutex<Option<String>>,
    bar: Option<ProgressBar>,
    /// When the last plain line was printed (`TERM=dumb`).
    last_plain: Mutex<Instant>,
    /// The source was read to its end ([`Line::done`]).
    done: AtomicBool,
}

impl Line {
    /// A line for reading `table` from `source`; nothing when progress is not shown.
    pub fn open(table: &'static str, source: &str) -> Line {
        let Some(display) = display() else {
            return Line::default();
        };
        let bar = match display {
            Display::Redraw { bars, colour } => {
                let template = if *colour {
                    "{spinner:.cyan} {prefix:.bold} {wide_msg}"
                } else {
                    "{spinner} {prefix} {wide_msg}"
                };
                let style = ProgressStyle::with_template(template)
                    .expect("the template is valid")
                    .tick_chars("-\\|/ ");
                let bar = bars.add(ProgressBar::new_spinner().with_style(style));
                bar.set_prefix(format!("reading {table}"));
                bar.enable_steady_tick(Duration::from_millis(125));
                Some(bar)
            }
            Display::Lines => None,
        };
        let shown = Shown {
            table,
            source: source.to_string(),
            started: Instant::now(),
            rows: AtomicU64::new(0),
            pages: AtomicU64::new(0),
            objects: AtomicU64::new(0),
            waiting: Mutex::new(None),
            bar,
            last_plain: Mutex::new(Instant::now()),
            done: AtomicBool::new(false),
        };
        let line = Line {
            shown: Some(Arc::new(shown)),
        };
        line.show();
        line
    }

    /// Row `number` (1-based) was read: shown every few thousand rows.
    pub fn row(&self, number: usize) {
        if self.shown.is_some() && number.is_multiple_of(ROWS_BETWEEN_REPORTS) {
            self.rows(number as u64);
        }
    }

    /// The rows read so far.
    pub fn rows(&self, rows: u64) {
        if let Some(shown) = &self.shown {
            shown.rows.store(rows, Ordering::Relaxed);
            self.show();
        }
    }

    /// One more page of a listing, with its objects.
    pub fn page(&self, objects: usize) {
        if let Some(shown) = &self.shown {
            shown.pages.fetch_add(1, Ordering::Relaxed);
            shown.objects.fetch_add(objects as u64, Ordering::Relaxed);
            self.show();
        }
    }

    /// A retry is waiting `wait` after `reason`: for the server's `Retry-After` when
    /// `retry_after`, else a backoff.
    pub fn waiting(&self, wait: Duration, reason: &str, retry_after: bool) {
        if let Some(shown) = &self.shown {
            let why = if retry_after {
                "Retry-After"
            } else {
                "backoff"
            };
            *shown.waiting.lock().expect("progress lock") = Some(format!(
                "waiting {} ({why}) after {reason}",
                crate::timestamp::format_wait(wait)
            ));
            self.show();
        }
    }

    /// The wait is over.
    pub fn resumed(&self) {
        if let Some(shown) = &self.shown {
            *shown.waiting.lock().expect("progress lock") = None;
            self.show();
        }
    }

    /// The source is read to its end: a plain terminal gets a last line saying so.
    pub fn done(&self) {
        if let Some(shown) = &self.shown {
            shown.done.store(true, Ordering::Relaxed);
        }
    }

    fn show(&self) {
        let Some(shown) = &self.shown else { return };
        match &shown.bar {
            Some(bar) => bar.set_message(shown.describe()),
            None => {
                let mut last = shown.last_plain.lock().expect("progress lock");
                if last.elapsed() >= PLAIN_EVERY || shown.rows_and_pages() == 0 {
                    *last = Instant::now();
                    eprintln!("onceonly: reading {}: {}", shown.table, shown.describe());
                }
            }
        }
    }
}

impl Shown {
    fn rows_and_pages(&self) -> u64 {
        self.rows.load(Ordering::Relaxed) + self.pages.load(Ordering::Relaxed)
    }

    /// `1,234,567 rows, 412,000 rows/s from sqlite:///…` or
    /// `523 pages, 523,000 objects, 98,000 objects/s, waiting 1.0s (Retry-After) after HTTP 429
    /// Too Many Requests from provider listing http://…`.
    fn describe(&self) -> String {
        let seconds = self.started.elapsed().as_secs_f64().max(1e-3);
        let rows = self.rows.load(Ordering::Relaxed);
        let pages = self.pages.load(Ordering::Relaxed);
        let mut text = if pages > 0 {
            let objects = self.objects.load(Ordering::Relaxed);
            format!(
                "{} page{}, {} objects, {} objects/s",
                count(pages),
                if pages == 1 { "" } else { "s" },
                count(objects),
                count((objects as f64 / seconds) as u64)
            )
        } else {
            format!(
                "{} rows, {} rows/s",
                count(rows),
                count((rows as f64 / seconds) as u64)
            )
        };
        // The wait before the source's name: a narrow terminal cuts the line's end.
        if let Some(waiting) = self.waiting.lock().expect("progress lock").as_deref() {
            text.push_str(", ");
            text.push_str(waiting);
        }
        text.push_str(&format!(" from {}", self.source));
        text
    }
}

impl Drop for Shown {
    /// The source is read (or failed): its line goes away; a plain terminal gets a last line
    /// for a source read to its end (a failure's message says the rest).
    fn drop(&mut self) {
        match &self.bar {
            Some(bar) => bar.finish_and_clear(),
            None if !self.done.load(Ordering::Relaxed) => {}
            None => eprintln!(
                "onceonly: read {} in {:.1}s: {}",
                self.table,
                self.started.elapsed().as_secs_f64(),
                self.describe()
            ),
        }
    }
}

/// `1234567` as `1,234,567`.
fn count(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_only_on_a_terminal_and_never_when_quiet() {
        let colour = Mode::Redraw { colour: true };
        assert_eq!(Mode::choose(false, true, Some("xterm"), None), colour);
        assert_eq!(Mode::choose(true, true, Some("xterm"), None), Mode::Hidden);
        assert_eq!(
            Mode::choose(false, false, Some("xterm"), None),
            Mode::Hidden
        );
        assert_eq!(
            Mode::choose(false, true, Some("xterm"), Some("1")),
            Mode::Redraw { colour: false }
        );
        // An empty NO_COLOR does not count (no-color.org).
        assert_eq!(Mode::choose(false, true, Some("xterm"), Some("")), colour);
        assert_eq!(Mode::choose(false, true, Some("dumb"), None), Mode::Lines);
        assert_eq!(Mode::choose(false, true, None, None), Mode::Lines);
        assert_eq!(Mode::choose(true, true, Some("dumb"), None), Mode::Hidden);
    }

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1_234_567), "1,234,567");
    }
}
