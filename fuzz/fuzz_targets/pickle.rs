//! A run's conf as Airflow 2.x stores it (a pickle), or any bytes in its place: decoded to JSON
//! or refused with a message, never a panic, a runaway allocation or a stack overflow. What
//! decodes survives a round trip: the JSON pickled again (by the writer below, protocol 4
//! opcodes) decodes to the same JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use onceonly::sources::pickle;
use serde_json::Value;

/// Pickles a JSON value with the opcodes Python's pickler uses for the same plain values.
fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.push(b'N'),
        Value::Bool(true) => out.push(0x88),
        Value::Bool(false) => out.push(0x89),
        Value::Number(number) => {
            if let Some(int) = number.as_i64() {
                // LONG1 with eight bytes: any i64, whatever opcode it was read from.
                out.extend([0x8a, 8]);
                out.extend(int.to_le_bytes());
            } else if let Some(float) = number.as_f64().filter(|_| number.is_f64()) {
                out.push(b'G');
                out.extend(float.to_be_bytes());
            } else {
                panic!("the decoder made an integer beyond i64: {number}");
            }
        }
        Value::String(text) => {
            if text.len() < 256 {
                out.extend([0x8c, text.len() as u8]);
            } else {
                out.push(b'X');
                out.extend((text.len() as u32).to_le_bytes());
            }
            out.extend(text.as_bytes());
        }
        Value::Array(items) => {
            out.extend([b']', b'(']);
            for item in items {
                write(item, out);
            }
            out.push(b'e');
        }
        Value::Object(map) => {
            out.extend([b'}', b'(']);
            for (key, item) in map {
                write(&Value::String(key.clone()), out);
                write(item, out);
            }
            out.push(b'u');
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = pickle::to_json(data) else {
        return;
    };
    let mut again = vec![0x80, 4];
    write(&value, &mut again);
    again.push(b'.');
    match pickle::to_json(&again) {
        Ok(decoded) => assert_eq!(decoded, value, "{data:02x?}"),
        Err(message) => panic!("{value} pickled again is refused: {message}"),
    }
});
