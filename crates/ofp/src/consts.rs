//! Reserved numbers shared by many messages: ports, groups, meters, tables,
//! buffers.

use crate::wire::wire_numbers;

/// The wire version of OpenFlow 1.3.
pub const OFP_VERSION: u8 = 0x04;
/// Length of the common header.
pub const OFP_HEADER_LEN: usize = 8;
/// `OFP_NO_BUFFER`.
pub const OFP_NO_BUFFER: u32 = 0xffff_ffff;

wire_numbers! {
    /// Reserved port numbers (`OFPP_*`).
    pub mod port_no: u32 {
        MAX = 0xffff_ff00, IN_PORT = 0xffff_fff8, TABLE = 0xffff_fff9, NORMAL = 0xffff_fffa,
        FLOOD = 0xffff_fffb, ALL = 0xffff_fffc, CONTROLLER = 0xffff_fffd, LOCAL = 0xffff_fffe,
        ANY = 0xffff_ffff,
    }
}

wire_numbers! {
    /// Reserved group numbers (`OFPG_*`).
    pub mod group_no: u32 {
        MAX = 0xffff_ff00, ALL = 0xffff_fffc, ANY = 0xffff_ffff,
    }
}

wire_numbers! {
    /// Reserved meter numbers (`OFPM_*`).
    pub mod meter_no: u32 {
        MAX = 0xffff_0000, SLOWPATH = 0xffff_fffd, CONTROLLER = 0xffff_fffe, ALL = 0xffff_ffff,
    }
}

wire_numbers! {
    /// Reserved table numbers (`OFPTT_*`).
    pub mod table_no: u8 {
        MAX = 0xfe, ALL = 0xff,
    }
}

/// `OFPQ_ALL`.
pub const OFPQ_ALL: u32 = 0xffff_ffff;
