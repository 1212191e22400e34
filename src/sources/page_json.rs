//! A provider page's JSON read in place: text without escapes is borrowed from the body, and an
//! object is the list of its entries. Reading a page this way costs a vector an object and
//! an array, instead of a tree node a key and a string a text as `serde_json::Value` does; the
//! few values the listing keeps are turned into `Value`s, and each listed object's text is
//! written as `Value` writes it (compact, keys in order) without a `Value` of it being built.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// A JSON value whose strings and keys borrow from the text they were read from, where they
/// can (those without escapes).
#[derive(Debug, Clone, PartialEq)]
pub enum Json<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    /// The entries in the order of the text. A key given more than once stands for its last
    /// value, as in a `Value`.
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

impl<'a> Json<'a> {
    /// Reads a whole JSON text (serde_json's parser: the same errors, numbers and nesting
    /// limit as `serde_json::from_slice::<Value>`).
    pub fn parse(text: &'a [u8]) -> serde_json::Result<Json<'a>> {
        serde_json::from_slice(text)
    }

    /// An object's value for `key` (its last, if the key repeats).
    pub fn member(&self, key: &str) -> Option<&Json<'a>> {
        match self {
            Json::Object(entries) => entries
                .iter()
                .rev()
                .find(|(name, _)| name == key)
                .map(|(_, value)| value),
            _ => None,
        }
    }

    /// An array's item at `index`.
    pub fn item(&self, index: usize) -> Option<&Json<'a>> {
        match self {
            Json::Array(items) => items.get(index),
            _ => None,
        }
    }

    /// The value as a `serde_json::Value`, equal to the one `serde_json` reads from the text.
    pub fn to_value(&self) -> Value {
        match self {
            Json::Null => Value::Null,
            Json::Bool(flag) => Value::Bool(*flag),
            Json::Number(number) => Value::Number(number.clone()),
            Json::String(text) => Value::String(text.to_string()),
            Json::Array(items) => Value::Array(items.iter().map(Json::to_value).collect()),
            Json::Object(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(key, value)| (key.to_string(), value.to_value()))
                    .collect::<Map<String, Value>>(),
            ),
        }
    }

    /// [`to_value`](Self::to_value) with the value at `path` (a list of member names and array
    /// indexes) turned into an empty array: the rest of a page, once its array of objects has
    /// been read on its own.
    pub fn to_value_without(&self, path: &[String]) -> Value {
        let Some((first, rest)) = path.split_first() else {
            return Value::Array(Vec::new());
        };
        match self {
            Json::Object(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(key, value)| {
                        let value = if key == first {
                            value.to_value_without(rest)
                        } else {
                            value.to_value()
                        };
                        (key.to_string(), value)
                    })
                    .collect::<Map<String, Value>>(),
            ),
            Json::Array(items) => {
                let index = first.parse::<usize>().ok();
                Value::Array(
                    items
                        .iter()
                        .enumerate()
                        .map(|(at, item)| match index == Some(at) {
                            true => item.to_value_without(rest),
                            false => item.to_value(),
                        })
                        .collect(),
                )
            }
            _ => self.to_value(),
        }
    }

    /// Appends the value's JSON text as `serde_json` writes the equal `Value`: compact, the
    /// keys of every object in order and each once (its last value), strings escaped alike.
    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            Json::Null => out.extend_from_slice(b"null"),
            Json::Bool(true) => out.extend_from_slice(b"true"),
            Json::Bool(false) => out.extend_from_slice(b"false"),
            Json::Number(number) => {
                serde_json::to_writer(&mut *out, number).expect("JSON writes to memory")
            }
            Json::String(text) => write_string(text, out),
            Json::Array(items) => {
                out.push(b'[');
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        out.push(b',');
                    }
                    item.write(out);
                }
                out.push(b']');
            }
            Json::Object(entries) => {
                out.push(b'{');
                let strictly_ordered = entries.windows(2).all(|pair| pair[0].0 < pair[1].0);
                if strictly_ordered {
                    for (index, (key, value)) in entries.iter().enumerate() {
                        write_entry(index, key, value, out);
                    }
                } else {
                    // The text's order is not the keys' order, or a key repeats: each key once,
                    // in order, with its last value.
                    let mut order: Vec<usize> = (0..entries.len()).collect();
                    order.sort_by(|&a, &b| entries[a].0.cmp(&entries[b].0).then(a.cmp(&b)));
                    let last_of_key = |position: usize| {
                        order
                            .get(position + 1)
                            .is_none_or(|&next| entries[next].0 != entries[order[position]].0)
                    };
                    let mut written = 0;
                    for position in 0..order.len() {
                        if last_of_key(position) {
                            let (key, value) = &entries[order[position]];
                            write_entry(written, key, value, out);
                            written += 1;
                        }
                    }
                }
                out.push(b'}');
            }
        }
    }
}

fn write_entry(index: usize, key: &str, value: &Json<'_>, out: &mut Vec<u8>) {
    if index > 0 {
        out.push(b',');
    }
    write_string(key, out);
    out.push(b':');
    value.write(out);
}

/// A string as serde_json writes it. Text that needs no escape (all text borrowed from a
/// JSON body: a quote, a backslash or a control character there is written escaped) is
/// copied as it is.
fn write_string(text: &str, out: &mut Vec<u8>) {
    let plain = !text
        .bytes()
        .any(|byte| byte < 0x20 || byte == b'"' || byte == b'\\');
    if plain {
        out.reserve(text.len() + 2);
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, text).expect("JSON writes to memory");
    }
}

impl<'de> Deserialize<'de> for Json<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json<'de>, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Json<'de>, E> {
        Ok(Json::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Json<'de>, E> {
        Ok(Json::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Json<'de>, E> {
        Ok(Json::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Json<'de>, E> {
        // As `Value` reads it: a number JSON cannot hold is null.
        Ok(Number::from_f64(value).map_or(Json::Null, Json::Number))
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Borrowed(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(value.to_string())))
    }

    fn visit_string<E>(self, value: String) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(value)))
    }

    fn visit_none<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_unit<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Json<'de>, D::Error> {
        Json::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'de>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
        while let Some(Key(key)) = map.next_key()? {
            entries.push((key, map.next_value()?));
        }
        Ok(Json::Object(entries))
    }
}

/// An object's key, borrowed from the text when it has no escapes (serde's own `Cow<str>`
/// always copies).
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Key<'de>, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }

            fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(value)))
            }

            fn visit_str<E>(self, value: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(value.to_string())))
            }

            fn visit_string<E>(self, value: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(value)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text and the `Value` of every sample are those serde_json gives.
    #[test]
    fn reads_and_writes_as_serde_json_does() {
        let samples = [
            r#"{"b":1,"a":[true,false,null],"c":{"z":"x","y":"\u00e9\"\\\n\/"}}"#,
            r#"{"a":1,"a":2,"b":{"k":1,"k":"last"}}"#,
            r#"[1.0,-0.0,1e300,12345678901234567890,-9223372036854775808,0.1,1E2,1.5e-7]"#,
            r#"{"id":"exp_1","created":1700000000,"metadata":{"interval_start":"2024-01-01T00:00:00Z"}}"#,
            r#"  "text"  "#,
            r#"{}"#,
            r#"[]"#,
        ];
        for text in samples {
            let value: Value = serde_json::from_str(text).unwrap();
            let json = Json::parse(text.as_bytes()).unwrap();
            assert_eq!(json.to_value(), value, "{text}");
            let mut written = Vec::new();
            json.write(&mut written);
            assert_eq!(
                String::from_utf8(written).unwrap(),
                value.to_string(),
                "{text}"
            );
        }
    }

    #[test]
    fn members_are_the_last_of_their_key_and_paths_can_be_left_out() {
        let text = br#"{"data":[{"id":1}],"meta":{"n":1,"n":2},"list":[{"x":1},{"x":2}]}"#;
        let json = Json::parse(text).unwrap();
        assert_eq!(
            json.member("meta").unwrap().member("n").unwrap().to_value(),
            2
        );
        assert_eq!(
            json.member("list").unwrap().item(1).unwrap().to_value()["x"],
            2
        );
        let rest = json.to_value_without(&["data".to_string()]);
        assert_eq!(
            rest,
            serde_json::json!({"data": [], "meta": {"n": 2}, "list": [{"x": 1}, {"x": 2}]})
        );
        let rest = json.to_value_without(&["list".to_string(), "0".to_string()]);
        assert_eq!(rest["list"], serde_json::json!([[], {"x": 2}]));
    }

    #[test]
    fn refuses_what_serde_json_refuses() {
        for text in [
            &b"{\"a\":}"[..],
            b"[1,",
            b"\"\x01\"",
            b"{\"a\":1} x",
            b"\xff",
        ] {
            assert_eq!(
                Json::parse(text).unwrap_err().to_string(),
                serde_json::from_slice::<Value>(text)
                    .unwrap_err()
                    .to_string()
            );
        }
    }
}
