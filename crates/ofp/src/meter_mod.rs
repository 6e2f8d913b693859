//! `OFPT_METER_MOD` (spec 1.3.5 §7.3.4.4).

use serde::Serialize;

/// `OFPMC_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u16)]
pub enum MeterModCommand {
    Add = 0,
    Modify = 1,
    Delete = 2,
}

/// `OFPMF_*` bits of `MeterMod::flags`.
pub mod meter_flags {
    pub const KBPS: u16 = 1 << 0;
    pub const PKTPS: u16 = 1 << 1;
    pub const BURST: u16 = 1 << 2;
    pub const STATS: u16 = 1 << 3;
}

/// `OFPMBT_*` band type numbers.
pub mod meter_band_type {
    pub const DROP: u16 = 1;
    pub const DSCP_REMARK: u16 = 2;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// A meter band.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MeterBand {
    Drop {
        rate: u32,
        burst_size: u32,
    },
    DscpRemark {
        rate: u32,
        burst_size: u32,
        prec_level: u8,
    },
    /// `data` is everything after the experimenter id.
    Experimenter {
        rate: u32,
        burst_size: u32,
        experimenter: u32,
        #[serde(serialize_with = "crate::serde_hex")]
        data: Vec<u8>,
    },
}

/// A meter table modification.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct MeterMod {
    pub command: MeterModCommand,
    pub flags: u16,
    pub meter_id: u32,
    pub bands: Vec<MeterBand>,
}
