//! Any bytes as a capture file (classic pcap or pcapng, as `fulmar trace
//! --pcap` and pcap ports read them): packets or a typed error, never a
//! panic, and never a packet longer than the record limit.
#![no_main]

use dataplane::pcap::{CaptureReader, MAX_RECORD};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = CaptureReader::new(data) else {
        return;
    };
    let mut frame = Vec::new();
    for _ in 0..10_000 {
        match reader.next_record(&mut frame) {
            Ok(Some(h)) => {
                assert_eq!(h.incl_len as usize, frame.len());
                assert!(h.incl_len <= MAX_RECORD);
            }
            Ok(None) | Err(_) => break,
        }
    }
});
