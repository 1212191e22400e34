//! How text for a terminal is drawn: its width and whether severities are coloured. Set once by
//! the command line (`--color`, `NO_COLOR`, the terminal's width or `COLUMNS`); unset, text is
//! plain at 80 columns, as when piped.

use std::sync::OnceLock;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub color: bool,
    pub width: usize,
}

/// When severities are coloured (`--color`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// When stdout is a terminal and `NO_COLOR` is not set.
    Auto,
    Always,
    Never,
}

/// The width of text written where no terminal says: a pipe or a file.
pub const PIPED_WIDTH: usize = 80;

static STYLE: OnceLock<Style> = OnceLock::new();

impl Style {
    pub const PLAIN: Style = Style {
        color: false,
        width: PIPED_WIDTH,
    };

    /// The style text for stdout gets, once [`configure`] has run; plain before.
    pub fn current() -> Style {
        STYLE.get().copied().unwrap_or(Style::PLAIN)
    }
}

/// Sets the style from `--color` and the environment: colour as `choice` says (`auto`: stdout is
/// a terminal and `NO_COLOR` is unset or empty); the width from `COLUMNS`, else the terminal's,
/// else [`PIPED_WIDTH`].
pub fn configure(choice: ColorChoice) {
    use std::io::IsTerminal;
    let terminal = std::io::stdout().is_terminal();
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
    let color = match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => terminal && !no_color,
    };
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|text| text.trim().parse::<usize>().ok())
        .filter(|width| *width >= 20);
    let width = columns
        .or_else(|| terminal.then(terminal_width).flatten())
        .unwrap_or(PIPED_WIDTH);
    let _ = STYLE.set(Style { color, width });
}

/// The terminal's width in columns, as the kernel reports it for stdout.
fn terminal_width() -> Option<usize> {
    // SAFETY: TIOCGWINSZ fills a winsize on a terminal descriptor and touches nothing else.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let read = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    (read == 0 && size.ws_col >= 20).then_some(size.ws_col as usize)
}

/// `text` in the colour of `severity` (error red, warning yellow, info blue) where the style
/// colours; `text` must already be terminal-safe.
pub fn severity(style: Style, severity: crate::rules::Severity, text: &str) -> String {
    if !style.color {
        return text.to_string();
    }
    let code = match severity {
        crate::rules::Severity::Error => "1;31",
        crate::rules::Severity::Warning => "33",
        crate::rules::Severity::Info => "34",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// `text` bold where the style colours.
pub fn bold(style: Style, text: &str) -> String {
    if style.color {
        format!("\x1b[1m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}
