//! Any bytes from an OVSDB server (JSON-RPC values, monitor updates) go
//! through the framer, the replica and the configuration view without a
//! panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ovsdb::fuzz_server_bytes(data);
});
