//! Any text as a configuration file is a configuration or an error that
//! names where, never a panic; a configuration that validates prints (as
//! persistence writes it) to text that reads back and prints the same, so
//! a restart comes back the same. (Printed forms are compared, not the
//! values: a value remembers the line each flow came from, for messages.)
#![no_main]

use datastore::{Config, Host};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let host = Host { cpus: 4 };
    let origin = "/nonexistent/fuzz.toml";
    if let Ok(config) = Config::from_str_for(text, origin, host) {
        let printed = config.to_toml_string();
        let again = Config::from_str_for(&printed, origin, host)
            .unwrap_or_else(|e| panic!("printed configuration refused: {e}\n{printed}"));
        assert_eq!(again.to_toml_string(), printed);
    }
});
