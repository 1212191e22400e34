//! One module per subcommand.

pub mod audit;
pub mod demo;
pub mod doctor;
pub mod mock_provider;
pub mod rule;
pub mod synth;
pub mod trace;
pub mod ttl_risk;
