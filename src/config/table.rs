//! One TOML table read into typed parts, every error naming its line.
//!
//! A table such as `[provider]` holds keys of several kinds: those every provider has, those
//! of the listing API, and those of one pagination style. Each kind is a struct deriving
//! `Deserialize` with `deny_unknown_fields`. [`Table::take`] moves the keys a struct reads
//! (the field names its derive declares) out of the table and deserializes them with toml's
//! own deserializer, so a value of the wrong type is reported at its line. The keys no part
//! took are unknown or belong to another kind: [`Table::leftover`] names the first of them,
//! with its line.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use serde::de::Visitor;
use toml::Spanned;
use toml::de::{DeTable, DeValue, ValueDeserializer};

use crate::error::{Error, Result};

/// The file a table is in, for errors.
#[derive(Clone, Copy)]
pub struct Source<'i> {
    pub text: &'i str,
    pub path: &'i str,
}

impl Source<'_> {
    /// A toml error with the line its span starts on.
    pub fn toml_error(&self, err: &toml::de::Error) -> Error {
        let line = err
            .span()
            .map(|span| format!("line {}: ", self.line(span.start)))
            .unwrap_or_default();
        Error::config(self.path, format!("{line}{}", err.message()))
    }

    pub fn line(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())]
            .bytes()
            .filter(|b| *b == b'\n')
            .count()
            + 1
    }
}

/// A table being read: the keys not taken yet, and where every key was.
pub struct Table<'i> {
    /// How messages name the table: `[provider]`.
    pub name: String,
    source: Source<'i>,
    span: Range<usize>,
    keys: DeTable<'i>,
    /// Every key's line, taken or not.
    lines: BTreeMap<String, usize>,
}

impl<'i> Table<'i> {
    /// `value` read as the table `name` (`provider`, `provider.auth`).
    pub fn new(name: &str, value: Spanned<DeValue<'i>>, source: Source<'i>) -> Result<Table<'i>> {
        let span = value.span();
        let DeValue::Table(keys) = value.into_inner() else {
            return Err(Error::config(
                source.path,
                format!("line {}: `{name}` is not a table", source.line(span.start)),
            ));
        };
        let lines = keys
            .iter()
            .map(|(key, _)| (key.get_ref().to_string(), source.line(key.span().start)))
            .collect();
        Ok(Table {
            name: format!("[{name}]"),
            source,
            span,
            keys,
            lines,
        })
    }

    /// Moves out the keys `T` reads and deserializes them; absent keys are absent for `T`.
    pub fn take<T: Deserialize<'i>>(&mut self) -> Result<T> {
        let mut part = DeTable::new();
        for key in keys_of::<T>() {
            if let Some((key, value)) = self.keys.remove_entry(*key) {
                part.insert(key, value);
            }
        }
        T::deserialize(ValueDeserializer::from(Spanned::new(
            self.span.clone(),
            DeValue::Table(part),
        )))
        .map_err(|err| self.toml_error(&err))
    }

    /// The whole table as text values (`[provider.fields]`, `[provider.query]`).
    pub fn strings(&self) -> Result<BTreeMap<String, String>> {
        BTreeMap::deserialize(ValueDeserializer::from(Spanned::new(
            self.span.clone(),
            DeValue::Table(self.keys.clone()),
        )))
        .map_err(|err| self.toml_error(&err))
    }

    /// Moves out a sub-table (`auth` of `[provider]`), if the table has it.
    pub fn sub_table(&mut self, key: &str) -> Result<Option<Table<'i>>> {
        match self.keys.remove(key) {
            None => Ok(None),
            Some(value) => {
                let name = format!("{}.{key}", self.name.trim_matches(['[', ']']));
                Table::new(&name, value, self.source).map(Some)
            }
        }
    }

    /// The first key (in file order) no part has taken.
    pub fn leftover(&self) -> Option<&str> {
        self.keys
            .iter()
            .min_by_key(|(key, _)| key.span().start)
            .map(|(key, _)| key.get_ref().as_ref())
    }

    /// An error about `key`, at its line (the table's when the key is not in it).
    pub fn error(&self, key: &str, message: impl AsRef<str>) -> Error {
        let line = self
            .lines
            .get(key)
            .copied()
            .unwrap_or_else(|| self.source.line(self.span.start));
        Error::config(
            self.source.path,
            format!("line {line}: {} {}", self.name, message.as_ref()),
        )
    }

    fn toml_error(&self, err: &toml::de::Error) -> Error {
        let line = err.span().unwrap_or_else(|| self.span.clone()).start;
        Error::config(
            self.source.path,
            format!(
                "line {}: {} {}",
                self.source.line(line),
                self.name,
                err.message()
            ),
        )
    }
}

/// The keys a struct deriving `Deserialize` reads.
pub fn keys_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    declared::<T>()
}

/// The values an enum deriving `Deserialize` takes, as a config writes them (serde's renames
/// applied), in declaration order.
pub fn variants_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    declared::<T>()
}

/// The names serde's derive hands to `deserialize_struct` (a struct's fields) or
/// `deserialize_enum` (an enum's variants), where [`Names`] notes them and stops.
fn declared<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let names = Cell::new(&[][..]);
    let _ = T::deserialize(Names(&names));
    names.get()
}

/// A deserializer that only notes the names a derived struct or enum declares.
struct Names<'a>(&'a Cell<&'static [&'static str]>);

impl<'de> serde::Deserializer<'de> for Names<'_> {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Self::Error> {
        Err(serde::de::Error::custom("only a struct names its keys"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.set(fields);
        Err(serde::de::Error::custom("keys noted"))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.set(variants);
        Err(serde::de::Error::custom("variants noted"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map identifier
        ignored_any
    }
}

/// A value named by a tag key (`pagination = "page"`), read as the unit enum `T`: the
/// variants are serde's, and so is the message for a value that is none of them.
pub fn tag<'de, T: Deserialize<'de>>(text: &'de str) -> Result<T, String> {
    T::deserialize(serde::de::value::BorrowedStrDeserializer::<
        serde::de::value::Error,
    >::new(text))
    .map_err(|err| err.to_string())
}
