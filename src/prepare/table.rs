//! A hash table of numbers, each standing for a key that lives elsewhere.

use std::hash::{BuildHasher, Hash};

use polars::prelude::PlRandomState;

/// Numbers in a hash table, each standing for a key the caller reads back from where it lives
/// (a frame's cells, or the strings numbered so far) to check a probe. An entry takes four
/// bytes, where a table of (key, number) pairs took up to forty: at a million keys more
/// probes find their bucket in cache. The keys of strings (`Numbers`), of runs and tries
/// (`Prepared::build`) and of operation intervals (the verdicts) are all numbered this way.
#[derive(Default)]
pub struct NumberTable {
    table: hashbrown::HashTable<u32>,
    hasher: PlRandomState,
}

impl NumberTable {
    pub fn with_capacity(capacity: usize) -> NumberTable {
        NumberTable {
            table: hashbrown::HashTable::with_capacity(capacity),
            hasher: PlRandomState::default(),
        }
    }

    /// Makes room for `more` numbers; `key_of` gives the key of each number already in.
    #[inline]
    pub fn reserve<K: Hash>(&mut self, more: usize, key_of: impl Fn(u32) -> K) {
        let hasher = &self.hasher;
        self.table
            .reserve(more, |&number| hasher.hash_one(key_of(number)));
    }

    /// The number whose key is `key`.
    #[inline]
    pub fn find<K: Hash + PartialEq>(&self, key: K, key_of: impl Fn(u32) -> K) -> Option<u32> {
        let hash = self.hasher.hash_one(&key);
        self.table
            .find(hash, |&number| key_of(number) == key)
            .copied()
    }

    /// The number whose key is `key`; if there is none, `next` is entered for it and None
    /// returned (the caller then records that `next` stands for `key`).
    #[inline]
    pub fn find_or_add<K: Hash + PartialEq>(
        &mut self,
        key: K,
        next: u32,
        key_of: impl Fn(u32) -> K,
    ) -> Option<u32> {
        let hash = self.hasher.hash_one(&key);
        if let Some(&known) = self.table.find(hash, |&number| key_of(number) == key) {
            return Some(known);
        }
        let hasher = &self.hasher;
        self.table
            .insert_unique(hash, next, |&number| hasher.hash_one(key_of(number)));
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_keeps_the_number_it_was_added_with_as_the_table_grows() {
        let keys: Vec<String> = (0..10_000).map(|n| format!("key {n}")).collect();
        let mut numbers = NumberTable::default();
        let mut added: Vec<&str> = Vec::new();
        for key in &keys {
            let next = added.len() as u32;
            let key_of = |number: u32| added[number as usize];
            assert_eq!(numbers.find_or_add(key.as_str(), next, key_of), None);
            added.push(key);
        }
        let key_of = |number: u32| added[number as usize];
        assert_eq!(numbers.find_or_add("key 7", 10_000, key_of), Some(7));
        assert_eq!(numbers.find("key 9999", key_of), Some(9_999));
        assert_eq!(numbers.find("key 10000", key_of), None);
    }
}
