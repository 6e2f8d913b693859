//! `OFPT_PORT_STATUS` (spec 1.3.5 §7.4.3) and `OFPT_PORT_MOD` (§7.3.4.5):
//! port change notifications and port configuration.

use crate::error::DecodeError;
use crate::oxm::MacAddr;
use crate::port::Port;
use crate::wire::{Reader, Writer};
use serde::Serialize;

/// `OFPPR_*` values of [`PortStatus::reason`].
pub mod port_reason {
    pub const ADD: u8 = 0;
    pub const DELETE: u8 = 1;
    pub const MODIFY: u8 = 2;
}

/// `ofp_port_status` (after the header). The reason is kept raw.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct PortStatus {
    /// `OFPPR_*`.
    pub reason: u8,
    pub desc: Port,
}

impl PortStatus {
    /// Body length (the message is 80 bytes).
    pub const BODY_LEN: usize = 72;

    /// Decodes the body.
    pub fn decode(r: &mut Reader) -> Result<PortStatus, DecodeError> {
        let reason = r.u8()?;
        r.skip(7)?;
        Ok(PortStatus {
            reason,
            desc: Port::decode(r)?,
        })
    }

    /// Encodes the body.
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u8(self.reason);
        w.put_zeros(7);
        self.desc.encode(w);
    }
}

/// `ofp_port_mod` (after the header).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct PortMod {
    pub port_no: u32,
    /// Must be the port's address (a sanity check, not a change).
    pub hw_addr: MacAddr,
    /// `OFPPC_*` bits to set, among those in `mask`.
    pub config: u32,
    /// Which `OFPPC_*` bits to change.
    pub mask: u32,
    /// `OFPPF_*` bits to advertise; 0 leaves them unchanged.
    pub advertise: u32,
}

impl PortMod {
    /// Body length (the message is 40 bytes).
    pub const BODY_LEN: usize = 32;

    /// Decodes the body.
    pub fn decode(r: &mut Reader) -> Result<PortMod, DecodeError> {
        let port_no = r.u32()?;
        r.skip(4)?;
        let hw_addr = MacAddr(r.array()?);
        r.skip(2)?;
        let config = r.u32()?;
        let mask = r.u32()?;
        let advertise = r.u32()?;
        r.skip(4)?;
        Ok(PortMod {
            port_no,
            hw_addr,
            config,
            mask,
            advertise,
        })
    }

    /// Encodes the body.
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u32(self.port_no);
        w.put_zeros(4);
        w.put_bytes(&self.hw_addr.0);
        w.put_zeros(2);
        w.put_u32(self.config);
        w.put_u32(self.mask);
        w.put_u32(self.advertise);
        w.put_zeros(4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_mod_layout() {
        let body = [
            0, 0, 0, 1, 0, 0, 0, 0, // port_no, pad
            0, 1, 2, 3, 4, 5, 0, 0, // hw_addr, pad
            0, 0, 0, 0x41, 0, 0, 0, 0x61, 0, 0, 0x08, 0, 0, 0, 0, 0,
        ];
        let p = PortMod::decode(&mut Reader::new(&body)).unwrap();
        assert_eq!(p.port_no, 1);
        assert_eq!(p.hw_addr, MacAddr([0, 1, 2, 3, 4, 5]));
        assert_eq!((p.config, p.mask, p.advertise), (0x41, 0x61, 0x800));
        let mut w = Vec::new();
        p.encode(&mut w);
        assert_eq!(w, body);
        assert!(PortMod::decode(&mut Reader::new(&body[..31])).is_err());
    }

    #[test]
    fn port_status_layout() {
        let mut body = vec![2, 0, 0, 0, 0, 0, 0, 0];
        let port = Port {
            port_no: 3,
            name: "p3".into(),
            ..Port::default()
        };
        port.encode(&mut body);
        let s = PortStatus::decode(&mut Reader::new(&body)).unwrap();
        assert_eq!(s.reason, port_reason::MODIFY);
        assert_eq!(s.desc, port);
        let mut w = Vec::new();
        s.encode(&mut w);
        assert_eq!(w, body);
    }
}
