//! What a management protocol asks of a bridge's tables and ports
//! beyond the configuration: OpenFlow requests as a controller's
//! (multipart reads, flow-mods then a barrier), a trace of one packet
//! through a copy of the live tables, a capture of a port. The
//! management crates reach the switch only through these and the rest of
//! [`Daemon`], never the agent, pipeline or dataplane themselves.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent::Switch;
use ofp::multipart::{MultipartReplyBody, MultipartRequestBody};
use ofp::{FlowMod, OfpError};

use super::Daemon;
use crate::openflow::BridgeSwitch;

/// Why an operation of this file failed; nothing it names was changed,
/// except what [`SwitchOpError::FlowRefused`] says is in force.
#[derive(Debug)]
pub enum SwitchOpError {
    /// No bridge by that name.
    NoBridge(String),
    /// No port by that name (an interface, or `BRIDGE:NUMBER`).
    NoPort(String),
    /// The bridge refused an OpenFlow request, as it would a controller's.
    Refused(OfpError),
    /// Flow-mod `index` (0-based) of `total` was refused; the ones
    /// before it are in force (as with `ovs-ofctl`).
    FlowRefused {
        /// Which one.
        index: usize,
        /// Of how many.
        total: usize,
        /// The OpenFlow error.
        error: OfpError,
    },
    /// A file could not be written.
    File {
        /// Which.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The capture could not start (the port's threads said why).
    Capture(String),
    /// The trace could not be written.
    Trace(String),
}

impl fmt::Display for SwitchOpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SwitchOpError::NoBridge(b) => write!(f, "no bridge named {b:?}"),
            SwitchOpError::NoPort(p) => {
                write!(f, "no port {p:?} (an interface name, or BRIDGE:NUMBER)")
            }
            SwitchOpError::Refused(e) => write!(f, "refused: {e}"),
            SwitchOpError::FlowRefused {
                index,
                total,
                error,
            } => {
                write!(f, "flow {} of {total}: refused: {error}", index + 1)?;
                if *index > 0 {
                    write!(f, " ({index} before it were applied)")?;
                }
                Ok(())
            }
            SwitchOpError::File { path, error } => write!(f, "{}: {error}", path.display()),
            SwitchOpError::Capture(e) | SwitchOpError::Trace(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for SwitchOpError {}

/// What [`Daemon::capture`] wrote.
#[derive(Clone, Debug)]
pub struct CaptureSummary {
    /// The bridge of the port.
    pub bridge: String,
    /// The port's OpenFlow number.
    pub port: u32,
    /// The port's name.
    pub name: String,
    /// Frames written to the file.
    pub written: u64,
    /// Frames seen but not written (the capture's queue was full).
    pub lost: u64,
}

impl Daemon {
    fn switch(&self, bridge: &str) -> Result<BridgeSwitch, SwitchOpError> {
        self.runtime()
            .bridge_switch(bridge)
            .ok_or_else(|| SwitchOpError::NoBridge(bridge.to_string()))
    }

    /// A multipart request to `bridge`, answered as a controller's would
    /// be.
    pub fn multipart(
        &self,
        bridge: &str,
        req: &MultipartRequestBody,
    ) -> Result<MultipartReplyBody, SwitchOpError> {
        self.switch(bridge)?
            .multipart(req)
            .map_err(SwitchOpError::Refused)
    }

    /// Runs `mods` through `bridge`'s OpenFlow path in order and waits
    /// until the workers see them (a barrier), as a controller's would.
    /// The first one refused stops the rest; those before it stay.
    pub fn flow_mods(&self, bridge: &str, mods: &[FlowMod]) -> Result<(), SwitchOpError> {
        let sw = self.switch(bridge)?;
        for (index, fm) in mods.iter().enumerate() {
            if let Err(error) = sw.flow_mod(fm) {
                sw.flush();
                return Err(SwitchOpError::FlowRefused {
                    index,
                    total: mods.len(),
                    error,
                });
            }
        }
        self.controllers().handle().block_on(sw.barrier());
        Ok(())
    }

    /// Sends `packet` into a copy of `bridge`'s live tables on `in_port`
    /// and returns what happens ([`super::trace`]): the readable trace,
    /// with a line for each tunnel port it leaves by, or with `json` one
    /// JSON line per emitted packet. The switch learns nothing from it.
    pub fn trace(
        &self,
        bridge: &str,
        in_port: u32,
        packet: Vec<u8>,
        json: bool,
    ) -> Result<String, SwitchOpError> {
        let (mut dp, now) = self
            .runtime()
            .trace_datapath(bridge)
            .ok_or_else(|| SwitchOpError::NoBridge(bridge.to_string()))?;
        let mut out = Vec::new();
        super::trace::run(&mut dp, in_port, &[(now, packet)], json, &mut out)
            .map_err(|e| SwitchOpError::Trace(e.to_string()))?;
        let mut text = String::from_utf8(out).map_err(|e| SwitchOpError::Trace(e.to_string()))?;
        if !json {
            let (cfg, _) = self.config();
            if let Some(b) = cfg.bridge(bridge) {
                text.push_str(&super::trace::tunnel_notes(b, &text));
            }
        }
        Ok(text)
    }

    /// Writes a pcapng of what `port` (an interface name, or
    /// `BRIDGE:NUMBER`) receives and sends into `path` until `count`
    /// frames or `seconds` pass; blocks until then.
    pub fn capture(
        &self,
        port: &str,
        path: &Path,
        count: u64,
        seconds: u64,
    ) -> Result<CaptureSummary, SwitchOpError> {
        let rt = self.runtime();
        let (bridge, no, name) = rt
            .find_port(port)
            .ok_or_else(|| SwitchOpError::NoPort(port.to_string()))?;
        let file_error = |error| SwitchOpError::File {
            path: path.to_path_buf(),
            error,
        };
        let file = std::fs::File::create(path).map_err(file_error)?;
        let cap = Arc::new(dataplane::capture::Capture::new(name.clone()).with_count(count));
        rt.start_capture(&bridge, no, cap.clone())
            .map_err(|e| SwitchOpError::Capture(e.to_string()))?;
        let timer = {
            let cap = cap.clone();
            std::thread::spawn(move || {
                let end = Instant::now() + Duration::from_secs(seconds);
                while !cap.is_finished() && Instant::now() < end {
                    std::thread::sleep(Duration::from_millis(20));
                }
                cap.stop();
            })
        };
        let mut out = std::io::BufWriter::new(file);
        let stats = cap.drain_to(&mut out);
        rt.stop_capture(&bridge, no);
        let _ = timer.join();
        let stats = stats.map_err(file_error)?;
        Ok(CaptureSummary {
            bridge,
            port: no,
            name,
            written: stats.written,
            lost: stats.dropped(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests as daemon_tests;
    use super::*;
    use ofp::FlowModCommand;

    /// A daemon of br0 forwarding port 1 to 2, its files in a fresh
    /// directory (returned).
    fn start(name: &str) -> (Daemon, PathBuf) {
        let dir = daemon_tests::tmpdir(&format!("ops-{name}"));
        let config =
            crate::tests::two_port_bridge(&["table=0,priority=10,in_port=1,actions=output:2"]);
        (daemon_tests::start_with(&dir, &config, None), dir)
    }

    fn flows(d: &Daemon) -> usize {
        match d.multipart("br0", &crate::saved::every_flow()).unwrap() {
            MultipartReplyBody::Flow { stats } => stats.len(),
            _ => panic!("not a flow reply"),
        }
    }

    fn add(text: &str) -> FlowMod {
        flowtext::parse_flow_command(text, FlowModCommand::Add).unwrap()
    }

    /// Flow-mods apply in order up to the first refused one, which names
    /// its place; a bridge that is not there is named.
    #[test]
    fn flow_mods_stop_at_the_first_refused_one() {
        let (d, dir) = start("flowmods");
        assert_eq!(flows(&d), 1);
        let good = add("table=0,priority=20,in_port=2,actions=output:1");
        let bad = add("table=0,priority=30,in_port=1,actions=group:99");
        let e = d.flow_mods("br0", &[good.clone(), bad]).unwrap_err();
        assert!(
            matches!(
                e,
                SwitchOpError::FlowRefused {
                    index: 1,
                    total: 2,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("(1 before it were applied)"), "{e}");
        assert_eq!(flows(&d), 2);
        let e = d.flow_mods("nosuch", &[good]).unwrap_err();
        assert_eq!(e.to_string(), "no bridge named \"nosuch\"");
        d.stop();
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A trace follows the live tables and changes nothing; a capture of
    /// a port that is not there creates no file.
    #[test]
    fn traces_and_captures_name_what_is_missing() {
        let (d, dir) = start("trace");
        let frame = [
            0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a, 0x08, 0x00, // eth
            0x45, 0, 0, 20, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 10, 1, 10, 0, 10, 2, // ip
        ];
        let text = d.trace("br0", 1, frame.to_vec(), false).unwrap();
        assert!(
            text.contains("hit: table=0,priority=10,in_port=1,actions=output:2")
                && text.contains("\n  port 2: "),
            "{text}"
        );
        let json = d.trace("br0", 1, frame.to_vec(), true).unwrap();
        assert!(json.lines().all(|l| l.starts_with('{')), "{json}");
        assert!(matches!(
            d.trace("nosuch", 1, frame.to_vec(), false),
            Err(SwitchOpError::NoBridge(_))
        ));
        assert_eq!(flows(&d), 1);
        let file = dir.join("x.pcapng");
        let e = d.capture("nosuch0", &file, 1, 1).unwrap_err();
        assert!(matches!(e, SwitchOpError::NoPort(_)), "{e}");
        assert!(!file.exists());
        d.stop();
        let _ = std::fs::remove_dir_all(dir);
    }
}
