//! One integration-test binary, with a module per purpose (as ripgrep does).

mod airflow;
mod airflow_api;
mod bad_input;
mod chromium;
mod cli;
mod completions;
mod config;
mod doctor;
mod examples;
mod hostile;
mod html_report;
mod journal;
mod live;
mod outputs;
mod plan;
mod postgres;
mod provider_http;
mod readonly;
mod rules;
mod saved;
mod scenario;
mod schemas;
mod synth;
mod trace;
mod ttl_risk;
