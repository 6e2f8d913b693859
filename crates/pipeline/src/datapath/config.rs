//! The settings of a pipeline instance (the switch configuration a
//! controller sets with SET_CONFIG, and the datapath's own bounds).

use crate::normal::NormalHandle;
use ofp::OfpError;

/// `OFPC_INVALID_TTL_TO_CONTROLLER` (switch config flag, bit 2): send
/// packets whose TTL expires to the controller.
pub const OFPC_INVALID_TTL_TO_CONTROLLER: u16 = 1 << 2;

/// Settings of a pipeline instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatapathConfig {
    /// Packet buffers for packet-ins (0: never buffer).
    pub n_buffers: usize,
    /// `miss_send_len` of the switch config (bytes sent with packet-ins
    /// that have no action `max_len`).
    pub miss_send_len: u16,
    /// Switch config flags (`OFPC_*`).
    pub flags: u16,
    /// Deepest group chain followed (deeper: dropped, `group_drop`).
    pub max_group_depth: u8,
    /// NORMAL's learning table (one per bridge, shared by its workers).
    pub normal: NormalHandle,
    /// A table-0 miss goes to NORMAL instead of being dropped (a bridge
    /// with no controller in fail mode standalone, as Open vSwitch's
    /// `priority=0,actions=NORMAL` on such a bridge).
    pub miss_normal: bool,
}

impl Default for DatapathConfig {
    /// 256 buffers, miss_send_len 128 (`OFPCML_DEFAULT`), no flags, groups
    /// nested up to 8 deep.
    fn default() -> Self {
        DatapathConfig {
            n_buffers: 256,
            miss_send_len: 128,
            flags: 0,
            max_group_depth: 8,
            normal: NormalHandle::default(),
            miss_normal: false,
        }
    }
}

impl DatapathConfig {
    /// GET_CONFIG: the flags and `miss_send_len` in force.
    pub fn switch_config(&self) -> ofp::SwitchConfig {
        ofp::SwitchConfig {
            flags: self.flags,
            miss_send_len: self.miss_send_len,
        }
    }

    /// SET_CONFIG: takes the flags and `miss_send_len`, or changes nothing
    /// and answers `SWITCH_CONFIG_FAILED/BAD_FLAGS` for flags this switch
    /// does not implement: IP reassembly (no `IP_REASM` capability), the
    /// undefined fragment mode 3, and unknown bits. The fragment modes and
    /// the 1.2 `INVALID_TTL_TO_CONTROLLER` flag the datapath honours.
    pub fn set_switch_config(&mut self, c: &ofp::SwitchConfig) -> Result<(), OfpError> {
        use ofp::switch_config::config_flags;
        let frag = c.flags & config_flags::FRAG_MASK;
        let known = config_flags::FRAG_MASK | OFPC_INVALID_TTL_TO_CONTROLLER;
        if c.flags & !known != 0
            || frag == config_flags::FRAG_REASM
            || frag == config_flags::FRAG_MASK
        {
            return Err(OfpError::SwitchConfigFailed(
                ofp::error::SwitchConfigFailedCode::BadFlags,
            ));
        }
        self.flags = c.flags;
        self.miss_send_len = c.miss_send_len;
        Ok(())
    }
}
