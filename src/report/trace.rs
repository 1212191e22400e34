//! What `trace` reports: one interval, run or key, every try, journal row and provider object
//! of it in time order, each try with its verdict, then the findings and the repair.

use serde::Serialize;

use crate::plan::Action;
use crate::rules::Finding;

#[derive(Debug, Clone, Serialize)]
pub struct Trace {
    pub dag_id: String,
    pub selected_by: String,
    pub intervals: Vec<String>,
    pub tries: Vec<TraceTry>,
    pub events: Vec<Event>,
    pub findings: Vec<Finding>,
    pub repairs: Vec<Action>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TraceTry {
    #[serde(rename = "try")]
    pub try_ref: String,
    pub task_id: String,
    pub state: Option<String>,
    pub hostname: Option<String>,
    pub pid: Option<i64>,
    pub start_date: Option<String>,
    pub end_date: Option<String>,
    pub verdict: String,
    pub op_key: Option<String>,
    pub external_id: Option<String>,
    #[serde(skip)]
    pub start: Option<i64>,
    #[serde(skip)]
    pub end: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub at: String,
    #[serde(skip)]
    pub micros: i64,
    /// `try-start`, `try-end`, `journal`, `provider`.
    pub kind: &'static str,
    #[serde(rename = "try")]
    pub try_ref: Option<String>,
    pub what: String,
    pub op_key: Option<String>,
    pub external_id: Option<String>,
    /// `lost-response`, `duplicate`, `void`: what a reader should see at a glance.
    pub marks: Vec<&'static str>,
}
