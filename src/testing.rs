//! What the library's unit tests share.

/// `count` numbers from a linear congruential generator started at `seed`: the same every
/// run, in no order a test cares about.
pub fn scrambled(count: usize, seed: u64) -> Vec<usize> {
    let mut state = seed;
    (0..count)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as usize
        })
        .collect()
}
