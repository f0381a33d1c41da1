//! A Bloom filter over the keys of one spilled run of a transaction's writes, so that a
//! read of a key the run does not hold (a UNIQUE check of a new row, say) passes it without
//! reading a record of it back from the log: a 64 KiB read and decode for each run, each
//! time, which made a load with a unique index 20 times slower per row once it spilled.
//!
//! Owns: [`KeyFilter`]. May call: nothing. A split-block Bloom filter (Parquet's): a key
//! sets one bit in each of the eight 32-bit words of one 256-bit block, so a lookup reads
//! one cache line. At 10 bits a key it answers "maybe" for about 1% of absent keys.
//! Invariant: a key added is always answered "maybe" (no false negatives).

/// Filter bits per key.
const BITS_PER_KEY: usize = 10;

/// Odd constants that spread a key's hash over the eight words of its block.
const SALT: [u32; 8] = [
    0x47b6_137b,
    0x4497_4d91,
    0x8824_ad5b,
    0xa2b7_289d,
    0x7054_95c7,
    0x2df1_424b,
    0x9efc_4947,
    0x5c6b_fb31,
];

pub(crate) struct KeyFilter {
    blocks: Box<[[u32; 8]]>,
}

impl KeyFilter {
    /// The bytes a filter for `keys` keys takes.
    pub(crate) fn bytes_for(keys: usize) -> usize {
        Self::blocks_for(keys) * 32
    }

    fn blocks_for(keys: usize) -> usize {
        (keys * BITS_PER_KEY).div_ceil(256).max(1)
    }

    /// An empty filter sized for `keys` keys.
    pub(crate) fn new(keys: usize) -> KeyFilter {
        KeyFilter {
            blocks: vec![[0u32; 8]; Self::blocks_for(keys)].into_boxed_slice(),
        }
    }

    pub(crate) fn bytes(&self) -> usize {
        self.blocks.len() * 32
    }

    pub(crate) fn add(&mut self, key: &[u8]) {
        let (block, masks) = self.place(key);
        for (word, mask) in self.blocks[block].iter_mut().zip(masks) {
            *word |= mask;
        }
    }

    /// Whether `key` may have been added (`false`: it certainly was not).
    pub(crate) fn may_hold(&self, key: &[u8]) -> bool {
        let (block, masks) = self.place(key);
        self.blocks[block]
            .iter()
            .zip(masks)
            .all(|(word, mask)| word & mask != 0)
    }

    /// The block of `key` and the bit it sets in each of its words.
    fn place(&self, key: &[u8]) -> (usize, [u32; 8]) {
        let h = hash(key);
        let block = (((h >> 32) * self.blocks.len() as u64) >> 32) as usize;
        let low = h as u32;
        (block, SALT.map(|s| 1u32 << (low.wrapping_mul(s) >> 27)))
    }
}

/// A 64-bit hash of `key`, eight bytes at a time, each step and the end mixed as
/// SplitMix64 does.
fn hash(key: &[u8]) -> u64 {
    let mix = |mut h: u64| {
        h ^= h >> 30;
        h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 27;
        h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^ (h >> 31)
    };
    let mut h = 0x9e37_79b9_7f4a_7c15 ^ key.len() as u64;
    for chunk in key.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = mix(h ^ u64::from_le_bytes(w));
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_added_is_found_and_few_others_are() {
        let keys = 50_000;
        let mut f = KeyFilter::new(keys);
        let key = |i: usize| format!("key{i}").into_bytes();
        for i in 0..keys {
            f.add(&key(i));
        }
        assert!((0..keys).all(|i| f.may_hold(&key(i))));
        let false_positives = (keys..2 * keys).filter(|&i| f.may_hold(&key(i))).count();
        // About 1% expected; 3% would mean the hash spreads keys badly.
        assert!(false_positives < keys * 3 / 100, "{false_positives}");
        assert_eq!(f.bytes(), KeyFilter::bytes_for(keys));
    }

    #[test]
    fn a_filter_for_no_keys_holds_nothing() {
        let f = KeyFilter::new(0);
        assert!(!f.may_hold(b""));
        assert!(!f.may_hold(b"k"));
    }
}
