//! `onceonly rule [CODE]`: list the rules or print one rule's documentation.

use crate::error::{Error, Result};
use crate::rules::{self, REGISTRY};

pub fn run(code: Option<&str>) -> Result<String> {
    let Some(code) = code else {
        let mut out = String::new();
        for rule in REGISTRY {
            let summary = rules::doc_text(*rule)
                .lines()
                .skip_while(|line| !line.starts_with("## What it detects"))
                .skip(1)
                .take_while(|line| !line.trim().is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            let summary = match summary.find(". ") {
                Some(end) => summary[..=end].to_string(),
                None => summary,
            };
            out.push_str(&format!(
                "{}  {:<28} {:<8} {}\n",
                rule.code(),
                rule.name(),
                rule.severity().to_string(),
                summary
            ));
        }
        return Ok(out);
    };
    let rule = rules::lookup(code).ok_or_else(|| {
        let known: Vec<_> = REGISTRY.iter().map(|rule| rule.code()).collect();
        Error::usage(
            "rule",
            format!("no rule {code:?} (known: {})", known.join(", ")),
        )
    })?;
    Ok(format!(
        "{} {} ({})\n\n{}\n",
        rule.code(),
        rule.name(),
        rule.severity(),
        rules::doc_text(rule)
    ))
}
