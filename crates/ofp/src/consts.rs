//! Reserved numbers shared by many messages: ports, groups, meters, tables,
//! buffers.

/// The wire version of OpenFlow 1.3.
pub const OFP_VERSION: u8 = 0x04;
/// Length of the common header.
pub const OFP_HEADER_LEN: usize = 8;
/// `OFP_NO_BUFFER`.
pub const OFP_NO_BUFFER: u32 = 0xffff_ffff;

/// Reserved port numbers (`OFPP_*`).
pub mod port_no {
    pub const MAX: u32 = 0xffff_ff00;
    pub const IN_PORT: u32 = 0xffff_fff8;
    pub const TABLE: u32 = 0xffff_fff9;
    pub const NORMAL: u32 = 0xffff_fffa;
    pub const FLOOD: u32 = 0xffff_fffb;
    pub const ALL: u32 = 0xffff_fffc;
    pub const CONTROLLER: u32 = 0xffff_fffd;
    pub const LOCAL: u32 = 0xffff_fffe;
    pub const ANY: u32 = 0xffff_ffff;
}

/// Reserved group numbers (`OFPG_*`).
pub mod group_no {
    pub const MAX: u32 = 0xffff_ff00;
    pub const ALL: u32 = 0xffff_fffc;
    pub const ANY: u32 = 0xffff_ffff;
}

/// Reserved meter numbers (`OFPM_*`).
pub mod meter_no {
    pub const MAX: u32 = 0xffff_0000;
    pub const SLOWPATH: u32 = 0xffff_fffd;
    pub const CONTROLLER: u32 = 0xffff_fffe;
    pub const ALL: u32 = 0xffff_ffff;
}

/// Reserved table numbers (`OFPTT_*`).
pub mod table_no {
    pub const MAX: u8 = 0xfe;
    pub const ALL: u8 = 0xff;
}

/// `OFPQ_ALL`.
pub const OFPQ_ALL: u32 = 0xffff_ffff;
