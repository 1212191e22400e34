//! onceonly: did each interval's side effect happen exactly once, and do our records know?
//!
//! Data flows one way: sources → canonical tables → prepare → rules → findings and verdicts →
//! plan, run as stages by `engine`; `render` writes reports, `commands` hold the subcommands.

pub mod ahead;
pub mod cells;
pub mod cli;
pub mod commands;
pub mod config;
pub mod dictionary;
pub mod engine;
pub mod error;
pub mod glob;
pub mod identity;
pub mod in_flight;
pub mod keys;
pub mod known;
pub mod memory;
pub mod model;
pub mod output;
pub mod parallel;
pub mod partition;
pub mod plan;
pub mod prepare;
pub mod progress;
pub mod render;
pub mod report;
pub mod retention;
pub mod rules;
pub mod sources;
#[cfg(test)]
mod testing;
pub mod timestamp;
pub mod timing;
pub mod verdicts;
