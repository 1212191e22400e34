//! One module per subcommand.

pub mod audit;
pub mod demo;
pub mod rule;
