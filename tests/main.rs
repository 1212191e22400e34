//! One integration-test binary, with a module per purpose (as ripgrep does).

mod airflow;
mod bad_input;
mod cli;
mod postgres;
mod rules;
mod scenario;
