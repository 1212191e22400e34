//! `onceonly completions SHELL`: a completion script generated from the clap definitions, so
//! it names every subcommand and flag this binary has.

use clap_complete::Shell;

/// The completion script of `command` (the command line's clap definition) for `shell`, for
/// the binary named `onceonly`.
pub fn script(mut command: clap::Command, shell: Shell) -> String {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "onceonly", &mut script);
    // clap writes the names and help it was given, all of them Rust strings: UTF-8.
    String::from_utf8_lossy(&script).into_owned()
}
