//! An OpenFlow 1.3 switch with in-memory tables and no port I/O, for
//! trying controllers and `ovs-ofctl` against the agent:
//!
//! ```text
//! cargo run -p agent --example memory_switch -- ptcp:6653:127.0.0.1 [tcp:HOST:PORT ...]
//! ovs-ofctl -O OpenFlow13 show tcp:127.0.0.1:6653
//! ```
//!
//! It has four ports (1..=4); flow timeouts run; events (flow-removed,
//! port-status, packet-ins from packet-outs) go to the controllers.

use agent::{Agent, AgentConfig, MemorySwitch, MemorySwitchConfig, Target};
use ofp::{MacAddr, Port};
use std::sync::Arc;
use std::time::Duration;

fn main() -> anyhow::Result<()> {
    let targets: Vec<Target> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    anyhow::ensure!(!targets.is_empty(), "usage: memory_switch TARGET...");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let (tx, rx) = tokio::sync::mpsc::channel(4096);
        let ports = (1..=4u32)
            .map(|n| Port {
                port_no: n,
                hw_addr: MacAddr([2, 0, 0, 0, 0, n as u8]),
                name: format!("p{n}"),
                state: ofp::port::port_state::LIVE,
                curr_speed: 10_000_000,
                max_speed: 10_000_000,
                ..Port::default()
            })
            .collect();
        let switch = Arc::new(MemorySwitch::new(
            MemorySwitchConfig {
                ports,
                ..MemorySwitchConfig::default()
            },
            Some(tx),
        ));
        let agent = Agent::new(switch, AgentConfig::default());
        agent.spawn_events(rx);
        agent.spawn_housekeeping(Duration::from_secs(1));
        for t in targets {
            if t.passive {
                let (addr, _) = agent.listen(&t).await?;
                println!("listening on {addr}");
            } else {
                agent.connect(t.clone());
                println!("connecting to {t}");
            }
        }
        std::future::pending::<anyhow::Result<()>>().await
    })
}
