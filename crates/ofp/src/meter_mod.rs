//! `OFPT_METER_MOD` (spec 1.3.5 §7.3.4.4).

use crate::error::{DecodeError, MeterModFailedCode, OfpError};
use crate::wire::{
    bad_len, len_placeholder, patch_len, wire_enum, wire_numbers, FieldList, Reader, Writer,
};
use serde::Serialize;

wire_enum! {
    /// `OFPMC_*`.
    #[serde(rename_all = "snake_case")]
    pub enum MeterModCommand: u16, from_u16 { Add = 0, Modify = 1, Delete = 2, }
    unknown: OfpError::MeterModFailed(MeterModFailedCode::BadCommand), "meter-mod command";
}

wire_numbers! {
    /// `OFPMF_*` bits of `MeterMod::flags`.
    pub mod meter_flags: u16 {
        KBPS = 1 << 0, PKTPS = 1 << 1, BURST = 1 << 2, STATS = 1 << 3,
    }
}

wire_numbers! {
    /// `OFPMBT_*` band type numbers.
    pub mod meter_band_type: u16 {
        DROP = 1, DSCP_REMARK = 2, EXPERIMENTER = 0xffff,
    }
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

crate::wire::codec_field!(MeterBand);

impl MeterBand {
    /// Length of a drop or DSCP-remark band, and the least length of any.
    pub const LEN: usize = 16;

    /// Decodes one band. An unknown type is `METER_MOD_FAILED/BAD_BAND`;
    /// drop and DSCP-remark bands must be exactly 16 bytes.
    pub fn decode(r: &mut Reader) -> Result<MeterBand, DecodeError> {
        let at = r.offset();
        let band_type = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < Self::LEN {
            return Err(bad_len(at, format!("meter band length {len} below 16")));
        }
        let mut b = r
            .sub(len - 4)
            .map_err(|_| bad_len(at, format!("meter band length {len} exceeds the message")))?;
        let rate = b.u32()?;
        let burst_size = b.u32()?;
        let fixed = |kind: &str| {
            if len == Self::LEN {
                Ok(())
            } else {
                Err(bad_len(at, format!("{kind} band length {len}, not 16")))
            }
        };
        Ok(match band_type {
            meter_band_type::DROP => {
                fixed("drop")?;
                MeterBand::Drop { rate, burst_size }
            }
            meter_band_type::DSCP_REMARK => {
                fixed("dscp_remark")?;
                MeterBand::DscpRemark {
                    rate,
                    burst_size,
                    prec_level: b.u8()?,
                }
            }
            meter_band_type::EXPERIMENTER => MeterBand::Experimenter {
                rate,
                burst_size,
                experimenter: b.u32()?,
                data: b.rest().to_vec(),
            },
            other => {
                return Err(DecodeError::new(
                    OfpError::MeterModFailed(MeterModFailedCode::BadBand),
                    at,
                    format!("unknown meter band type {other}"),
                ))
            }
        })
    }

    /// Encodes one band: type, length, rate and burst size, then what the
    /// type adds (padding as zeros).
    pub fn encode(&self, w: &mut Vec<u8>) {
        let start = w.len();
        let (band_type, rate, burst_size) = match *self {
            MeterBand::Drop { rate, burst_size } => (meter_band_type::DROP, rate, burst_size),
            MeterBand::DscpRemark {
                rate, burst_size, ..
            } => (meter_band_type::DSCP_REMARK, rate, burst_size),
            MeterBand::Experimenter {
                rate, burst_size, ..
            } => (meter_band_type::EXPERIMENTER, rate, burst_size),
        };
        w.put_u16(band_type);
        let len_at = len_placeholder(w);
        w.put_u32(rate);
        w.put_u32(burst_size);
        match self {
            MeterBand::Drop { .. } => w.put_zeros(4),
            MeterBand::DscpRemark { prec_level, .. } => {
                w.put_u8(*prec_level);
                w.put_zeros(3);
            }
            MeterBand::Experimenter {
                experimenter, data, ..
            } => {
                w.put_u32(*experimenter);
                w.put_bytes(data);
            }
        }
        patch_len(w, len_at, start);
    }
}

impl MeterMod {
    /// Fixed part of the body before the bands (the message is at least
    /// 16 bytes).
    pub const FIXED_LEN: usize = 8;

    /// Decodes the body (everything after the header). An unknown command
    /// is `METER_MOD_FAILED/BAD_COMMAND`.
    pub fn decode(r: &mut Reader) -> Result<MeterMod, DecodeError> {
        let command_at = r.offset();
        let command_raw = r.u16()?;
        let flags = r.u16()?;
        let meter_id = r.u32()?;
        let command = MeterModCommand::decoded(command_raw, command_at)?;
        Ok(MeterMod {
            command,
            flags,
            meter_id,
            bands: MeterBand::decode_list(r)?,
        })
    }

    /// Encodes the body (everything after the header).
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u16(self.command as u16);
        w.put_u16(self.flags);
        w.put_u32(self.meter_id);
        MeterBand::encode_list(&self.bands, w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::BadRequestCode;
    use crate::wire::reencodes;

    /// ADD meter 9 (kbps, burst) with a drop, a dscp_remark and an
    /// experimenter band.
    fn body() -> Vec<u8> {
        let head: &[u8] = &[0, 1, 0, 0b101, 0, 0, 0, 9];
        let drop = &[0, 1, 0, 16, 0, 0, 0, 100, 0, 0, 0, 10, 0, 0, 0, 0];
        let dscp_remark = &[0, 2, 0, 16, 0, 0, 0, 200, 0, 0, 0, 20, 3, 0, 0, 0];
        let experimenter = &[
            0xff, 0xff, 0, 20, 0, 0, 1, 0x2c, 0, 0, 0, 30, 0, 0, 0, 42, 1, 2, 3, 4,
        ];
        [head, drop, dscp_remark, experimenter].concat()
    }

    #[test]
    fn layout_and_round_trip() {
        let b = body();
        let m = reencodes(&b, MeterMod::decode, MeterMod::encode);
        assert_eq!(m.command, MeterModCommand::Modify);
        assert_eq!(m.flags, meter_flags::KBPS | meter_flags::BURST);
        assert_eq!(m.meter_id, 9);
        assert_eq!(
            m.bands,
            vec![
                MeterBand::Drop {
                    rate: 100,
                    burst_size: 10
                },
                MeterBand::DscpRemark {
                    rate: 200,
                    burst_size: 20,
                    prec_level: 3
                },
                MeterBand::Experimenter {
                    rate: 300,
                    burst_size: 30,
                    experimenter: 42,
                    data: vec![1, 2, 3, 4]
                },
            ]
        );
    }

    #[test]
    fn errors() {
        let mut b = body();
        b[1] = 3;
        let e = MeterMod::decode(&mut Reader::new(&b)).unwrap_err();
        assert_eq!(
            e.error,
            OfpError::MeterModFailed(MeterModFailedCode::BadCommand)
        );
        let mut b = body();
        b[9] = 3; // band type 3
        let e = MeterMod::decode(&mut Reader::new(&b)).unwrap_err();
        assert_eq!(
            e.error,
            OfpError::MeterModFailed(MeterModFailedCode::BadBand)
        );
        assert_eq!(e.offset, 8);
        let bad = OfpError::BadRequest(BadRequestCode::BadLen);
        let mut b = body();
        b[11] = 12; // band shorter than 16
        assert_eq!(
            MeterMod::decode(&mut Reader::new(&b)).unwrap_err().error,
            bad
        );
        let mut b = body();
        b[11] = 24; // drop band of 24
        assert_eq!(
            MeterMod::decode(&mut Reader::new(&b)).unwrap_err().error,
            bad
        );
        let b = body();
        assert_eq!(
            MeterMod::decode(&mut Reader::new(&b[..b.len() - 1]))
                .unwrap_err()
                .error,
            bad
        );
    }
}
