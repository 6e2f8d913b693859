//! Any bytes given to the packet parser and header rewrites must be handled
//! without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    packet::parse_for_fuzz(data);
});
