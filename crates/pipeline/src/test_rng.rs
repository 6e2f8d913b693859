//! The seeded generator the randomized tests share: the same sequence on
//! every run, so a failure reproduces.

/// A xorshift64 generator from a fixed seed; `next(n)` is a number below `n`.
pub(crate) fn xorshift() -> impl FnMut(u64) -> u64 {
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}
