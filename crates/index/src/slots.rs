//! A hash table whose probes can be fetched ahead: keys of two `u64`s, key and value in one
//! 32-byte slot, so a probe is one cache line, and [`SlotTable::prefetch`] asks the processor
//! for the line a later probe will read. A loop that knows its next keys (a document's next
//! words, a text's next runs) puts their cache misses in flight together instead of waiting
//! for each in turn. Used by the postings writer's memos ([`crate::postings`]: a short word is
//! its own key, [`short_key`]) and the mention scan's table of first words
//! ([`crate::graph::mentions`]: a hash and a one).
//!
//! Open addressing, linear probing, at most 5/8 full. A slot whose key's second half is zero
//! is empty: no key has a zero second half.

/// A key; its second half is never zero.
pub(crate) type SlotKey = [u64; 2];

/// `word` as a [`SlotKey`] (its bytes, zero-padded, the last byte its length), or `None` when
/// it is empty or longer than 15 bytes.
pub(crate) fn short_key(word: &str) -> Option<SlotKey> {
    let bytes = word.as_bytes();
    (1..16).contains(&bytes.len()).then(|| {
        let mut key = [0u8; 16];
        key[..bytes.len()].copy_from_slice(bytes);
        key[15] = bytes.len() as u8;
        let (low, high) = key.split_at(8);
        [
            u64::from_le_bytes(low.try_into().expect("8 bytes")),
            u64::from_le_bytes(high.try_into().expect("8 bytes")),
        ]
    })
}

/// Asks the processor to fetch the cache line of `value` into its caches, without waiting for
/// it (a no-op where there is no such instruction).
#[inline]
pub(crate) fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch reads nothing the program sees and never faults (the address is
        // a live reference's anyway); SSE is part of every x86-64 processor.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

#[derive(Debug, Clone, Copy, Default)]
#[repr(align(32))]
struct Slot<V> {
    key: SlotKey,
    value: V,
}

/// Slots of a new table (a power of two).
const FIRST_SLOTS: usize = 1024;

#[derive(Debug, Clone)]
pub(crate) struct SlotTable<V> {
    slots: Vec<Slot<V>>,
    len: usize,
    /// `64 - log2(slots.len())`: a hash's top bits are its home slot.
    shift: u32,
}

impl<V: Copy + Default> Default for SlotTable<V> {
    fn default() -> SlotTable<V> {
        SlotTable {
            slots: vec![Slot::default(); FIRST_SLOTS],
            len: 0,
            shift: 64 - FIRST_SLOTS.trailing_zeros(),
        }
    }
}

impl<V: Copy + Default> SlotTable<V> {
    /// Two multiplications: the top bits depend on every bit of the key.
    fn hash(key: SlotKey) -> u64 {
        (key[0].wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ key[1]).wrapping_mul(0xD6E8_FEB8_6659_FD93)
    }

    fn home(&self, key: SlotKey) -> usize {
        (Self::hash(key) >> self.shift) as usize
    }

    /// Asks the processor to fetch the slot where a probe for `key` starts.
    #[inline]
    pub(crate) fn prefetch(&self, key: SlotKey) {
        prefetch(&self.slots[self.home(key)]);
    }

    pub(crate) fn get(&self, key: SlotKey) -> Option<V> {
        let mask = self.slots.len() - 1;
        let mut at = self.home(key);
        loop {
            let slot = &self.slots[at];
            if slot.key == key {
                return Some(slot.value);
            }
            if slot.key[1] == 0 {
                return None;
            }
            at = (at + 1) & mask;
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `key`'s value, set to `value` first if the table has none.
    pub(crate) fn get_or_insert(&mut self, key: SlotKey, value: V) -> &mut V {
        if (self.len + 1) * 8 > self.slots.len() * 5 {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut at = self.home(key);
        while self.slots[at].key != key {
            if self.slots[at].key[1] == 0 {
                self.slots[at] = Slot { key, value };
                self.len += 1;
                break;
            }
            at = (at + 1) & mask;
        }
        &mut self.slots[at].value
    }

    /// Sets `key`'s value, replacing any it had.
    pub(crate) fn insert(&mut self, key: SlotKey, value: V) {
        debug_assert_ne!(key[1], 0, "no key has a zero second half");
        if (self.len + 1) * 8 > self.slots.len() * 5 {
            self.grow();
        }
        if self.place(key, value) {
            self.len += 1;
        }
    }

    /// Puts `key` in its slot; whether it was new.
    fn place(&mut self, key: SlotKey, value: V) -> bool {
        let mask = self.slots.len() - 1;
        let mut at = self.home(key);
        loop {
            let slot = &mut self.slots[at];
            if slot.key == key {
                slot.value = value;
                return false;
            }
            if slot.key[1] == 0 {
                *slot = Slot { key, value };
                return true;
            }
            at = (at + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let slots = vec![Slot::default(); self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, slots);
        self.shift -= 1;
        for slot in old.into_iter().filter(|slot| slot.key[1] != 0) {
            self.place(slot.key, slot.value);
        }
    }

    /// Bytes the slots take.
    pub(crate) fn bytes(&self) -> usize {
        self.slots.len() * size_of::<Slot<V>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn keys_are_the_words_and_their_lengths() {
        assert_eq!(short_key(""), None);
        assert_eq!(short_key("sixteen bytes..."), None);
        assert_eq!(short_key("a"), Some([u64::from(b'a'), 1 << 56]));
        let fifteen = short_key("fifteen bytes..").expect("15 bytes");
        assert_eq!(fifteen[1] >> 56, 15);
        // A word and the same word with trailing zero bytes differ by their length.
        assert_ne!(short_key("ab"), short_key("ab\0"));
    }

    proptest::proptest! {
        #[test]
        fn it_answers_as_a_hash_map_does(
            ops in proptest::collection::vec(("[a-c]{1,3}|[a-z0-9]{1,15}", 0u32..1000), 1..3000),
        ) {
            let mut table = SlotTable::<u32>::default();
            let mut want = HashMap::new();
            for (word, value) in &ops {
                let key = short_key(word).expect("1 to 15 bytes");
                proptest::prop_assert_eq!(table.get(key), want.get(word).copied());
                table.prefetch(key);
                if value % 2 == 0 {
                    table.insert(key, *value);
                    want.insert(word.clone(), *value);
                } else {
                    let got = *table.get_or_insert(key, *value);
                    proptest::prop_assert_eq!(got, *want.entry(word.clone()).or_insert(*value));
                }
            }
            for (word, value) in &want {
                proptest::prop_assert_eq!(table.get(short_key(word).unwrap()), Some(*value));
            }
            proptest::prop_assert_eq!(table.len, want.len());
            proptest::prop_assert!(table.len * 8 <= table.slots.len() * 5);
        }
    }
}
