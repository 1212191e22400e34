//! The journal-side actions of a plan as one SQL script in the journal's dialect: one
//! transaction, idempotent (each row is inserted only where it does not exist yet, so a second
//! run changes nothing), every value a literal that no provider string can break out of.
//!
//! Plain printable text is written as a quoted literal, readable in review; anything else (a
//! quote, a backslash, a control character, non-ASCII) as the UTF-8 bytes in hex, decoded by
//! the database, so no escaping rule of any dialect or session setting is involved.

use crate::config::JournalSettings;
use crate::error::{Error, Result};
use crate::plan::{Kind, Plan};
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
    // The journal's own value for a committed row: the first (sorted) one mapped to it.
    let committed = journal
        .phases
        .iter()
        .find(|(_, canonical)| canonical.as_str() == "committed")
        .map(|(own, _)| own.as_str())
        .unwrap_or("committed");
    let column = |canonical: &str| identifier(dialect, journal.column(canonical));
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
        let text_values = [
            ("op_key", Some(row.op_key.as_str())),
            ("dag_id", Some(row.dag_id.as_str())),
            ("task_id", Some(row.task_id.as_str())),
            ("run_id", Some(row.run_id.as_str())),
            ("phase", Some(committed)),
            ("external_id", Some(row.external_id.as_str())),
            ("payload_hash", row.payload_hash.as_deref()),
            ("recorded_at", Some(row.recorded_at.as_str())),
        ];
        let mut columns = Vec::new();
        let mut values = Vec::new();
        let mut storable = true;
        for (name, value) in text_values {
            let Some(value) = value else { continue };
            match literal(dialect, value) {
                Some(literal) => {
                    columns.push(column(name));
                    values.push(literal);
                }
                None => storable = false,
            }
        }
        if !storable {
            out.push_str(&format!(
                "-- {} {}: a value holds a NUL byte, which this database cannot store; left to a person\n",
                action.id,
                action.kind.name()
            ));
            continue;
        }
        columns.push(column("map_index"));
        values.push(row.map_index.to_string());
        columns.push(column("try_number"));
        values.push(row.try_number.to_string());
        let find = |name: &str| {
            values[columns
                .iter()
                .position(|c| *c == column(name))
                .expect("written above")]
            .clone()
        };
        let from_dual = if dialect == Dialect::Mysql {
            " FROM DUAL"
        } else {
            ""
        };
        out.push_str(&format!(
            "-- {} {} (answers {})\n",
            action.id,
            action.kind.name(),
            action.answers.join(", ")
        ));
        out.push_str(&format!(
            "INSERT INTO {table_sql} ({})\nSELECT {}{from_dual}\nWHERE NOT EXISTS (SELECT 1 FROM {table_sql} WHERE {} = {} AND {} = {} AND {} = {});\n",
            columns.join(", "),
            values.join(", "),
            column("op_key"),
            find("op_key"),
            column("phase"),
            find("phase"),
            column("external_id"),
            find("external_id"),
        ));
        written += 1;
    }
    out.push_str("COMMIT;\n");
    out.push_str(&format!("-- {written} journal rows\n"));
    Ok(out)
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
