//! One module per subcommand.

pub mod audit;
pub mod completions;
pub mod demo;
pub mod doctor;
pub mod man;
pub mod merge;
pub mod mock_provider;
pub mod plan_check;
pub mod rule;
pub mod split;
pub mod synth;
pub mod trace;
pub mod ttl_risk;
