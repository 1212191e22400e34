//! Dictionary encoding: dense codes for the values an audit joins on.
//!
//! Preparing an audit joins its tables on text and on tuples: operation keys, object ids,
//! runs (`dag_id`, `run_id`), tries (the `TRY` columns), pipeline intervals, times to format.
//! Each such value is given a **code**: equal values get equal codes, counted from 0 in the
//! order first seen. Every later step is then an array lookup by code instead of a join.
//!
//! A [`Dictionary`] holds only the codes in its hash table (four bytes each, with four of the
//! value's hash beside them, so a probe reads one cache line); the value a code stands for
//! stays where it lives (a frame's cells, or the strings encoded so far) and is read back
//! through a `value_of` function to check a probe. So the table stays small enough for the
//! cache to help, and no value is copied.
//!
//! **Guess before hashing.** Rows come in runs: a try's journal rows share their key, a run's
//! tries their interval, and the sources are read in much the same order (the journal as it
//! was written, the objects as they were created), so the next row's value is often the one
//! coded just before, or the one coded right after it. `encode` and `find` take that code as
//! a guess and compare the value with the guess and the code after it before hashing. A guess
//! counts only when its value is the value: the codes are the ones hashing gives, in any row
//! order.
//!
//! **Ask for memory ahead when rows come in no order.** Then a guess misses, and coding a value
//! waits on memory the cache does not hold. [`Dictionary::encode_all`] codes many values at
//! once, asking for the memory of the values a few rows on while it codes this one;
//! [`TextDictionary::encode`] uses it for a column whose first cells show no order.
//!
//! [`TextDictionary`] codes the cells of text columns (operation keys, object ids).

use std::hash::{BuildHasher, Hash};

use polars::prelude::{PlRandomState, StringChunked};

use crate::cells::Runs;

use crate::ahead::{FAR, NEAR, prefetch};

/// The code of a NULL cell in the code vectors of [`TextDictionary`].
pub const NULL: u32 = u32::MAX;

/// Dense codes for values that live elsewhere: see the module documentation.
///
/// The table is open addressing with linear probing: a slot holds a value's code and the high
/// 32 bits of its hash (the tag, never 0; 0 marks an empty slot), at the slot the hash's
/// highest bits name (its home) or the first free one after it. At most three quarters of the
/// slots are used. The home is read off the tag, so the table grows without the
/// values being read again.
#[derive(Default)]
pub struct Dictionary {
    slots: Vec<Slot>,
    hasher: PlRandomState,
    len: u32,
}

#[derive(Clone, Copy, Default)]
struct Slot {
    tag: u32,
    code: u32,
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

/// The tag a hash leaves in its slot: its high half, never 0.
#[inline]
fn tag(hash: u64) -> u32 {
    (hash >> 32) as u32 | 1
}

impl Dictionary {
    pub fn with_capacity(capacity: usize) -> Dictionary {
        Dictionary {
            slots: vec![Slot::default(); Self::slots_for(capacity)],
            hasher: PlRandomState::default(),
            len: 0,
        }
    }

    /// The slots a table of `values` values needs: a power of two, at most three quarters used.
    fn slots_for(values: usize) -> usize {
        if values == 0 {
            0
        } else {
            (values + values / 3 + 1).next_power_of_two().max(8)
        }
    }

    /// How many values have codes: every code is below it.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Moves every code into a table of `slots` slots, each to its home there (from its tag):
    /// the table grows (doubling) without reading a value, in one pass over the slots.
    fn resize(&mut self, slots: usize) {
        let mut table = vec![Slot::default(); slots];
        let (mask, shift) = (slots - 1, 32 - slots.trailing_zeros());
        for slot in self.slots.iter().filter(|slot| slot.tag != 0) {
            let mut at = (slot.tag >> shift) as usize;
            while table[at].tag != 0 {
                at = (at + 1) & mask;
            }
            table[at] = *slot;
        }
        self.slots = table;
    }

    /// The slot where the value with hash `hash` is looked for first: the hash's highest bits.
    #[inline]
    fn home(&self, hash: u64) -> usize {
        (hash >> (64 - self.slots.len().trailing_zeros())) as usize
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

    /// The code of `value` (whose hash is `hash`) if it has one, else the slot where it would
    /// go.
    #[inline]
    fn probe<V: Eq>(
        &self,
        value: &V,
        hash: u64,
        value_of: &impl Fn(u32) -> V,
    ) -> Result<u32, usize> {
        let mask = self.slots.len() - 1;
        let tag = tag(hash);
        let mut at = self.home(hash);
        loop {
            let slot = self.slots[at];
            if slot.tag == 0 {
                return Err(at);
            }
            if slot.tag == tag && value_of(slot.code) == *value {
                return Ok(slot.code);
            }
            at = (at + 1) & mask;
        }
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
        self.lookup(&value, hash, &value_of)
    }

    /// The code of `value` (whose hash is `hash`), None if it has none.
    #[inline]
    fn lookup<V: Eq>(&self, value: &V, hash: u64, value_of: &impl Fn(u32) -> V) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        self.probe(value, hash, value_of).ok()
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
        self.encode_hashed(value, hash, value_of)
    }

    /// [`encode`](Self::encode) for a value whose hash is known, without a guess.
    #[inline]
    fn encode_hashed<V: Hash + Eq>(
        &mut self,
        value: V,
        hash: u64,
        value_of: impl Fn(u32) -> V,
    ) -> Encoded {
        if (self.len() + 1) * 4 > self.slots.len() * 3 {
            self.resize(Self::slots_for(self.len() * 2 + 8));
        }
        match self.probe(&value, hash, &value_of) {
            Ok(code) => Encoded::Known(code),
            Err(at) => {
                let code = self.len;
                self.slots[at] = Slot {
                    tag: tag(hash),
                    code,
                };
                self.len += 1;
                Encoded::New(code)
            }
        }
    }

    /// [`encode`](Self::encode) for many values in turn (None: a NULL, coded [`NULL`]; about
    /// `count` of them). `coded` keeps the value of each code, and is given each value that
    /// gets a new code, with its place among `values`. The codes are the ones coding the
    /// values one by one gives.
    ///
    /// The first values (`Sample::SIZE` of them) are coded one by one with guesses; the table
    /// then makes room for as many new values among the rest as the sample had. Where those
    /// that had codes mostly had the one guessed (the values come in runs, in order), the
    /// others are coded with guesses too, asking ahead for the memory of the values that are
    /// not the one before them (new ones, mostly); else (they come in no order, or are all
    /// new, where a guess cannot help) every one is coded asking for its memory ahead
    /// (`Ahead`).
    pub fn encode_all<V: Hash + Eq + Copy>(
        &mut self,
        values: impl Iterator<Item = Option<V>>,
        count: usize,
        coded: &mut impl Coded<V>,
    ) -> Vec<u32> {
        let mut values = values.enumerate();
        let mut codes = Vec::with_capacity(count);
        let mut sample = Sample::default();
        for (at, value) in values.by_ref() {
            match value {
                None => codes.push(NULL),
                Some(value) => {
                    let encoded = self.encode(value, sample.guess, |code| coded.value(code));
                    if let Encoded::New(_) = encoded {
                        coded.add(value, at);
                    }
                    sample.saw(encoded);
                    codes.push(encoded.code());
                }
            }
            if at + 1 == Sample::SIZE {
                break;
            }
        }
        if codes.len() < Sample::SIZE {
            return codes;
        }
        self.reserve(sample.new_among(count.saturating_sub(Sample::SIZE)));
        let in_order = sample.in_order();
        let mut rest = Ahead::new(values, in_order);
        let mut guess = sample.guess;
        while let Some((at, value, hash)) = rest.next(self, coded) {
            let Some(value) = value else {
                codes.push(NULL);
                continue;
            };
            let encoded = match hash {
                // The value of the one before: its code.
                Hashed::Repeat => Encoded::Known(guess.expect("a value came before")),
                Hashed::Hash(hash) => match in_order
                    .then(|| self.guessed(&value, guess, &|code| coded.value(code)))
                    .flatten()
                {
                    Some(code) => Encoded::Known(code),
                    None => self.encode_hashed(value, hash, |code| coded.value(code)),
                },
            };
            if let Encoded::New(_) = encoded {
                coded.add(value, at);
            }
            guess = Some(encoded.code());
            codes.push(encoded.code());
        }
        codes
    }

    /// Makes room for `more` new values, so that coding them does not grow the table step by
    /// step (each step moves every code once more).
    fn reserve(&mut self, more: usize) {
        let slots = Self::slots_for(self.len() + more);
        if slots > self.slots.len() {
            self.resize(slots);
        }
    }

    /// [`find`](Self::find) for many values in turn: each one's code, [`NULL`] for a NULL and
    /// for a value without a code; like [`encode_all`](Self::encode_all), by guesses or asking
    /// for memory ahead.
    pub fn find_all<V: Hash + Eq + Copy>(
        &self,
        values: impl Iterator<Item = Option<V>>,
        count: usize,
        coded: &impl Values<V>,
    ) -> Vec<u32> {
        let value_of = |code: u32| coded.value(code);
        let mut values = values.enumerate();
        let mut codes = Vec::with_capacity(count);
        let mut sample = Sample::default();
        for (at, value) in values.by_ref() {
            let found = value.and_then(|value| self.find(value, sample.guess, value_of));
            if let Some(code) = found {
                sample.saw(Encoded::Known(code));
            }
            codes.push(found.unwrap_or(NULL));
            if at + 1 == Sample::SIZE {
                break;
            }
        }
        if codes.len() < Sample::SIZE {
            return codes;
        }
        let in_order = sample.in_order();
        let mut rest = Ahead::new(values, in_order);
        let mut guess = sample.guess;
        // What the last value that was not NULL was found as (`Hashed::Repeat` follows one).
        let mut last: Option<u32> = None;
        while let Some((_, value, hash)) = rest.next(self, coded) {
            let Some(value) = value else {
                codes.push(NULL);
                continue;
            };
            let found = match hash {
                // The value of the one before, found or not: what it was.
                Hashed::Repeat => last.filter(|&code| code != NULL),
                Hashed::Hash(hash) => in_order
                    .then(|| self.guessed(&value, guess, &value_of))
                    .flatten()
                    .or_else(|| self.lookup(&value, hash, &value_of)),
            };
            if found.is_some() {
                guess = found;
            }
            let code = found.unwrap_or(NULL);
            last = Some(code);
            codes.push(code);
        }
        codes
    }

    /// Asks for the slot of the hash at `far`, and for the value of the code in the slot of
    /// the hash at `near` ([`Values::ask`]).
    #[inline]
    fn ask<V>(&self, far: Option<&u64>, near: Option<&u64>, coded: &impl Values<V>) {
        if self.slots.is_empty() {
            return;
        }
        if let Some(&hash) = far {
            prefetch(&self.slots[self.home(hash)]);
        }
        if let Some(&hash) = near {
            let slot = self.slots[self.home(hash)];
            if slot.tag == tag(hash) {
                coded.ask(slot.code);
            }
        }
    }
}

/// The values [`Dictionary::encode_all`] and [`Dictionary::find_all`] code asking ahead, read
/// in blocks of [`BLOCK`](Self::BLOCK) with their hashes.
///
/// Coding or finding values that the cache does not hold waits on memory: a value's slot, then
/// the value of the code there. One value after another, the processor would wait for each in
/// turn. So as each value is given out, the slot of the value [`FAR`] on is asked for, and the
/// value of the code in the slot of the one [`NEAR`] on: by the time those are coded, their
/// memory is mostly in the cache.
///
/// Values in runs (`repeats`) are not hashed where they are the value before them
/// ([`Hashed::Repeat`]): that value's code is theirs, and only the others are asked for.
struct Ahead<V, I> {
    values: I,
    block: Vec<(usize, Option<V>)>,
    hashes: Vec<Hashed>,
    next: usize,
    repeats: bool,
    /// The last value (not NULL) read, for `repeats`.
    last: Option<V>,
}

/// A value as [`Ahead`] gives it out.
#[derive(Clone, Copy)]
enum Hashed {
    Hash(u64),
    /// The value (not NULL) before it, not NULL, is the same.
    Repeat,
}

impl<V: Hash + Copy + Eq, I: Iterator<Item = (usize, Option<V>)>> Ahead<V, I> {
    const BLOCK: usize = 4096;

    fn new(values: I, repeats: bool) -> Ahead<V, I> {
        Ahead {
            values,
            block: Vec::with_capacity(Self::BLOCK),
            hashes: Vec::with_capacity(Self::BLOCK),
            next: 0,
            repeats,
            last: None,
        }
    }

    /// The next value, with its place among the values and how it is hashed (a hash of 0 for
    /// None), after asking `dictionary` for the memory of the values ahead of it.
    fn next(
        &mut self,
        dictionary: &Dictionary,
        coded: &impl Values<V>,
    ) -> Option<(usize, Option<V>, Hashed)> {
        if self.next == self.block.len() {
            self.block.clear();
            self.block.extend(self.values.by_ref().take(Self::BLOCK));
            self.hashes.clear();
            for (_, value) in &self.block {
                let hashed = match value {
                    None => Hashed::Hash(0),
                    Some(value) if self.repeats && self.last.as_ref() == Some(value) => {
                        Hashed::Repeat
                    }
                    Some(value) => {
                        self.last = Some(*value);
                        Hashed::Hash(dictionary.hasher.hash_one(value))
                    }
                };
                self.hashes.push(hashed);
            }
            self.next = 0;
        }
        let at = self.next;
        let &(place, value) = self.block.get(at)?;
        let hash = |at: usize| match self.hashes.get(at) {
            Some(Hashed::Hash(hash)) => Some(hash),
            _ => None,
        };
        dictionary.ask(hash(at + FAR), hash(at + NEAR), coded);
        self.next += 1;
        Some((place, value, self.hashes[at]))
    }
}

/// What the first values coded in turn say of their order (see [`Dictionary::encode_all`]).
#[derive(Default)]
struct Sample {
    /// The code of the last value with one: the next value's guess.
    guess: Option<u32>,
    /// Values that had a code, and had the one guessed (or the one after it).
    guessed: usize,
    /// Values that had a code, and not the one guessed.
    hashed: usize,
    /// Values that were given a new code.
    new: usize,
}

impl Sample {
    /// Records a value's code.
    fn saw(&mut self, encoded: Encoded) {
        match encoded {
            Encoded::Known(code)
                if self
                    .guess
                    .is_some_and(|guess| code == guess || code == guess + 1) =>
            {
                self.guessed += 1
            }
            Encoded::Known(_) => self.hashed += 1,
            Encoded::New(_) => self.new += 1,
        }
        self.guess = Some(encoded.code());
    }

    /// How many values [`Dictionary::encode_all`] and [`Dictionary::find_all`] code one by one
    /// before they choose how to code the others.
    const SIZE: usize = 4096;

    fn in_order(&self) -> bool {
        self.guessed > self.hashed
    }

    /// How many of `rest` values more are new, if they are new as often as the sample's.
    fn new_among(&self, rest: usize) -> usize {
        rest / Self::SIZE * self.new + rest % Self::SIZE * self.new / Self::SIZE
    }
}

/// Where the values of a dictionary's codes are kept, for [`Dictionary::find_all`].
pub trait Values<V> {
    /// The value of `code`.
    fn value(&self, code: u32) -> V;
    /// Asks for the memory that reading the value of `code` will need ([`prefetch`]); a code
    /// the values do not have yet asks for nothing.
    fn ask(&self, code: u32);
}

/// [`Values`] that new codes' values are added to, for [`Dictionary::encode_all`].
pub trait Coded<V>: Values<V> {
    /// Keeps `value` as the value of the next code; `at`: its place among the values coded.
    fn add(&mut self, value: V, at: usize);
}

/// Values kept in a vector, by code.
impl<V: Copy> Values<V> for Vec<V> {
    fn value(&self, code: u32) -> V {
        self[code as usize]
    }

    fn ask(&self, code: u32) {
        if let Some(value) = self.get(code as usize) {
            prefetch(value);
        }
    }
}

impl<V: Copy> Coded<V> for Vec<V> {
    fn add(&mut self, value: V, _at: usize) {
        self.push(value);
    }
}

/// Strings borrowed from the columns that first had them, by code: asking for one asks for
/// its bytes.
struct Texts<T>(T);

impl<'a, 'c, T: std::ops::Deref<Target = Vec<&'a str>>> Values<&'c str> for Texts<T>
where
    'a: 'c,
{
    fn value(&self, code: u32) -> &'c str {
        self.0[code as usize]
    }

    fn ask(&self, code: u32) {
        if let Some(text) = self.0.get(code as usize) {
            prefetch(text.as_ptr());
        }
    }
}

impl<'a> Coded<&'a str> for Texts<&mut Vec<&'a str>> {
    fn add(&mut self, text: &'a str, _at: usize) {
        self.0.push(text);
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

    /// [`encode`](Self::encode) for many values in turn ([`Dictionary::encode_all`]), about
    /// `count` of them; None codes as [`NULL`].
    pub fn encode_all(
        &mut self,
        values: impl Iterator<Item = Option<V>>,
        count: usize,
    ) -> Vec<u32> {
        self.dictionary.encode_all(values, count, &mut self.values)
    }

    /// [`find`](Self::find) for many values in turn ([`Dictionary::find_all`]): [`NULL`] for
    /// None and for a value without a code.
    pub fn find_all(&self, values: impl Iterator<Item = Option<V>>, count: usize) -> Vec<u32> {
        self.dictionary.find_all(values, count, &self.values)
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
    /// The code of each cell ([`NULL`] for a NULL cell), giving new strings new codes
    /// ([`Dictionary::encode_all`]: by guesses where the cells come in order, else asking for
    /// their memory ahead).
    pub fn encode(&mut self, column: &'a StringChunked) -> Vec<u32> {
        if let Some(runs) = Runs::of(&[column]) {
            // Runs are of a column in one array (`Runs::of`), read here without a chunk lookup.
            let array = column.downcast_as_array();
            let cells = runs.starts().iter().map(|&row| array.get(row as usize));
            let codes = self.encode_all(cells, runs.count());
            return runs.spread(&codes);
        }
        self.encode_all(column.iter(), column.len())
    }

    /// `encode` for cells read from anywhere (`count` of them, about), in the order given:
    /// as [`Dictionary::encode_all`] codes them, by guesses or asking for their memory ahead.
    pub fn encode_all(
        &mut self,
        cells: impl Iterator<Item = Option<&'a str>>,
        count: usize,
    ) -> Vec<u32> {
        self.dictionary
            .encode_all(cells, count, &mut Texts(&mut self.texts))
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

    /// The code of each cell; [`NULL`] for NULL cells and strings without a code
    /// ([`Dictionary::find_all`]: by guesses where the cells come in order, else asking for
    /// their memory ahead).
    pub fn find(&self, column: &StringChunked) -> Vec<u32> {
        if let Some(runs) = Runs::of(&[column]) {
            // Runs are of a column in one array (`Runs::of`), read here without a chunk lookup.
            let array = column.downcast_as_array();
            let cells = runs.starts().iter().map(|&row| array.get(row as usize));
            let codes = self
                .dictionary
                .find_all(cells, runs.count(), &Texts(&self.texts));
            return runs.spread(&codes);
        }
        self.dictionary
            .find_all(column.iter(), column.len(), &Texts(&self.texts))
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
    use polars::prelude::ChunkTake as _;

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

    /// Cells in no order: `count` cells of `distinct` strings, some NULL, shuffled.
    fn disordered(count: usize, distinct: usize) -> Vec<Option<String>> {
        (crate::testing::scrambled(count, 0x9e37_79b9_7f4a_7c15).into_iter())
            .map(|n| n % (distinct + distinct / 10))
            .map(|n| (n < distinct).then(|| format!("key {n}")))
            .collect()
    }

    #[test]
    fn coding_all_at_once_gives_the_codes_of_coding_one_by_one() {
        let cells = disordered(30_000, 8_000);
        let known: Vec<String> = (0..500).map(|n| format!("key {}", n * 3)).collect();
        // Both dictionaries start with codes for some of the strings.
        let (mut one_by_one, mut all_at_once) = (Dictionary::default(), Dictionary::default());
        let (mut coded_one, mut coded_all): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
        for value in &known {
            one_by_one.encode(value.as_str(), None, |code| coded_one[code as usize]);
            coded_one.push(value);
            all_at_once.encode(value.as_str(), None, |code| coded_all[code as usize]);
            coded_all.push(value);
        }
        let expected: Vec<u32> = cells
            .iter()
            .map(|cell| match cell {
                None => NULL,
                Some(value) => {
                    let encoded =
                        one_by_one.encode(value.as_str(), None, |code| coded_one[code as usize]);
                    if let Encoded::New(_) = encoded {
                        coded_one.push(value);
                    }
                    encoded.code()
                }
            })
            .collect();
        let values = cells.iter().map(Option::as_deref);
        let codes = all_at_once.encode_all(values, cells.len(), &mut Texts(&mut coded_all));
        assert_eq!(codes, expected);
        assert_eq!(coded_all, coded_one);
        assert_eq!(all_at_once.len(), one_by_one.len());
        // The table still finds every value, and only those.
        for (code, value) in coded_all.iter().enumerate() {
            let found = all_at_once.find(*value, None, |code| coded_all[code as usize]);
            assert_eq!(found, Some(code as u32));
        }
        assert_eq!(
            all_at_once.find("key 8001", None, |code| coded_all[code as usize]),
            None
        );
    }

    #[test]
    fn a_column_in_no_order_is_coded_as_its_cells_one_by_one() {
        let cells = disordered(20_000, 6_000);
        let column: StringChunked = cells.iter().map(Option::as_deref).collect();
        let known = column_of(&["key 5", "key 17"]);
        let mut whole = TextDictionary::default();
        whole.encode(&known);
        let mut each = TextDictionary::default();
        each.encode(&known);
        let expected = each.encode_cells(column.iter());
        assert_eq!(whole.encode(&column), expected);
        assert_eq!(whole.len(), each.len());
        assert_eq!(whole.code("key 17"), Some(1));
        assert_eq!(
            whole.text(whole.len() as u32 - 1),
            each.text(each.len() as u32 - 1)
        );
    }

    fn column_of(cells: &[&str]) -> StringChunked {
        cells.iter().copied().map(Some).collect()
    }

    #[test]
    fn tuples_are_coded_and_found_all_at_once_as_one_by_one() {
        // Runs of a value (in order), then the same values in no order.
        let in_order: Vec<Option<(u32, i64)>> = (0..12_000)
            .map(|row| (row % 7 != 0).then_some((row / 3, row as i64 / 3)))
            .collect();
        let mut shuffled = in_order.clone();
        let mut state = 7_u64;
        for row in (1..shuffled.len()).rev() {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            shuffled.swap(row, (state >> 33) as usize % (row + 1));
        }
        for values in [&in_order, &shuffled] {
            let mut all = CopiedDictionary::with_capacity(0);
            let mut each = CopiedDictionary::with_capacity(0);
            let codes = all.encode_all(values.iter().copied(), values.len());
            let expected: Vec<u32> = values
                .iter()
                .map(|value| value.map_or(NULL, |value| each.encode(value, None).code()))
                .collect();
            assert_eq!(codes, expected);
            // Found again, and values without a code are NULL.
            let mut asked = values.clone();
            asked.push(Some((99_999, 0)));
            let mut found = expected.clone();
            found.push(NULL);
            assert_eq!(all.find_all(asked.iter().copied(), asked.len()), found);
        }
    }

    /// Values in runs, in order, past the sample: each run's value is hashed once, and the
    /// codes (found or not, a NULL between two cells of a run) are those of one by one.
    #[test]
    fn runs_past_the_sample_are_coded_and_found_as_one_by_one() {
        let cells: Vec<Option<String>> = (0..20_000)
            .map(|row| match row % 11 {
                3 => None,
                _ => Some(format!("key {}", row / 4)),
            })
            .collect();
        let values = || cells.iter().map(Option::as_deref);
        let column: StringChunked = values().collect();
        let mut all = TextDictionary::default();
        let codes = all.encode(&column);
        let mut each = TextDictionary::default();
        assert_eq!(codes, each.encode_cells(values()));
        assert_eq!(all.len(), 5_000);
        // Found again, with runs of values that have no code among them.
        let asked: Vec<Option<String>> = cells
            .iter()
            .enumerate()
            .map(|(row, cell)| match row % 40 < 8 {
                true => Some(format!("other {}", row / 4)),
                false => cell.clone(),
            })
            .collect();
        let asked_values = || asked.iter().map(Option::as_deref);
        let expected: Vec<u32> = asked_values()
            .map(|cell| cell.and_then(|text| all.code(text)).unwrap_or(NULL))
            .collect();
        let asked_column: StringChunked = asked_values().collect();
        assert_eq!(all.find(&asked_column), expected);
        assert!(expected.contains(&NULL) && expected.iter().any(|&code| code != NULL));
    }

    /// Cells that share their views (a string a Parquet dictionary held once, gathered to many
    /// rows), NULLs beside empty strings (their views are alike), long and short strings: coded
    /// and found run by run as one by one.
    #[test]
    fn runs_of_one_view_are_coded_as_their_cells() {
        let distinct: StringChunked = [
            Some("a key long enough not to be inline, one"),
            Some(""),
            None,
            Some("short"),
            Some("a key long enough not to be inline, two"),
        ]
        .into_iter()
        .collect();
        let rows: Vec<polars::prelude::IdxSize> =
            (0..30_000u32).map(|row| (row / 5 + row / 7) % 5).collect();
        let column = distinct
            .take(&polars::prelude::IdxCa::from_vec("rows".into(), rows))
            .unwrap();
        assert!(Runs::of(&[&column]).is_some_and(|runs| runs.count() < column.len() / 2));
        let known = column_of(&["short"]);
        let (mut whole, mut each) = (TextDictionary::default(), TextDictionary::default());
        whole.encode(&known);
        each.encode(&known);
        let codes = whole.encode(&column);
        assert_eq!(codes, each.encode_cells(column.iter()));
        assert_eq!(whole.len(), 4);
        let expected: Vec<u32> = column
            .iter()
            .map(|cell| cell.and_then(|text| each.code(text)).unwrap_or(NULL))
            .collect();
        let some = column_of(&["", "short"]);
        let mut fresh = TextDictionary::default();
        fresh.encode(&some);
        assert_eq!(
            fresh.find(&column),
            column
                .iter()
                .map(|cell| cell.and_then(|text| fresh.code(text)).unwrap_or(NULL))
                .collect::<Vec<_>>()
        );
        assert_eq!(whole.find(&column), expected);
    }

    /// The choice between guessing and asking ahead: runs of a value, and new values coded in
    /// order, are in order; values that had codes far from the guess are not.
    #[test]
    fn rows_in_runs_are_told_from_rows_in_no_order() {
        let mut runs = Sample::default();
        let seen = [
            (false, 0),
            (true, 0),
            (false, 1),
            (true, 1),
            (true, 1),
            (false, 2),
        ];
        for (known, code) in seen {
            runs.saw(if known {
                Encoded::Known(code)
            } else {
                Encoded::New(code)
            });
        }
        assert!(runs.in_order());
        let mut scattered = Sample::default();
        for code in [5, 90, 3, 41, 41, 17, 60] {
            scattered.saw(Encoded::Known(code));
        }
        assert!(!scattered.in_order());
        // All new: nothing to guess, so the values are asked for ahead.
        let mut new = Sample::default();
        for code in 0..10 {
            new.saw(Encoded::New(code));
        }
        assert!(!new.in_order());
        // The rest are taken to be new as often as the sample's values were.
        assert_eq!(
            new.new_among(Sample::SIZE * 3 + 100),
            10 * 3 + 100 * 10 / Sample::SIZE
        );
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
