//! NORMAL: the switch's own VLAN-aware learning bridge, as an output
//! (`actions=NORMAL`, after any other actions) and as what a bridge does
//! with no controller to follow (fail mode standalone).
//!
//! For a frame sent to NORMAL on input port P:
//!
//! 1. Its VLAN is P's decision ([`PortVlan::ingress`]): an access port
//!    puts untagged frames in its VLAN and drops tagged ones, a trunk
//!    takes the VLANs it trunks (`normal_vlan` counts the rest).
//! 2. A unicast source address is learnt in that VLAN on P
//!    ([`MacTable::learn`]).
//! 3. A destination in the reserved IEEE 802.1D range
//!    (01:80:c2:00:00:00–0f: STP, LACP, LLDP, pause) is not forwarded
//!    (`normal_reserved`).
//! 4. A unicast destination learnt in the VLAN goes to its port alone
//!    (dropped, `normal_same_port`, if that is P); anything else —
//!    broadcast, multicast, unknown — floods to every port that FLOOD
//!    reaches and that carries the VLAN, P excepted.
//! 5. On each output port the frame is tagged or untagged as that port
//!    carries the VLAN ([`PortVlan::egress`]).
//!
//! The table is per bridge, shared by its workers without a lock they
//! wait for (see [`mac_table`]). Not covered: spanning tree, bonds,
//! mirrors, IGMP/MLD snooping, per-VLAN flood restrictions beyond port
//! membership, the 802.1ad TPID as a VLAN tag.

pub mod mac_table;
pub mod vlan;

pub use mac_table::{FdbEntry, MacTable};
pub use vlan::{Egress, PortVlan, VlanMode, VlanSet};

use std::sync::Arc;

/// A bridge's NORMAL state as the datapath holds it: its learning table
/// (shared by every worker and the control side). Two handles are equal
/// when they name the same table.
#[derive(Clone, Debug, Default)]
pub struct NormalHandle(pub Arc<MacTable>);

impl PartialEq for NormalHandle {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for NormalHandle {}

impl std::ops::Deref for NormalHandle {
    type Target = MacTable;

    fn deref(&self) -> &MacTable {
        &self.0
    }
}

/// The 802.1Q VID of `frame`'s outer tag (None: untagged, or another
/// TPID), and its PCP bits.
#[inline]
pub fn vid_of(frame: &[u8]) -> Option<u16> {
    match frame.get(12..16) {
        Some([0x81, 0x00, hi, lo]) => Some(u16::from_be_bytes([*hi, *lo]) & 0x0fff),
        _ => None,
    }
}

/// Whether `dst` is in the reserved 802.1D range bridges never forward.
#[inline]
pub fn is_reserved(dst: [u8; 6]) -> bool {
    dst[..5] == [0x01, 0x80, 0xc2, 0x00, 0x00] && dst[5] <= 0x0f
}
