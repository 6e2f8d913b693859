//! `OFPT_ROLE_REQUEST` / `OFPT_ROLE_REPLY` (spec 1.3.5 §7.3.9): a
//! controller's role and its generation id.

use crate::wire::{wire_layout, wire_numbers};
use serde::Serialize;

wire_numbers! {
    /// `OFPCR_ROLE_*`.
    pub mod controller_role: u32 {
        NOCHANGE = 0, EQUAL = 1, MASTER = 2, SLAVE = 3,
    }
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

wire_layout!(Role: BODY_LEN = 16, { role, pad 4, generation_id });

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Reader;

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
