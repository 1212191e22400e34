//! `onceonly completions SHELL` and `onceonly man`: generated from the clap definitions, so
//! they name every subcommand and flag; bash accepts the script and completes with it, and the
//! man pages render.

use std::path::Path;
use std::process::Command;

use crate::scenario::{onceonly, stderr, stdout};

const SUBCOMMANDS: [&str; 10] = [
    "audit",
    "rule",
    "trace",
    "ttl-risk",
    "doctor",
    "demo",
    "mock-provider",
    "synth",
    "completions",
    "man",
];

fn generated(args: &[&str]) -> String {
    let output = onceonly(args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    stdout(&output)
}

/// What bash offers after `words` (the last one being completed), with the script loaded.
fn bash_completes(script: &Path, words: &[&str]) -> Vec<String> {
    let line = words.join(" ");
    let program = format!(
        "source {script}; COMP_WORDS=({words}); COMP_CWORD={last}; COMP_LINE={line:?}; COMP_POINT={point}; \
         _onceonly onceonly {current} {previous}; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script = script.display(),
        words = words.join(" "),
        last = words.len() - 1,
        point = line.len(),
        current = words[words.len() - 1],
        previous = words[words.len() - 2],
    );
    let output = Command::new("bash")
        .args(["--norc", "-c", &program])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    stdout(&output).lines().map(String::from).collect()
}

#[test]
fn the_bash_completion_is_valid_bash_and_completes_subcommands_and_flags() {
    let script = generated(&["completions", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("onceonly.bash");
    std::fs::write(&file, &script).unwrap();
    let syntax = Command::new("bash").arg("-n").arg(&file).output().unwrap();
    assert!(syntax.status.success(), "{}", stderr(&syntax));
    for subcommand in SUBCOMMANDS {
        assert!(
            script.contains(subcommand),
            "{subcommand} is not in the script"
        );
    }
    assert_eq!(bash_completes(&file, &["onceonly", "tt"]), ["ttl-risk"]);
    assert_eq!(
        bash_completes(&file, &["onceonly", "audit", "--base"]),
        ["--baseline"]
    );
    assert!(bash_completes(&file, &["onceonly", "audit", "--h"]).contains(&"--html".to_string()));
}

#[test]
fn zsh_and_fish_completions_name_every_subcommand() {
    for shell in ["zsh", "fish"] {
        let script = generated(&["completions", shell]);
        for subcommand in SUBCOMMANDS {
            assert!(script.contains(subcommand), "{shell}: no {subcommand}");
        }
        assert!(script.contains("--baseline"), "{shell}: audit's flags");
    }
    let unknown = onceonly(&["completions", "tcsh"]);
    assert_eq!(unknown.status.code(), Some(2));
}

/// The page as a reader sees it: `man -l` or groff where installed, else None.
fn rendered(page: &Path) -> Option<String> {
    if crate::skip::without("man") {
        return None;
    }
    let man = Command::new("man")
        .arg("-l")
        .arg(page)
        .env("MANWIDTH", "100")
        .env("MANPAGER", "cat")
        .output();
    if let Ok(output) = man
        && output.status.success()
    {
        return Some(stdout(&output));
    }
    let groff = Command::new("groff")
        .args(["-man", "-Tascii", "-P-cbou", "-ww"])
        .arg(page)
        .output()
        .ok()?;
    assert!(groff.stderr.is_empty(), "groff warns: {}", stderr(&groff));
    groff.status.success().then(|| stdout(&groff))
}

#[test]
fn the_man_pages_render_and_document_each_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let main = generated(&["man"]);
    let audit = generated(&["man", "audit"]);
    for (name, roff) in [("onceonly.1", &main), ("onceonly-audit.1", &audit)] {
        for section in [
            ".TH ",
            ".SH NAME",
            ".SH SYNOPSIS",
            ".SH DESCRIPTION",
            ".SH OPTIONS",
        ] {
            assert!(roff.contains(section), "{name} has no {section}");
        }
    }
    for subcommand in SUBCOMMANDS {
        assert!(
            main.contains(&format!("onceonly\\-{}(1)", subcommand.replace('-', "\\-"))),
            "onceonly(1) does not refer to onceonly-{subcommand}(1)"
        );
    }
    assert!(audit.contains("\\-\\-baseline") && audit.contains("\\-\\-html"));
    let file = dir.path().join("onceonly-audit.1");
    std::fs::write(&file, &audit).unwrap();
    match rendered(&file) {
        Some(text) => {
            assert!(
                text.contains("NAME") && text.contains("onceonly-audit"),
                "{text}"
            );
            assert!(
                text.contains("--baseline") && text.contains("--fail-on-new"),
                "{text}"
            );
        }
        None => crate::skip::skipped("the man page as man renders it", "neither man nor groff"),
    }
    let unknown = onceonly(&["man", "nosuch"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(stderr(&unknown).contains("nosuch"), "{}", stderr(&unknown));
}
