//! `onceonly completions SHELL`: a completion script generated from the clap definitions, so
//! it names every subcommand and flag this binary has.

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

/// The completion script for `shell`, for the binary named `onceonly`.
pub fn script(shell: Shell) -> String {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "onceonly", &mut script);
    // clap writes the names and help it was given, all of them Rust strings: UTF-8.
    String::from_utf8_lossy(&script).into_owned()
}
