//! The journal-side actions of a plan as one SQL script in the journal's dialect: one
//! transaction, idempotent (each row is inserted only where it does not exist yet, so a second
//! run changes nothing), every value a literal that no provider string can break out of.
//!
//! Plain printable text is written as a quoted literal, readable in review; anything else (a
//! quote, a backslash, a control character, non-ASCII) as the UTF-8 bytes in hex, decoded by
//! the database, so no escaping rule of any dialect or session setting is involved.

use crate::config::JournalSettings;
use crate::error::{Error, Result};
use crate::plan::{JournalRow, Kind, Plan};
use crate::sources::database::Dialect;

/// A string as a literal of the dialect; None where the dialect cannot store it (PostgreSQL
/// text cannot hold NUL).
pub fn literal(dialect: Dialect, text: &str) -> Option<String> {
    let plain = text
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'\'' && b != b'\\');
    if plain {
        return Some(format!("'{text}'"));
    }
    let hex: String = text.bytes().map(|b| format!("{b:02X}")).collect();
    match dialect {
        Dialect::Sqlite => Some(format!("CAST(X'{hex}' AS TEXT)")),
        Dialect::Postgres if text.contains('\0') => None,
        Dialect::Postgres => Some(format!("convert_from('\\x{hex}'::bytea, 'UTF8')")),
        Dialect::Mysql => Some(format!("CONVERT(X'{hex}' USING utf8mb4)")),
    }
}

/// An identifier (table or column) quoted for the dialect.
pub fn identifier(dialect: Dialect, name: &str) -> String {
    let quote = |part: &str| match dialect {
        Dialect::Mysql => format!("`{}`", part.replace('`', "``")),
        _ => format!("\"{}\"", part.replace('"', "\"\"")),
    };
    name.split('.').map(quote).collect::<Vec<_>>().join(".")
}

/// The script for the plan's `adopt-external-id` actions.
pub fn script(plan: &Plan, journal: &JournalSettings, dialect: Dialect) -> Result<String> {
    let table = journal.table.as_deref().ok_or_else(|| {
        Error::usage(
            "--sql",
            "the journal is a snapshot file; a SQL script needs [journal] url and table",
        )
    })?;
    // Rows onceonly writes say so: in the `reconciled` phase, the journal's own value for it,
    // where the journal has one (without `[journal.phases]` the canonical names are its own);
    // else as `committed`, the first (sorted) value mapped to it. A mapped `note` column gets
    // the action's id.
    let own_phase = |canonical: &str| {
        journal
            .phases
            .iter()
            .find(|(_, mapped)| mapped.as_str() == canonical)
            .map(|(own, _)| own.as_str())
    };
    let (phase, phase_said) = match own_phase("reconciled") {
        Some(own) => (
            own,
            format!(
                "-- Rows are written in the journal's reconciled phase ({own}): onceonly wrote them.\n"
            ),
        ),
        None => {
            let committed = own_phase("committed").unwrap_or("committed");
            (
                committed,
                format!(
                    "-- The journal maps no reconciled phase: rows are written as committed ({committed}); only this script's comments say onceonly wrote them.\n"
                ),
            )
        }
    };
    let note = journal.columns.get("note").map(String::as_str);
    let table_sql = identifier(dialect, table);
    let mut out = String::new();
    out.push_str(
        "-- onceonly repair script: the journal-side actions of a plan, in one transaction.\n",
    );
    out.push_str(&format!(
        "-- inputs fingerprint {}\n",
        plan.inputs_fingerprint
    ));
    out.push_str("-- Idempotent: each row is inserted only where the journal lacks it; a second run changes nothing.\n");
    out.push_str(&phase_said);
    if note.is_none() {
        out.push_str("-- The journal maps no note column ([journal.columns] note): the action ids are in these comments alone.\n");
    }
    out.push_str(match dialect {
        Dialect::Mysql => "START TRANSACTION;\n",
        _ => "BEGIN;\n",
    });
    let mut written = 0;
    for action in plan
        .actions
        .iter()
        .filter(|a| a.kind == Kind::AdoptExternalId)
    {
        let Some(row) = &action.journal_row else {
            out.push_str(&format!(
                "-- {} {}: no journal row can be derived; left to a person\n",
                action.id,
                action.kind.name()
            ));
            continue;
        };
        let note = note.map(|_| format!("onceonly plan action {}", action.id));
        let Some(insert) = insert(row, phase, note.as_deref(), journal, dialect, &table_sql) else {
            out.push_str(&format!(
                "-- {} {}: a value holds a NUL byte, which this database cannot store; left to a person\n",
                action.id,
                action.kind.name()
            ));
            continue;
        };
        out.push_str(&format!(
            "-- {} {} (answers {})\n",
            action.id,
            action.kind.name(),
            action.answers.join(", ")
        ));
        out.push_str(&insert);
        written += 1;
    }
    out.push_str("COMMIT;\n");
    out.push_str(&format!("-- {written} journal rows\n"));
    Ok(out)
}

/// The INSERT of one row in `phase`, made only where the journal has no row in that phase naming
/// the object under the key; None where a value holds a NUL byte, which the dialect cannot store.
fn insert(
    row: &JournalRow,
    phase: &str,
    note: Option<&str>,
    journal: &JournalSettings,
    dialect: Dialect,
    table_sql: &str,
) -> Option<String> {
    let column = |canonical: &str| identifier(dialect, journal.column(canonical));
    let text = |value: &str| literal(dialect, value);
    let (op_key, phase, external_id) = (text(&row.op_key)?, text(phase)?, text(&row.external_id)?);
    let mut values = vec![
        ("op_key", op_key.clone()),
        ("dag_id", text(&row.dag_id)?),
        ("task_id", text(&row.task_id)?),
        ("run_id", text(&row.run_id)?),
        ("phase", phase.clone()),
        ("external_id", external_id.clone()),
    ];
    if let Some(hash) = &row.payload_hash {
        values.push(("payload_hash", text(hash)?));
    }
    values.push(("recorded_at", text(&row.recorded_at)?));
    values.push(("map_index", row.map_index.to_string()));
    values.push(("try_number", row.try_number.to_string()));
    if let Some(note) = note {
        values.push(("note", text(note)?));
    }
    let columns: Vec<String> = values.iter().map(|(name, _)| column(name)).collect();
    let values: Vec<String> = values.into_iter().map(|(_, value)| value).collect();
    let from_dual = if dialect == Dialect::Mysql {
        " FROM DUAL"
    } else {
        ""
    };
    Some(format!(
        "INSERT INTO {table_sql} ({})\nSELECT {}{from_dual}\nWHERE NOT EXISTS (SELECT 1 FROM {table_sql} WHERE {} = {op_key} AND {} = {phase} AND {} = {external_id});\n",
        columns.join(", "),
        values.join(", "),
        column("op_key"),
        column("phase"),
        column("external_id"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_stays_readable_and_the_rest_is_hex() {
        assert_eq!(literal(Dialect::Sqlite, "exp_1").unwrap(), "'exp_1'");
        assert_eq!(
            literal(Dialect::Sqlite, "a'b").unwrap(),
            "CAST(X'612762' AS TEXT)"
        );
        assert_eq!(
            literal(Dialect::Mysql, "a\\b").unwrap(),
            "CONVERT(X'615C62' USING utf8mb4)"
        );
        assert_eq!(
            literal(Dialect::Postgres, "é").unwrap(),
            "convert_from('\\xC3A9'::bytea, 'UTF8')"
        );
        assert_eq!(literal(Dialect::Postgres, "a\0b"), None);
        assert_eq!(
            identifier(Dialect::Sqlite, "ops.j\"x"),
            "\"ops\".\"j\"\"x\""
        );
        assert_eq!(identifier(Dialect::Mysql, "j`x"), "`j``x`");
    }
}
