//! Set-up shared by the agent's integration tests.

use agent::{Agent, AgentConfig, MemorySwitch, MemorySwitchConfig};
use ofp::{MacAddr, Port};
use std::net::SocketAddr;
use std::sync::Arc;

/// An in-memory switch with ports 1..=`n_ports` (named `pN`, MAC
/// 02:00:00:00:00:0N).
pub fn switch_with_ports(n_ports: u32) -> Arc<MemorySwitch> {
    let ports = (1..=n_ports)
        .map(|n| Port {
            port_no: n,
            hw_addr: MacAddr([2, 0, 0, 0, 0, n as u8]),
            name: format!("p{n}"),
            ..Port::default()
        })
        .collect();
    Arc::new(MemorySwitch::new(
        MemorySwitchConfig {
            ports,
            ..MemorySwitchConfig::default()
        },
        None,
    ))
}

/// [`switch_with_ports`] and an agent with the default settings listening
/// for it on 127.0.0.1, on a free port (the listener outlives the `Agent`:
/// its handle is dropped, which detaches it).
pub async fn listening_switch(n_ports: u32) -> (Arc<MemorySwitch>, SocketAddr) {
    let switch = switch_with_ports(n_ports);
    let agent = Agent::new(switch.clone(), AgentConfig::default());
    let (addr, _) = agent
        .listen(&"ptcp:0:127.0.0.1".parse().unwrap())
        .await
        .unwrap();
    (switch, addr.tcp().expect("a TCP listener"))
}
