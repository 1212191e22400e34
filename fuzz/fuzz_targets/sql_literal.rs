//! SQL repair scripts: any string, written as a literal, is read back by a real SQLite as
//! exactly that string, in one statement that changes nothing; identifiers name exactly
//! themselves.
#![no_main]

use libfuzzer_sys::fuzz_target;
use onceonly::plan::sql::{identifier, literal};
use onceonly::sources::database::Dialect;
use rusqlite::Connection;

thread_local! {
    static DB: Connection = {
        let db = Connection::open_in_memory().unwrap();
        db.execute_batch(
            "CREATE TABLE canary (v TEXT); INSERT INTO canary VALUES ('alive');
             CREATE TABLE journal (v TEXT);",
        )
        .unwrap();
        db
    };
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let text = text.as_ref();
    for dialect in [Dialect::Postgres, Dialect::Mysql] {
        let emitted = literal(dialect, text);
        assert_eq!(
            emitted.is_none(),
            dialect == Dialect::Postgres && text.contains('\0')
        );
        let _ = identifier(dialect, text);
    }
    let sql = literal(Dialect::Sqlite, text).expect("SQLite stores any string");
    DB.with(|db| {
        // One read-only statement that evaluates to exactly the text.
        let mut select = db
            .prepare(&format!("SELECT {sql}"))
            .unwrap_or_else(|err| panic!("{sql}: {err}"));
        assert!(select.readonly(), "{sql}");
        let back: String = select.query_row([], |row| row.get(0)).unwrap();
        assert_eq!(back, text, "{sql}");
        drop(select);

        // As the repair script uses it: inserted once, found again by equality.
        let insert = format!(
            "INSERT INTO journal (v) SELECT {sql} WHERE NOT EXISTS (SELECT 1 FROM journal WHERE v = {sql})"
        );
        assert_eq!(db.execute(&insert, []).unwrap(), 1, "{insert}");
        assert_eq!(db.execute(&insert, []).unwrap(), 0, "{insert}");
        let stored: Vec<String> = db
            .prepare("SELECT v FROM journal")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(stored, vec![text.to_string()]);
        db.execute("DELETE FROM journal", []).unwrap();
        let canary: String = db
            .query_row("SELECT group_concat(v) FROM canary", [], |row| row.get(0))
            .unwrap();
        assert_eq!(canary, "alive");

        // An identifier without a dot (a dot separates schema and table) names itself. The
        // config refuses control characters in table and column names (SQLite's parser ends
        // a statement at a NUL), so names here hold none.
        if !text.contains('.') && !text.chars().any(char::is_control) {
            let name = identifier(Dialect::Sqlite, text);
            let select = db
                .prepare(&format!("SELECT 1 AS {name}"))
                .unwrap_or_else(|err| panic!("{name}: {err}"));
            assert_eq!(select.column_name(0).unwrap(), text, "{name}");
        }
    });
});
