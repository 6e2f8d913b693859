//! Any bytes from a NETCONF client after SSH (framed either way, as
//! hellos and RPCs) through the OF-CONFIG module's framer, XML reader and
//! operations against an in-memory datastore: replies or rpc-errors,
//! never a panic, and an edit either applies whole or not at all.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ofconfig::fuzz_netconf_bytes(data);
});
