//! `onceonly man [COMMAND]`: the manual page (roff) generated from the clap definitions:
//! onceonly(1), or onceonly-COMMAND(1) for one subcommand (the page onceonly(1) refers to).

use crate::error::{Error, Result};

/// The page of `cli` (the command line's clap definition), or of its subcommand `command`.
pub fn page(mut cli: clap::Command, command: Option<&str>) -> Result<String> {
    // Built, so each subcommand knows its display name (`onceonly-audit`) and bin name.
    cli.build();
    let shown = match command {
        None => cli,
        Some(name) => cli.find_subcommand(name).cloned().ok_or_else(|| {
            Error::usage(
                "man",
                format!("no subcommand {name:?}; `onceonly --help` lists them"),
            )
        })?,
    };
    let mut roff = Vec::new();
    clap_mangen::Man::new(shown)
        .render(&mut roff)
        .map_err(|err| Error::io("the man page", err))?;
    Ok(String::from_utf8_lossy(&roff).into_owned())
}
