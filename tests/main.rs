//! One integration-test binary, with a module per purpose (as ripgrep does).

mod airflow;
mod airflow_api;
mod bad_input;
mod cli;
mod journal;
mod postgres;
mod rules;
mod saved;
mod scenario;
