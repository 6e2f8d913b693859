//! Any bytes given to the OpenFlow decoder must yield a message or a typed
//! error, never a panic; whatever decodes must encode to bytes that decode
//! to the same message (padding may differ: the encoder writes zeros).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofp::framer::Framer;
use ofp::message::Message;

fuzz_target!(|data: &[u8]| {
    if let Ok((xid, msg)) = Message::decode(data) {
        let bytes = msg.encode(xid);
        let (xid2, again) = Message::decode(&bytes).expect("an encoded message must decode");
        assert_eq!((xid2, again), (xid, msg), "encode/decode must be stable");
    }
    // The stream framer must also survive arbitrary chunking.
    let mut framer = Framer::new();
    for chunk in data.chunks(7) {
        if framer.push(chunk).is_err() {
            break;
        }
        while let Ok(Some(frame)) = framer.next_message() {
            let _ = Message::decode(&frame);
        }
    }
});
