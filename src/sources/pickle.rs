//! Airflow 2.x stores `dag_run.conf` as a Python pickle. This decodes the pickles a conf
//! holds (dicts, lists, tuples, strings, numbers, booleans, None) into JSON. Anything else, a
//! pickled class instance for example, is refused with the opcode named: guessing would
//! put values in keys that Airflow never had.

use serde_json::{Map, Number, Value};

pub fn to_json(bytes: &[u8]) -> Result<Value, String> {
    let mut machine = Machine {
        bytes,
        at: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: Vec::new(),
    };
    machine.run()
}

enum Item {
    Value(Value),
    /// A tuple is kept apart from a list only so a dict key can be a tuple (as text).
    Tuple(Vec<Value>),
}

impl Item {
    fn into_value(self) -> Value {
        match self {
            Item::Value(value) => value,
            Item::Tuple(values) => Value::Array(values),
        }
    }
}

struct Machine<'a> {
    bytes: &'a [u8],
    at: usize,
    stack: Vec<Item>,
    marks: Vec<usize>,
    memo: Vec<Value>,
}

impl Machine<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len())
            .ok_or("the pickle ends early")?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn uint(&mut self, n: usize) -> Result<usize, String> {
        let mut value: u64 = 0;
        for (shift, byte) in self.take(n)?.iter().enumerate() {
            value |= u64::from(*byte) << (8 * shift);
        }
        usize::try_from(value).map_err(|_| "a length does not fit".to_string())
    }

    fn text(&mut self, n: usize) -> Result<(), String> {
        let bytes = self.take(n)?.to_vec();
        let text = String::from_utf8(bytes).map_err(|_| "a string is not UTF-8")?;
        self.stack.push(Item::Value(Value::String(text)));
        Ok(())
    }

    fn pop(&mut self) -> Result<Value, String> {
        self.stack
            .pop()
            .map(Item::into_value)
            .ok_or_else(|| "the pickle's stack is empty".to_string())
    }

    fn pop_mark(&mut self) -> Result<Vec<Value>, String> {
        let mark = self.marks.pop().ok_or("a MARK is missing")?;
        if mark > self.stack.len() {
            return Err("a MARK is out of place".into());
        }
        Ok(self.stack.drain(mark..).map(Item::into_value).collect())
    }

    fn set_items(&mut self, pairs: Vec<Value>) -> Result<(), String> {
        let Some(Item::Value(Value::Object(map))) = self.stack.last_mut() else {
            return Err("SETITEM outside a dict".into());
        };
        let mut pairs = pairs.into_iter();
        while let (Some(key), Some(value)) = (pairs.next(), pairs.next()) {
            let key = match key {
                Value::String(text) => text,
                other => other.to_string(),
            };
            map.insert(key, value);
        }
        Ok(())
    }

    fn append(&mut self, values: Vec<Value>) -> Result<(), String> {
        match self.stack.last_mut() {
            Some(Item::Value(Value::Array(list))) => {
                list.extend(values);
                Ok(())
            }
            _ => Err("APPEND outside a list".into()),
        }
    }

    fn run(&mut self) -> Result<Value, String> {
        loop {
            let opcode = *self.take(1)?.first().expect("took one byte");
            match opcode {
                0x80 => {
                    self.take(1)?; // PROTO
                }
                0x95 => {
                    self.take(8)?; // FRAME
                }
                b'.' => return self.pop(), // STOP
                b'}' => self.stack.push(Item::Value(Value::Object(Map::new()))),
                b']' => self.stack.push(Item::Value(Value::Array(Vec::new()))),
                b')' => self.stack.push(Item::Tuple(Vec::new())),
                b'(' => self.marks.push(self.stack.len()),
                b'N' => self.stack.push(Item::Value(Value::Null)),
                0x88 => self.stack.push(Item::Value(Value::Bool(true))),
                0x89 => self.stack.push(Item::Value(Value::Bool(false))),
                b'J' => {
                    let bytes: [u8; 4] = self.take(4)?.try_into().expect("four bytes");
                    self.stack
                        .push(Item::Value(Value::from(i32::from_le_bytes(bytes))));
                }
                b'K' => {
                    let value = self.uint(1)?;
                    self.stack.push(Item::Value(Value::from(value)));
                }
                b'M' => {
                    let value = self.uint(2)?;
                    self.stack.push(Item::Value(Value::from(value)));
                }
                0x8a => {
                    // LONG1: little-endian two's complement of n bytes.
                    let n = self.uint(1)?;
                    let bytes = self.take(n)?.to_vec();
                    if n > 8 {
                        return Err("an integer wider than 64 bits".into());
                    }
                    let mut value: i64 = 0;
                    for (shift, byte) in bytes.iter().enumerate() {
                        value |= i64::from(*byte) << (8 * shift);
                    }
                    if n > 0 && n < 8 && bytes[n - 1] & 0x80 != 0 {
                        value -= 1i64 << (8 * n);
                    }
                    self.stack.push(Item::Value(Value::from(value)));
                }
                b'G' => {
                    let bytes: [u8; 8] = self.take(8)?.try_into().expect("eight bytes");
                    let value = f64::from_be_bytes(bytes);
                    let number = Number::from_f64(value).ok_or("a float that JSON cannot hold")?;
                    self.stack.push(Item::Value(Value::Number(number)));
                }
                0x8c => {
                    let n = self.uint(1)?;
                    self.text(n)?;
                }
                b'X' => {
                    let n = self.uint(4)?;
                    self.text(n)?;
                }
                0x8d => {
                    let n = self.uint(8)?;
                    self.text(n)?;
                }
                0x94 => {
                    // MEMOIZE
                    let top = match self.stack.last() {
                        Some(Item::Value(value)) => value.clone(),
                        Some(Item::Tuple(values)) => Value::Array(values.clone()),
                        None => return Err("MEMOIZE on an empty stack".into()),
                    };
                    self.memo.push(top);
                }
                b'h' | b'j' => {
                    let index = if opcode == b'h' {
                        self.uint(1)?
                    } else {
                        self.uint(4)?
                    };
                    let value = self
                        .memo
                        .get(index)
                        .cloned()
                        .ok_or("a memo reference is unknown")?;
                    self.stack.push(Item::Value(value));
                }
                b'q' | b'r' => {
                    // BINPUT/LONG_BINPUT: memo by explicit index.
                    let index = if opcode == b'q' {
                        self.uint(1)?
                    } else {
                        self.uint(4)?
                    };
                    let top = match self.stack.last() {
                        Some(item) => match item {
                            Item::Value(value) => value.clone(),
                            Item::Tuple(values) => Value::Array(values.clone()),
                        },
                        None => return Err("BINPUT on an empty stack".into()),
                    };
                    if self.memo.len() <= index {
                        self.memo.resize(index + 1, Value::Null);
                    }
                    self.memo[index] = top;
                }
                b's' => {
                    let value = self.pop()?;
                    let key = self.pop()?;
                    self.set_items(vec![key, value])?;
                }
                b'u' => {
                    let pairs = self.pop_mark()?;
                    self.set_items(pairs)?;
                }
                b'a' => {
                    let value = self.pop()?;
                    self.append(vec![value])?;
                }
                b'e' => {
                    let values = self.pop_mark()?;
                    self.append(values)?;
                }
                b't' => {
                    let values = self.pop_mark()?;
                    self.stack.push(Item::Tuple(values));
                }
                0x85..=0x87 => {
                    let n = usize::from(opcode - 0x84);
                    if self.stack.len() < n {
                        return Err("a tuple needs more items than the stack has".into());
                    }
                    let values = self
                        .stack
                        .split_off(self.stack.len() - n)
                        .into_iter()
                        .map(Item::into_value)
                        .collect();
                    self.stack.push(Item::Tuple(values));
                }
                other => {
                    return Err(format!(
                        "opcode 0x{other:02x} at byte {} is not a plain value (a pickled object?)",
                        self.at - 1
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn empty_dict_protocol_5() {
        // pickle.dumps({}, protocol=5)
        assert_eq!(to_json(&hex("80057d942e")).unwrap(), serde_json::json!({}));
    }

    #[test]
    fn nested_values() {
        // pickle.dumps({"region": "eu", "n": 3, "big": 70000, "neg": -2, "ok": True,
        //               "x": None, "f": 1.5, "l": [1, "a"], "t": (1, 2)}, protocol=4)
        let bytes = hex(concat!(
            "8004955f000000000000007d94288c06726567696f6e948c026575948c016e944b038c03",
            "626967944a701101008c036e6567944afeffffff8c026f6b94888c0178944e8c01669447",
            "3ff80000000000008c016c945d94284b018c016194658c0174944b014b028694752e",
        ));
        assert_eq!(
            to_json(&bytes).unwrap(),
            serde_json::json!({"region": "eu", "n": 3, "big": 70000, "neg": -2, "ok": true, "x": null, "f": 1.5, "l": [1, "a"], "t": [1, 2]})
        );
    }

    #[test]
    fn objects_and_truncation_are_refused() {
        // pickle.dumps({"when": datetime.date(2026, 11, 1)}, protocol=4) holds a global.
        let message = to_json(&hex("8004952a000000000000007d948c047768656e948c086461746574696d65948c0464617465949394430407ea0b019485945294732e")).unwrap_err();
        assert!(message.contains("not a plain value"), "{message}");
        assert!(
            to_json(&hex("80057d94"))
                .unwrap_err()
                .contains("ends early")
        );
        assert!(to_json(&hex("8004958c")).is_err());
    }
}
