//! `OFPT_ROLE_REQUEST` / `OFPT_ROLE_REPLY` (spec 1.3.5 §7.3.9): a
//! controller's role and its generation id.

use crate::error::DecodeError;
use crate::wire::{Reader, Writer};
use serde::Serialize;

/// `OFPCR_ROLE_*`.
pub mod controller_role {
    pub const NOCHANGE: u32 = 0;
    pub const EQUAL: u32 = 1;
    pub const MASTER: u32 = 2;
    pub const SLAVE: u32 = 3;
}

/// `ofp_role_request` (after the header); the reply has the same layout.
/// The role is kept raw so an unknown value can be answered with
/// `ROLE_REQUEST_FAILED/BAD_ROLE` by the agent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Role {
    /// `OFPCR_ROLE_*`.
    pub role: u32,
    pub generation_id: u64,
}

impl Role {
    /// Body length (the message is 24 bytes).
    pub const BODY_LEN: usize = 16;

    /// Decodes the body.
    pub fn decode(r: &mut Reader) -> Result<Role, DecodeError> {
        let role = r.u32()?;
        r.skip(4)?;
        Ok(Role {
            role,
            generation_id: r.u64()?,
        })
    }

    /// Encodes the body.
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u32(self.role);
        w.put_zeros(4);
        w.put_u64(self.generation_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let body = [0, 0, 0, 2, 9, 9, 9, 9, 0, 0, 0, 0, 0, 0, 0x12, 0x34];
        let r = Role::decode(&mut Reader::new(&body)).unwrap();
        assert_eq!(r.role, controller_role::MASTER);
        assert_eq!(r.generation_id, 0x1234);
        let mut w = Vec::new();
        r.encode(&mut w);
        assert_eq!(&w[..4], &body[..4]);
        assert_eq!(&w[4..8], &[0, 0, 0, 0]);
        assert_eq!(&w[8..], &body[8..]);
    }
}
