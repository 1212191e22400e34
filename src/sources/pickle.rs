//! Airflow 2.x stores `dag_run.conf` as a Python pickle. This decodes the pickles a conf
//! holds (dicts, lists, tuples, strings, numbers, booleans, None) into JSON. Anything else, a
//! pickled class instance for example, is refused with the opcode named: guessing would
//! put values in keys that Airflow never had.
//!
//! Lists, dicts and tuples are shared as Python shares them. The pickler writes an object once
//! and refers back to it through the memo, and a reference sees what was added to the object
//! after it was remembered (`{"a": x, "b": x}` remembers `x` empty, then fills it). So a few
//! bytes can stand for a large value, or for one that holds itself: a pickle that nests
//! deeper than JSON readers accept, holds itself, or grows past its size limit through such
//! references is refused.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use serde_json::{Map, Number, Value};

/// Lists, dicts and tuples nested deeper than this are refused: serde_json, which reads the
/// conf back, reads no deeper, and a conf needs nowhere near as deep.
const MAX_DEPTH: usize = 127;

/// What the decoded JSON may hold, counting one per value and one per byte of text: eight
/// times the pickle's length, and a MiB more. A pickle without references stays under its own
/// length; one whose references repeat a value past this is refused.
fn size_limit(pickle: &[u8]) -> usize {
    pickle.len().saturating_mul(8).saturating_add(1 << 20)
}

pub fn to_json(bytes: &[u8]) -> Result<Value, String> {
    let mut machine = Machine {
        bytes,
        at: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
    };
    let root = machine.run()?;
    let mut left = size_limit(bytes);
    json(&root, 0, &mut left)
}

/// A value on the pickle machine's stack or in its memo. Containers are shared, not copied:
/// a memo reference and the stack see the same list.
#[derive(Clone)]
enum Object {
    /// None, a boolean or a number.
    Scalar(Value),
    Text(Rc<str>),
    List(Items),
    /// Apart from a list so that nothing can be appended to it, as in Python.
    Tuple(Items),
    /// Key-value pairs as set; a later pair with the same key wins, as in Python.
    Dict(Rc<RefCell<Vec<(Object, Object)>>>),
}

type Items = Rc<RefCell<Vec<Object>>>;

fn items(values: Vec<Object>) -> Items {
    Rc::new(RefCell::new(values))
}

/// The JSON of `object`, spending `left` (see `size_limit`).
fn json(object: &Object, depth: usize, left: &mut usize) -> Result<Value, String> {
    if depth >= MAX_DEPTH {
        return Err(format!(
            "lists or dicts nested deeper than {MAX_DEPTH} levels, or one that holds itself"
        ));
    }
    let cost = match object {
        Object::Text(text) => text.len().saturating_add(1),
        _ => 1,
    };
    *left = left
        .checked_sub(cost)
        .ok_or("the pickle's references repeat values past eight times its size and a MiB")?;
    let array = |items: &[Object], left: &mut usize| {
        items
            .iter()
            .map(|item| json(item, depth + 1, left))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array)
    };
    match object {
        Object::Scalar(value) => Ok(value.clone()),
        Object::Text(text) => Ok(Value::String(text.to_string())),
        Object::List(list) | Object::Tuple(list) => array(&list.borrow(), left),
        Object::Dict(dict) => {
            let mut map = Map::new();
            for (key, value) in dict.borrow().iter() {
                let key = match json(key, depth + 1, left)? {
                    Value::String(text) => text,
                    other => other.to_string(),
                };
                map.insert(key, json(value, depth + 1, left)?);
            }
            Ok(Value::Object(map))
        }
    }
}

struct Machine<'a> {
    bytes: &'a [u8],
    at: usize,
    stack: Vec<Object>,
    /// Where each open MARK began on `stack`; ops other than the one closing it see only what
    /// lies above it, as Python's unpickler does.
    marks: Vec<usize>,
    memo: HashMap<usize, Object>,
}

impl Drop for Machine<'_> {
    /// Takes the objects apart one level at a time: a nested list dropped the usual way
    /// recurses once per level (a stack overflow for a hostile pickle), and one that holds
    /// itself would never be freed.
    fn drop(&mut self) {
        let mut pending: Vec<Object> = self.stack.drain(..).collect();
        pending.extend(self.memo.drain().map(|(_, object)| object));
        while let Some(object) = pending.pop() {
            match object {
                Object::List(list) | Object::Tuple(list) => pending.append(&mut list.borrow_mut()),
                Object::Dict(dict) => {
                    for (key, value) in dict.borrow_mut().drain(..) {
                        pending.extend([key, value]);
                    }
                }
                Object::Scalar(_) | Object::Text(_) => {}
            }
        }
    }
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
        let text = std::str::from_utf8(self.take(n)?).map_err(|_| "a string is not UTF-8")?;
        let text = Object::Text(text.into());
        self.stack.push(text);
        Ok(())
    }

    /// The bottom of the stack the next op sees: the last open MARK.
    fn floor(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    fn top(&self) -> Result<&Object, String> {
        match self.stack.get(self.floor()..).and_then(<[Object]>::last) {
            Some(object) => Ok(object),
            None => Err(format!(
                "nothing on the pickle's stack{} at byte {}",
                if self.marks.is_empty() {
                    ""
                } else {
                    " above its MARK"
                },
                self.at - 1
            )),
        }
    }

    fn pop(&mut self) -> Result<Object, String> {
        self.top()?;
        Ok(self.stack.pop().expect("above the floor"))
    }

    fn pop_mark(&mut self) -> Result<Vec<Object>, String> {
        let mark = self.marks.pop().ok_or("a MARK is missing")?;
        Ok(self.stack.split_off(mark))
    }

    fn set_items(&mut self, pairs: Vec<Object>) -> Result<(), String> {
        if !pairs.len().is_multiple_of(2) {
            return Err("SETITEMS with a key and no value".into());
        }
        let Object::Dict(dict) = self.top()? else {
            return Err("SETITEM outside a dict".into());
        };
        let mut dict = dict.borrow_mut();
        let mut pairs = pairs.into_iter();
        while let (Some(key), Some(value)) = (pairs.next(), pairs.next()) {
            dict.push((key, value));
        }
        Ok(())
    }

    fn append(&mut self, values: Vec<Object>) -> Result<(), String> {
        let Object::List(list) = self.top()? else {
            return Err("APPEND outside a list".into());
        };
        list.borrow_mut().extend(values);
        Ok(())
    }

    fn remember(&mut self, index: usize) -> Result<(), String> {
        let top = self.top()?.clone();
        self.memo.insert(index, top);
        Ok(())
    }

    fn recall(&mut self, index: usize) -> Result<(), String> {
        let object = self
            .memo
            .get(&index)
            .cloned()
            .ok_or("a memo reference is unknown")?;
        self.stack.push(object);
        Ok(())
    }

    fn push(&mut self, value: Value) {
        self.stack.push(Object::Scalar(value));
    }

    /// Runs the pickle to its STOP; the object it returns stays on the stack, so that it is
    /// taken apart with the rest.
    fn run(&mut self) -> Result<Object, String> {
        loop {
            let opcode = *self.take(1)?.first().expect("took one byte");
            match opcode {
                0x80 => {
                    self.take(1)?; // PROTO
                }
                0x95 => {
                    self.take(8)?; // FRAME
                }
                b'.' => return self.top().cloned(), // STOP
                b'}' => self
                    .stack
                    .push(Object::Dict(Rc::new(RefCell::new(Vec::new())))),
                b']' => self.stack.push(Object::List(items(Vec::new()))),
                b')' => self.stack.push(Object::Tuple(items(Vec::new()))),
                b'(' => self.marks.push(self.stack.len()),
                b'N' => self.push(Value::Null),
                0x88 => self.push(Value::Bool(true)),
                0x89 => self.push(Value::Bool(false)),
                b'J' => {
                    let bytes: [u8; 4] = self.take(4)?.try_into().expect("four bytes");
                    self.push(Value::from(i32::from_le_bytes(bytes)));
                }
                b'K' => {
                    let value = self.uint(1)?;
                    self.push(Value::from(value));
                }
                b'M' => {
                    let value = self.uint(2)?;
                    self.push(Value::from(value));
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
                    self.push(Value::from(value));
                }
                b'G' => {
                    let bytes: [u8; 8] = self.take(8)?.try_into().expect("eight bytes");
                    let value = f64::from_be_bytes(bytes);
                    let number = Number::from_f64(value).ok_or("a float that JSON cannot hold")?;
                    self.push(Value::Number(number));
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
                0x94 => self.remember(self.memo.len())?, // MEMOIZE
                b'q' | b'r' => {
                    // BINPUT, LONG_BINPUT: the top remembered under an index.
                    let index = self.uint(if opcode == b'q' { 1 } else { 4 })?;
                    self.remember(index)?;
                }
                b'h' | b'j' => {
                    // BINGET, LONG_BINGET
                    let index = self.uint(if opcode == b'h' { 1 } else { 4 })?;
                    self.recall(index)?;
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
                    self.stack.push(Object::Tuple(items(values)));
                }
                0x85..=0x87 => {
                    let n = usize::from(opcode - 0x84);
                    if self.stack.len() < self.floor() + n {
                        return Err("a tuple needs more items than the stack has".into());
                    }
                    let values = self.stack.split_off(self.stack.len() - n);
                    self.stack.push(Object::Tuple(items(values)));
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

    #[test]
    fn a_shared_list_is_the_same_list_at_every_reference() {
        // x = [1, 2]; pickle.dumps({"a": x, "b": x}, protocol=2), with BINPUT and BINGET: the
        // memo holds x before its items are appended.
        let protocol_2 =
            hex("80027d71002858010000006171015d7102284b014b026558010000006271036802752e");
        // The same with protocol=4, with MEMOIZE.
        let protocol_4 =
            hex("80049517000000000000007d94288c0161945d94284b014b02658c0162946802752e");
        for bytes in [protocol_2, protocol_4] {
            assert_eq!(
                to_json(&bytes).unwrap(),
                serde_json::json!({"a": [1, 2], "b": [1, 2]})
            );
        }
        // d = {"k": "v"}; pickle.dumps({"t": (d, d)}, protocol=4)
        let bytes = hex("80049517000000000000007d948c0174947d948c016b948c0176947368028694732e");
        assert_eq!(
            to_json(&bytes).unwrap(),
            serde_json::json!({"t": [{"k": "v"}, {"k": "v"}]})
        );
    }

    #[test]
    fn a_list_that_holds_itself_is_refused() {
        // l = []; l.append(l); pickle.dumps(l, protocol=4)
        let message = to_json(&hex("80049506000000000000005d946800612e")).unwrap_err();
        assert!(message.contains("holds itself"), "{message}");
    }

    #[test]
    fn nesting_deeper_than_json_is_refused_not_a_stack_overflow() {
        // `levels` lists, each appended to the one before.
        let nested = |levels: usize| {
            let mut bytes = vec![0x80, 4];
            bytes.extend(std::iter::repeat_n(b']', levels));
            bytes.extend(std::iter::repeat_n(b'a', levels - 1));
            bytes.push(b'.');
            to_json(&bytes)
        };
        // As deep as serde_json reads back is read; a level more is refused.
        let value = nested(127).unwrap();
        assert!(serde_json::from_str::<Value>(&value.to_string()).is_ok());
        assert!(nested(128).is_err());
        // Two hundred kilobytes that, decoded and dropped level by level, overflow the stack.
        let message = nested(100_000).unwrap_err();
        assert!(message.contains("deeper than 127"), "{message}");
    }

    #[test]
    fn references_that_multiply_a_value_are_refused() {
        // l0 = ["a"]; l(n+1) = [ln, ln]: each level two bytes of references, twice the value.
        let mut bytes = vec![0x80, 4, b']', 0x94, b'(', 0x8c, 1, b'a', b'e'];
        for level in 0..40u8 {
            bytes.extend([b']', b'(', b'h', level, b'h', level, b'e', 0x94]);
        }
        bytes.push(b'.');
        let message = to_json(&bytes).unwrap_err();
        assert!(message.contains("past eight times its size"), "{message}");
    }

    #[test]
    fn a_memo_index_far_away_allocates_nothing() {
        // LONG_BINPUT at index 2^32 - 1, then a reference to it.
        let bytes = [
            0x80, 4, b']', b'r', 0xff, 0xff, 0xff, 0xff, b'j', 0xff, 0xff, 0xff, 0xff, b'.',
        ];
        assert_eq!(to_json(&bytes).unwrap(), serde_json::json!([]));
    }

    #[test]
    fn ops_see_nothing_below_an_open_mark_and_items_come_in_pairs() {
        // Python refuses each: "unexpected MARK found", "odd number of items for SETITEMS".
        for pickle in [
            "80045d4b012861", /* ] K1 ( a */
            "80044b01282e",   /* K1 ( . */
        ] {
            let mut bytes = hex(pickle);
            bytes.push(b'.');
            assert!(to_json(&bytes).is_err(), "{pickle}");
        }
        let message = to_json(&hex("80047d284b01752e")).unwrap_err();
        assert!(message.contains("no value"), "{message}");
    }
}
