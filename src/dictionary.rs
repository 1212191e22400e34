//! Dictionary encoding: dense codes for the values an audit joins on.
//!
//! Preparing an audit joins its tables on text and on tuples: operation keys, object ids,
//! runs (`dag_id`, `run_id`), tries (the `TRY` columns), pipeline intervals, times to format.
//! Each such value is given a **code**: equal values get equal codes, counted from 0 in the
//! order first seen. Every later step is then an array lookup by code instead of a join.
//!
//! A [`Dictionary`] holds only the codes (four bytes each) in its hash table; the value a code
//! stands for stays where it lives (a frame's cells, or the strings encoded so far) and is read
//! back through a `value_of` function to check a probe. So the table stays small enough for
//! the cache to help, and no value is copied.
//!
//! **Guess before hashing.** Rows come in runs: a try's journal rows share their key, a run's
//! tries their interval, and the sources are read in much the same order (the journal as it
//! was written, the objects as they were created), so the next row's value is often the one
//! coded just before, or the one coded right after it. `encode` and `find` take that code as
//! a guess and compare the value with the guess and the code after it before hashing. A guess
//! counts only when its value is the value: the codes are the ones hashing gives, in any row
//! order.
//!
//! [`TextDictionary`] codes the cells of text columns (operation keys, object ids).

use std::hash::{BuildHasher, Hash};

use polars::prelude::{PlRandomState, StringChunked};

/// The code of a NULL cell in the code vectors of [`TextDictionary`].
pub const NULL: u32 = u32::MAX;

/// Dense codes for values that live elsewhere: see the module documentation.
#[derive(Default)]
pub struct Dictionary {
    table: hashbrown::HashTable<u32>,
    hasher: PlRandomState,
    len: u32,
}

/// What [`Dictionary::encode`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoded {
    /// The value had this code already.
    Known(u32),
    /// The value is new and gets this code (the dictionary's length before): the caller records
    /// that the code stands for it, so `value_of` can read it back from now on.
    New(u32),
}

impl Encoded {
    pub fn code(self) -> u32 {
        match self {
            Encoded::Known(code) | Encoded::New(code) => code,
        }
    }
}

impl Dictionary {
    pub fn with_capacity(capacity: usize) -> Dictionary {
        Dictionary {
            table: hashbrown::HashTable::with_capacity(capacity),
            hasher: PlRandomState::default(),
            len: 0,
        }
    }

    /// How many values have codes: every code is below it.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Makes room for `more` codes; `value_of` gives the value of each code already given.
    pub fn reserve<V: Hash>(&mut self, more: usize, value_of: impl Fn(u32) -> V) {
        let hasher = &self.hasher;
        self.table
            .reserve(more, |&code| hasher.hash_one(value_of(code)));
    }

    /// The guess (see the module documentation), if it or the code after it is `value`'s.
    #[inline]
    fn guessed<V: Eq>(
        &self,
        value: &V,
        guess: Option<u32>,
        value_of: &impl Fn(u32) -> V,
    ) -> Option<u32> {
        let guess = guess.filter(|&code| code < self.len)?;
        if value_of(guess) == *value {
            return Some(guess);
        }
        let next = guess + 1;
        (next < self.len && value_of(next) == *value).then_some(next)
    }

    /// The code of `value`, None if it has none. `guess`: the code the row before got.
    #[inline]
    pub fn find<V: Hash + Eq>(
        &self,
        value: V,
        guess: Option<u32>,
        value_of: impl Fn(u32) -> V,
    ) -> Option<u32> {
        if let Some(code) = self.guessed(&value, guess, &value_of) {
            return Some(code);
        }
        let hash = self.hasher.hash_one(&value);
        self.table
            .find(hash, |&code| value_of(code) == value)
            .copied()
    }

    /// The code of `value`, giving it the next code if it has none. `guess`: the code the row
    /// before got.
    #[inline]
    pub fn encode<V: Hash + Eq>(
        &mut self,
        value: V,
        guess: Option<u32>,
        value_of: impl Fn(u32) -> V,
    ) -> Encoded {
        if let Some(code) = self.guessed(&value, guess, &value_of) {
            return Encoded::Known(code);
        }
        let hash = self.hasher.hash_one(&value);
        if let Some(&code) = self.table.find(hash, |&code| value_of(code) == value) {
            return Encoded::Known(code);
        }
        let code = self.len;
        let hasher = &self.hasher;
        self.table
            .insert_unique(hash, code, |&code| hasher.hash_one(value_of(code)));
        self.len += 1;
        Encoded::New(code)
    }
}

/// Codes for small values that are cheap to copy (tuples of codes and integers: runs, tries,
/// intervals): each code's value is kept in an array here, so checking a probe reads one
/// packed entry instead of the frames the value came from.
pub struct CopiedDictionary<V> {
    dictionary: Dictionary,
    values: Vec<V>,
}

impl<V: Copy + Hash + Eq> CopiedDictionary<V> {
    pub fn with_capacity(capacity: usize) -> CopiedDictionary<V> {
        CopiedDictionary {
            dictionary: Dictionary::with_capacity(capacity),
            values: Vec::new(),
        }
    }

    /// The code of `value`, giving it the next code if it has none; `guess` as
    /// [`Dictionary::encode`] takes it.
    pub fn encode(&mut self, value: V, guess: Option<u32>) -> Encoded {
        let values = &self.values;
        let encoded = self
            .dictionary
            .encode(value, guess, |code| values[code as usize]);
        if let Encoded::New(_) = encoded {
            self.values.push(value);
        }
        encoded
    }

    /// The code of `value`, None if it has none.
    pub fn find(&self, value: V, guess: Option<u32>) -> Option<u32> {
        self.dictionary
            .find(value, guess, |code| self.values[code as usize])
    }

    /// How many values have codes: every code is below it.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// Codes for the cells of text columns: operation keys, object ids. The strings are borrowed
/// from the columns that first had them; one dictionary codes several columns alike, so a key
/// has the same code in the journal, the tries and the objects.
#[derive(Default)]
pub struct TextDictionary<'a> {
    dictionary: Dictionary,
    texts: Vec<&'a str>,
}

impl<'a> TextDictionary<'a> {
    /// The code of each cell ([`NULL`] for a NULL cell), giving new strings new codes.
    pub fn encode(&mut self, column: &'a StringChunked) -> Vec<u32> {
        let texts = &self.texts;
        self.dictionary
            .reserve(column.len(), |code| texts[code as usize]);
        self.encode_cells(column.iter())
    }

    /// `encode` for cells read any way (a column's chosen rows, say), in the order given.
    pub fn encode_cells(&mut self, cells: impl Iterator<Item = Option<&'a str>>) -> Vec<u32> {
        each_cell(cells, |text, guess| self.encode_one(text, guess))
    }

    /// `encode` for a column whose strings mostly have codes already: the cells are looked up
    /// on both cores first ([`crate::parallel::over_rows`]), and only the strings without a
    /// code are then coded, in the order of their cells, so the codes are the ones `encode`
    /// gives.
    pub fn encode_mostly_known(&mut self, column: &'a StringChunked) -> Vec<u32> {
        let this = &*self;
        let mut codes = crate::parallel::concat_rows(column.len(), |part| {
            this.find(&column.slice(part.start as i64, part.len()))
        });
        for (row, code) in codes.iter_mut().enumerate() {
            if *code == NULL
                && let Some(text) = column.get(row)
            {
                *code = self.encode_one(text, None);
            }
        }
        codes
    }

    /// The code of each cell; [`NULL`] for NULL cells and strings without a code.
    pub fn find(&self, column: &StringChunked) -> Vec<u32> {
        each_cell(column.iter(), |text, guess| {
            self.dictionary
                .find(text, guess, |code| self.texts[code as usize])
                .unwrap_or(NULL)
        })
    }

    /// The code of a string, None if it has none.
    pub fn code(&self, text: &str) -> Option<u32> {
        self.dictionary
            .find(text, None, |code| self.texts[code as usize])
    }

    /// The string a code stands for.
    pub fn text(&self, code: u32) -> &'a str {
        self.texts[code as usize]
    }

    /// How many strings have codes: every code is below it.
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    fn encode_one(&mut self, text: &'a str, guess: Option<u32>) -> u32 {
        let texts = &self.texts;
        let encoded = self
            .dictionary
            .encode(text, guess, |code| texts[code as usize]);
        if let Encoded::New(_) = encoded {
            self.texts.push(text);
        }
        encoded.code()
    }
}

/// `code` of each cell ([`NULL`] for NULL), given the code of the last cell coded as its guess.
fn each_cell<'c>(
    cells: impl Iterator<Item = Option<&'c str>>,
    mut code: impl FnMut(&'c str, Option<u32>) -> u32,
) -> Vec<u32> {
    let mut previous: Option<u32> = None;
    cells
        .map(|text| {
            let Some(text) = text else { return NULL };
            let known = code(text, previous);
            if known != NULL {
                previous = Some(known);
            }
            known
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(cells: &[Option<&str>]) -> StringChunked {
        cells.iter().copied().collect()
    }

    #[test]
    fn a_value_keeps_the_code_it_was_given_as_the_table_grows() {
        let values: Vec<String> = (0..10_000).map(|n| format!("key {n}")).collect();
        let mut dictionary = Dictionary::default();
        let mut coded: Vec<&str> = Vec::new();
        for value in &values {
            let value_of = |code: u32| coded[code as usize];
            let encoded = dictionary.encode(value.as_str(), None, value_of);
            assert_eq!(encoded, Encoded::New(coded.len() as u32));
            coded.push(value);
        }
        let value_of = |code: u32| coded[code as usize];
        assert_eq!(
            dictionary.encode("key 7", None, value_of),
            Encoded::Known(7)
        );
        assert_eq!(dictionary.find("key 9999", None, value_of), Some(9_999));
        assert_eq!(dictionary.find("key 10000", None, value_of), None);
        assert_eq!(dictionary.len(), 10_000);
    }

    #[test]
    fn a_wrong_guess_gives_the_code_hashing_gives() {
        let coded = ["a", "b", "c", "d"];
        let mut dictionary = Dictionary::default();
        for value in coded {
            dictionary.encode(value, None, |code| coded[code as usize]);
        }
        let value_of = |code: u32| coded[code as usize];
        // Right on the guess, right after it, far from it, and a guess past the end.
        assert_eq!(dictionary.find("b", Some(1), value_of), Some(1));
        assert_eq!(dictionary.find("c", Some(1), value_of), Some(2));
        assert_eq!(dictionary.find("a", Some(2), value_of), Some(0));
        assert_eq!(dictionary.find("d", Some(9), value_of), Some(3));
        assert_eq!(dictionary.find("e", Some(3), value_of), None);
    }

    #[test]
    fn copied_values_are_coded_in_first_seen_order() {
        let mut runs = CopiedDictionary::with_capacity(0);
        let codes: Vec<u32> = [(1, 7), (1, 7), (2, 7), (1, 8), (2, 7)]
            .into_iter()
            .map(|run| runs.encode(run, None).code())
            .collect();
        assert_eq!(codes, [0, 0, 1, 2, 1]);
        assert_eq!(runs.find((1, 8), Some(0)), Some(2));
        assert_eq!(runs.find((3, 3), None), None);
        assert_eq!(runs.len(), 3);
    }

    #[test]
    fn strings_are_coded_in_first_seen_order_across_columns() {
        let (journal, objects) = (
            column(&[Some("k1"), Some("k1"), None, Some("k2")]),
            column(&[Some("k2"), Some("k3"), None, Some("k1")]),
        );
        let mut codes = TextDictionary::default();
        assert_eq!(codes.encode(&journal), vec![0, 0, NULL, 1]);
        assert_eq!(codes.encode(&objects), vec![1, 2, NULL, 0]);
        assert_eq!(codes.code("k3"), Some(2));
        assert_eq!(codes.code("k4"), None);
        assert_eq!(codes.text(1), "k2");
        assert_eq!(
            codes.find(&column(&[Some("k4"), Some("k2")])),
            vec![NULL, 1]
        );
    }

    #[test]
    fn coding_mostly_known_strings_gives_the_codes_coding_gives() {
        let known = column(&[Some("a"), Some("b"), Some("c")]);
        // New strings in both halves, repeated, and NULLs: the halves are looked up apart.
        let tries = column(&[
            Some("b"),
            Some("x"),
            None,
            Some("a"),
            Some("y"),
            Some("x"),
            Some("c"),
            Some("z"),
            Some("y"),
        ]);
        let mut one_by_one = TextDictionary::default();
        one_by_one.encode(&known);
        let mut halves = TextDictionary::default();
        halves.encode(&known);
        assert_eq!(
            halves.encode_mostly_known(&tries),
            one_by_one.encode(&tries)
        );
        assert_eq!(halves.len(), 6);
        assert_eq!(halves.code("z"), one_by_one.code("z"));
    }
}
