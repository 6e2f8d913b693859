//! Any bytes on the control socket (`fulmar ctl`, `ovs-appctl`): split
//! into JSON values, each read as a JSON-RPC request and answered; a
//! request's words parsed as a transaction (`add-port br0 eth1 -- ...`)
//! and applied to a configuration, or as a flow command's flow text.
//! Errors, never panics; a transaction that fails leaves the
//! configuration as it was (it is a new value or nothing).
#![no_main]

use std::sync::OnceLock;

use datastore::{Config, Host};
use libfuzzer_sys::fuzz_target;

const BASE: &str = r#"
[[bridges]]
name = "br0"
ports = [
  { port = 1, interface = "a", backend = "memory" },
  { port = 2, interface = "b", backend = "memory" },
]
controllers = [{ target = "tcp:127.0.0.1:6653" }]
"#;

fn base() -> &'static Config {
    static BASE_CONFIG: OnceLock<Config> = OnceLock::new();
    BASE_CONFIG.get_or_init(|| {
        Config::from_str_for(BASE, "/nonexistent/base.toml", Host { cpus: 4 })
            .expect("the base configuration is valid")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok((values, used)) = mgmt::ctl::split_values(data) else {
        return;
    };
    assert!(used <= data.len());
    for v in values {
        let req = match mgmt::ctl::parse_request(&v) {
            Ok(req) => req,
            Err((id, msg)) => {
                let _ = mgmt::ctl::reply(id, Err(msg));
                continue;
            }
        };
        let words: Vec<&str> = std::iter::once(req.method.as_str())
            .chain(req.params.iter().map(String::as_str))
            .collect();
        if let Ok(ops) = datastore::parse_ctl(&words) {
            let before = base().clone();
            let _ = base().apply(&ops, Host { cpus: 4 });
            assert_eq!(&before, base());
        }
        if let Some(text) = req.params.get(1) {
            let _ = flowtext::parse_flow_command(text, ofp::FlowModCommand::Add);
            let _ = flowtext::parse_flow_file(text);
        }
        let _ = mgmt::ctl::reply(req.id, Ok(String::new()));
    }
});
