//! The `attempts` table from Airflow's REST API (3.x `/api/v2`, 2.x `/api/v1`).
