//! Statistics records carried in multipart replies (spec 1.3.5 §7.3.5):
//! flow, aggregate, table, port, queue, group, group description, group
//! features, meter, meter configuration and meter features, and the flow
//! stats request shared by FLOW and AGGREGATE.
//!
//! Every record here has a fixed layout or a length field of its own; the
//! decoders check that length against both the record's minimum size and
//! the bytes actually left, so a record can never reach into its
//! neighbour. Lists are decoded until their reader is empty.

use crate::error::{BadRequestCode, DecodeError, GroupModFailedCode, OfpError};
use crate::flow_mod::FlowMod;
use crate::group_mod::{Bucket, GroupMod, GroupModCommand, GroupType};
use crate::instruction::Instruction;
use crate::meter_mod::{MeterBand, MeterMod, MeterModCommand};
use crate::oxm::Match;
use crate::wire::{Reader, Writer};
use serde::Serialize;

/// `BAD_REQUEST/BAD_LEN` at the reader's offset.
pub(crate) fn bad_len(r: &Reader, reason: impl Into<String>) -> DecodeError {
    r.error(OfpError::BadRequest(BadRequestCode::BadLen), reason)
}

/// Splits off the next length-prefixed record. Its `u16` length sits `at`
/// bytes into the record and counts the whole record; it must be at least
/// `min` and fit in what is left. Errors are `BAD_REQUEST/BAD_LEN`.
pub(crate) fn record<'a>(
    r: &mut Reader<'a>,
    at: usize,
    min: usize,
    what: &str,
) -> Result<Reader<'a>, DecodeError> {
    let mut peek = r.clone();
    peek.skip(at).map_err(|_| r.short(what))?;
    let len = usize::from(peek.u16().map_err(|_| r.short(what))?);
    if len < min {
        return Err(bad_len(
            r,
            format!("{what}: length {len} is shorter than its {min}-byte fixed part"),
        ));
    }
    if len > r.remaining() {
        return Err(bad_len(
            r,
            format!(
                "{what}: length {len} runs past the {} bytes left",
                r.remaining()
            ),
        ));
    }
    r.sub(len)
}

/// Writes a `u16` length placeholder and returns where to patch it.
pub(crate) fn len_placeholder(w: &mut Vec<u8>) -> usize {
    let at = w.len();
    w.put_u16(0);
    at
}

/// Patches the `u16` length at `at` with the bytes written since `start`.
/// Records longer than 65535 bytes cannot be expressed; their length is
/// written modulo 2^16 (callers keep records small).
pub(crate) fn patch_len(w: &mut Vec<u8>, at: usize, start: usize) {
    let len = w.len() - start;
    w.patch_u16(at, len as u16);
}

/// Decodes records with `f` until `r` is empty.
pub(crate) fn decode_all<'a, T>(
    r: &mut Reader<'a>,
    mut f: impl FnMut(&mut Reader<'a>) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let mut out = Vec::new();
    while !r.is_empty() {
        out.push(f(r)?);
    }
    Ok(out)
}

/// `ofp_flow_stats_request` / `ofp_aggregate_stats_request`: which flows
/// a FLOW or AGGREGATE request is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct FlowStatsRequest {
    /// A table, or `OFPTT_ALL`.
    pub table_id: u8,
    /// Only flows with an output to this port (`OFPP_ANY`: no restriction).
    pub out_port: u32,
    /// Only flows with an output to this group (`OFPG_ANY`: no restriction).
    pub out_group: u32,
    pub cookie: u64,
    pub cookie_mask: u64,
    #[serde(rename = "match")]
    pub match_: Match,
}

impl FlowStatsRequest {
    /// Bytes before the match.
    pub const FIXED_LEN: usize = 32;

    /// Decodes the request; the match runs to the end of `r`.
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let table_id = r.u8()?;
        r.skip(3)?;
        let out_port = r.u32()?;
        let out_group = r.u32()?;
        r.skip(4)?;
        let cookie = r.u64()?;
        let cookie_mask = r.u64()?;
        let match_ = Match::decode(r)?;
        Ok(FlowStatsRequest {
            table_id,
            out_port,
            out_group,
            cookie,
            cookie_mask,
            match_,
        })
    }

    /// Encodes it, computing length fields and writing padding as zeros.
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u8(self.table_id);
        w.put_zeros(3);
        w.put_u32(self.out_port);
        w.put_u32(self.out_group);
        w.put_zeros(4);
        w.put_u64(self.cookie);
        w.put_u64(self.cookie_mask);
        self.match_.encode(w);
    }
}

/// `ofp_flow_stats`: one flow entry in a FLOW reply.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct FlowStats {
    pub table_id: u8,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    /// `OFPFF_*`.
    pub flags: u16,
    pub cookie: u64,
    pub packet_count: u64,
    pub byte_count: u64,
    #[serde(rename = "match")]
    pub match_: Match,
    pub instructions: Vec<Instruction>,
}

impl FlowStats {
    /// Bytes before the match.
    pub const FIXED_LEN: usize = 48;

    /// The FLOW_MOD (ADD) that installs this entry again (counters and
    /// age are not part of it).
    pub fn into_flow_mod(self) -> FlowMod {
        FlowMod {
            table_id: self.table_id,
            priority: self.priority,
            cookie: self.cookie,
            idle_timeout: self.idle_timeout,
            hard_timeout: self.hard_timeout,
            flags: self.flags,
            match_: self.match_,
            instructions: self.instructions,
            ..FlowMod::default()
        }
    }

    /// Decodes one from `r`, checking every length (errors in the module comment).
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let mut s = record(r, 0, Self::FIXED_LEN, "flow stats")?;
        s.skip(2)?;
        let table_id = s.u8()?;
        s.skip(1)?;
        let duration_sec = s.u32()?;
        let duration_nsec = s.u32()?;
        let priority = s.u16()?;
        let idle_timeout = s.u16()?;
        let hard_timeout = s.u16()?;
        let flags = s.u16()?;
        s.skip(4)?;
        let cookie = s.u64()?;
        let packet_count = s.u64()?;
        let byte_count = s.u64()?;
        let match_ = Match::decode(&mut s)?;
        let instructions = Instruction::decode_list(&mut s)?;
        Ok(FlowStats {
            table_id,
            duration_sec,
            duration_nsec,
            priority,
            idle_timeout,
            hard_timeout,
            flags,
            cookie,
            packet_count,
            byte_count,
            match_,
            instructions,
        })
    }

    /// Encodes it, computing length fields and writing padding as zeros.
    pub fn encode(&self, w: &mut Vec<u8>) {
        let start = w.len();
        let at = len_placeholder(w);
        w.put_u8(self.table_id);
        w.put_zeros(1);
        w.put_u32(self.duration_sec);
        w.put_u32(self.duration_nsec);
        w.put_u16(self.priority);
        w.put_u16(self.idle_timeout);
        w.put_u16(self.hard_timeout);
        w.put_u16(self.flags);
        w.put_zeros(4);
        w.put_u64(self.cookie);
        w.put_u64(self.packet_count);
        w.put_u64(self.byte_count);
        self.match_.encode(w);
        Instruction::encode_list(&self.instructions, w);
        patch_len(w, at, start);
    }
}

/// `ofp_aggregate_stats_reply`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct AggregateStats {
    pub packet_count: u64,
    pub byte_count: u64,
    pub flow_count: u32,
}

impl AggregateStats {
    /// Wire length.
    pub const LEN: usize = 24;

    /// Decodes one from `r`, checking every length (errors in the module comment).
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let packet_count = r.u64()?;
        let byte_count = r.u64()?;
        let flow_count = r.u32()?;
        r.skip(4)?;
        Ok(AggregateStats {
            packet_count,
            byte_count,
            flow_count,
        })
    }

    /// Encodes it, computing length fields and writing padding as zeros.
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u64(self.packet_count);
        w.put_u64(self.byte_count);
        w.put_u32(self.flow_count);
        w.put_zeros(4);
    }
}

/// `ofp_table_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct TableStats {
    pub table_id: u8,
    pub active_count: u32,
    pub lookup_count: u64,
    pub matched_count: u64,
}

impl TableStats {
    /// Wire length.
    pub const LEN: usize = 24;

    /// Decodes one from `r`, checking every length (errors in the module comment).
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let table_id = r.u8()?;
        r.skip(3)?;
        Ok(TableStats {
            table_id,
            active_count: r.u32()?,
            lookup_count: r.u64()?,
            matched_count: r.u64()?,
        })
    }

    /// Encodes it, computing length fields and writing padding as zeros.
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u8(self.table_id);
        w.put_zeros(3);
        w.put_u32(self.active_count);
        w.put_u64(self.lookup_count);
        w.put_u64(self.matched_count);
    }
}

/// `ofp_port_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct PortStats {
    pub port_no: u32,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_frame_err: u64,
    pub rx_over_err: u64,
    pub rx_crc_err: u64,
    pub collisions: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
}

impl PortStats {
    /// Wire length.
    pub const LEN: usize = 112;

    /// Decodes one from `r`, checking every length (errors in the module comment).
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let port_no = r.u32()?;
        r.skip(4)?;
        Ok(PortStats {
            port_no,
            rx_packets: r.u64()?,
            tx_packets: r.u64()?,
            rx_bytes: r.u64()?,
            tx_bytes: r.u64()?,
            rx_dropped: r.u64()?,
            tx_dropped: r.u64()?,
            rx_errors: r.u64()?,
            tx_errors: r.u64()?,
            rx_frame_err: r.u64()?,
            rx_over_err: r.u64()?,
            rx_crc_err: r.u64()?,
            collisions: r.u64()?,
            duration_sec: r.u32()?,
            duration_nsec: r.u32()?,
        })
    }

    /// Encodes it, computing length fields and writing padding as zeros.
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u32(self.port_no);
        w.put_zeros(4);
        for v in [
            self.rx_packets,
            self.tx_packets,
            self.rx_bytes,
            self.tx_bytes,
            self.rx_dropped,
            self.tx_dropped,
            self.rx_errors,
            self.tx_errors,
            self.rx_frame_err,
            self.rx_over_err,
            self.rx_crc_err,
            self.collisions,
        ] {
            w.put_u64(v);
        }
        w.put_u32(self.duration_sec);
        w.put_u32(self.duration_nsec);
    }
}

/// `ofp_queue_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct QueueStats {
    pub port_no: u32,
    pub queue_id: u32,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_errors: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
}

impl QueueStats {
    /// Wire length.
    pub const LEN: usize = 40;

    /// Decodes one from `r`, checking every length (errors in the module comment).
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(QueueStats {
            port_no: r.u32()?,
            queue_id: r.u32()?,
            tx_bytes: r.u64()?,
            tx_packets: r.u64()?,
            tx_errors: r.u64()?,
            duration_sec: r.u32()?,
            duration_nsec: r.u32()?,
        })
    }

    /// Encodes it, computing length fields and writing padding as zeros.
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u32(self.port_no);
        w.put_u32(self.queue_id);
        w.put_u64(self.tx_bytes);
        w.put_u64(self.tx_packets);
        w.put_u64(self.tx_errors);
        w.put_u32(self.duration_sec);
        w.put_u32(self.duration_nsec);
    }
}

/// `ofp_bucket_counter`: packet and byte counts of one bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct BucketCounter {
    pub packet_count: u64,
    pub byte_count: u64,
}

/// `ofp_group_stats`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct GroupStats {
    pub group_id: u32,
    pub ref_count: u32,
    pub packet_count: u64,
    pub byte_count: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub bucket_stats: Vec<BucketCounter>,
}

impl GroupStats {
    /// Bytes before the bucket counters (each 16 bytes).
    pub const FIXED_LEN: usize = 40;

    /// Decodes one from `r`, checking every length (errors in the module comment).
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let mut s = record(r, 0, Self::FIXED_LEN, "group stats")?;
        s.skip(4)?;
        let group_id = s.u32()?;
        let ref_count = s.u32()?;
        s.skip(4)?;
        let packet_count = s.u64()?;
        let byte_count = s.u64()?;
        let duration_sec = s.u32()?;
        let duration_nsec = s.u32()?;
        if s.remaining() % 16 != 0 {
            return Err(bad_len(
                &s,
                format!(
                    "group stats: {} bytes of bucket counters is not a multiple of 16",
                    s.remaining()
                ),
            ));
        }
        let bucket_stats = decode_all(&mut s, |s| {
            Ok(BucketCounter {
                packet_count: s.u64()?,
                byte_count: s.u64()?,
            })
        })?;
        Ok(GroupStats {
            group_id,
            ref_count,
            packet_count,
            byte_count,
            duration_sec,
            duration_nsec,
            bucket_stats,
        })
    }

    /// Encodes it, computing length fields and writing padding as zeros.
    pub fn encode(&self, w: &mut Vec<u8>) {
        let start = w.len();
        let at = len_placeholder(w);
        w.put_zeros(2);
        w.put_u32(self.group_id);
        w.put_u32(self.ref_count);
        w.put_zeros(4);
        w.put_u64(self.packet_count);
        w.put_u64(self.byte_count);
        w.put_u32(self.duration_sec);
        w.put_u32(self.duration_nsec);
        for b in &self.bucket_stats {
            w.put_u64(b.packet_count);
            w.put_u64(b.byte_count);
        }
        patch_len(w, at, start);
    }
}

/// `ofp_group_desc`: a group and its buckets.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct GroupDesc {
    #[serde(rename = "type")]
    pub group_type: GroupType,
    pub group_id: u32,
    pub buckets: Vec<Bucket>,
}

impl GroupDesc {
    /// Bytes before the buckets.
    pub const FIXED_LEN: usize = 8;

    /// The GROUP_MOD (ADD) that installs this group again.
    pub fn into_group_mod(self) -> GroupMod {
        GroupMod {
            command: GroupModCommand::Add,
            group_type: self.group_type,
            group_id: self.group_id,
            buckets: self.buckets,
        }
    }

    /// Decodes one from `r`, checking every length (errors in the module comment).
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let mut s = record(r, 0, Self::FIXED_LEN, "group desc")?;
        s.skip(2)?;
        let t = s.u8()?;
        let group_type = GroupType::from_u8(t).ok_or_else(|| {
            s.error(
                OfpError::GroupModFailed(GroupModFailedCode::BadType),
                format!("unknown group type {t}"),
            )
        })?;
        s.skip(1)?;
        let group_id = s.u32()?;
        let buckets = decode_all(&mut s, Bucket::decode)?;
        Ok(GroupDesc {
            group_type,
            group_id,
            buckets,
        })
    }

    /// Encodes it, computing length fields and writing padding as zeros.
    pub fn encode(&self, w: &mut Vec<u8>) {
        let start = w.len();
        let at = len_placeholder(w);
        w.put_u8(self.group_type as u8);
        w.put_zeros(1);
        w.put_u32(self.group_id);
        for b in &self.buckets {
            b.encode(w);
        }
        patch_len(w, at, start);
    }
}

/// `ofp_group_features`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct GroupFeatures {
    /// Bitmap of `OFPGT_*` values supported.
    pub types: u32,
    /// `OFPGFC_*` bits.
    pub capabilities: u32,
    /// Maximum number of groups of each type.
    pub max_groups: [u32; 4],
    /// Bitmaps of `OFPAT_*` supported by each type.
    pub actions: [u32; 4],
}

impl GroupFeatures {
    /// Wire length.
    pub const LEN: usize = 40;

    /// Decodes one from `r`, checking every length (errors in the module comment).
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let types = r.u32()?;
        let capabilities = r.u32()?;
        let mut max_groups = [0u32; 4];
        for v in &mut max_groups {
            *v = r.u32()?;
        }
        let mut actions = [0u32; 4];
        for v in &mut actions {
            *v = r.u32()?;
        }
        Ok(GroupFeatures {
            types,
            capabilities,
            max_groups,
            actions,
        })
    }

    /// Encodes it, computing length fields and writing padding as zeros.
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u32(self.types);
        w.put_u32(self.capabilities);
        for v in self.max_groups.iter().chain(&self.actions) {
            w.put_u32(*v);
        }
    }
}

/// `ofp_meter_band_stats`: counts of one band.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct MeterBandStats {
    pub packet_band_count: u64,
    pub byte_band_count: u64,
}

/// `ofp_meter_stats`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct MeterStats {
    pub meter_id: u32,
    pub flow_count: u32,
    pub packet_in_count: u64,
    pub byte_in_count: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub band_stats: Vec<MeterBandStats>,
}

impl MeterStats {
    /// Bytes before the band counters (each 16 bytes).
    pub const FIXED_LEN: usize = 40;

    /// Decodes one from `r`, checking every length (errors in the module comment).
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let mut s = record(r, 4, Self::FIXED_LEN, "meter stats")?;
        let meter_id = s.u32()?;
        s.skip(2 + 6)?;
        let flow_count = s.u32()?;
        let packet_in_count = s.u64()?;
        let byte_in_count = s.u64()?;
        let duration_sec = s.u32()?;
        let duration_nsec = s.u32()?;
        if s.remaining() % 16 != 0 {
            return Err(bad_len(
                &s,
                format!(
                    "meter stats: {} bytes of band counters is not a multiple of 16",
                    s.remaining()
                ),
            ));
        }
        let band_stats = decode_all(&mut s, |s| {
            Ok(MeterBandStats {
                packet_band_count: s.u64()?,
                byte_band_count: s.u64()?,
            })
        })?;
        Ok(MeterStats {
            meter_id,
            flow_count,
            packet_in_count,
            byte_in_count,
            duration_sec,
            duration_nsec,
            band_stats,
        })
    }

    /// Encodes it, computing length fields and writing padding as zeros.
    pub fn encode(&self, w: &mut Vec<u8>) {
        let start = w.len();
        w.put_u32(self.meter_id);
        let at = len_placeholder(w);
        w.put_zeros(6);
        w.put_u32(self.flow_count);
        w.put_u64(self.packet_in_count);
        w.put_u64(self.byte_in_count);
        w.put_u32(self.duration_sec);
        w.put_u32(self.duration_nsec);
        for b in &self.band_stats {
            w.put_u64(b.packet_band_count);
            w.put_u64(b.byte_band_count);
        }
        patch_len(w, at, start);
    }
}

/// `ofp_meter_config`: a meter and its bands.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct MeterConfig {
    /// `OFPMF_*`.
    pub flags: u16,
    pub meter_id: u32,
    pub bands: Vec<MeterBand>,
}

impl MeterConfig {
    /// Bytes before the bands.
    pub const FIXED_LEN: usize = 8;

    /// The METER_MOD (ADD) that installs this meter again.
    pub fn into_meter_mod(self) -> MeterMod {
        MeterMod {
            command: MeterModCommand::Add,
            flags: self.flags,
            meter_id: self.meter_id,
            bands: self.bands,
        }
    }

    /// Decodes one from `r`, checking every length (errors in the module comment).
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let mut s = record(r, 0, Self::FIXED_LEN, "meter config")?;
        s.skip(2)?;
        let flags = s.u16()?;
        let meter_id = s.u32()?;
        let bands = MeterBand::decode_list(&mut s)?;
        Ok(MeterConfig {
            flags,
            meter_id,
            bands,
        })
    }

    /// Encodes it, computing length fields and writing padding as zeros.
    pub fn encode(&self, w: &mut Vec<u8>) {
        let start = w.len();
        let at = len_placeholder(w);
        w.put_u16(self.flags);
        w.put_u32(self.meter_id);
        MeterBand::encode_list(&self.bands, w);
        patch_len(w, at, start);
    }
}

/// `ofp_meter_features`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct MeterFeatures {
    pub max_meter: u32,
    /// Bitmap of `1 << OFPMBT_*` supported.
    pub band_types: u32,
    /// `OFPMF_*` bits supported.
    pub capabilities: u32,
    pub max_bands: u8,
    pub max_color: u8,
}

impl MeterFeatures {
    /// Wire length.
    pub const LEN: usize = 16;

    /// Decodes one from `r`, checking every length (errors in the module comment).
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let f = MeterFeatures {
            max_meter: r.u32()?,
            band_types: r.u32()?,
            capabilities: r.u32()?,
            max_bands: r.u8()?,
            max_color: r.u8()?,
        };
        r.skip(2)?;
        Ok(f)
    }

    /// Encodes it, computing length fields and writing padding as zeros.
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u32(self.max_meter);
        w.put_u32(self.band_types);
        w.put_u32(self.capabilities);
        w.put_u8(self.max_bands);
        w.put_u8(self.max_color);
        w.put_zeros(2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::MeterModFailedCode;
    use crate::multipart::tests::{
        mp_header, reply, reply_round_trip, request_round_trip, BAD_LEN,
    };
    use crate::multipart::{multipart_type, MultipartReplyBody, MultipartRequestBody};

    /// An `ofp_group_stats` with `buckets` counters and the given length.
    fn group_stats(len: u16, group_id: u32, buckets: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.put_u16(len);
        b.put_zeros(2);
        b.put_u32(group_id);
        b.put_u32(2); // ref_count
        b.put_zeros(4);
        b.put_u64(100); // packet_count
        b.put_u64(6400); // byte_count
        b.put_u32(12);
        b.put_u32(34);
        for i in 0..buckets {
            b.put_u64(i + 1);
            b.put_u64((i + 1) * 64);
        }
        b
    }

    #[test]
    fn group_stats_are_40_bytes_plus_16_per_bucket() {
        let mut b = mp_header(multipart_type::GROUP, 0);
        b.extend(group_stats(40 + 2 * 16, 5, 2));
        b.extend(group_stats(40, 6, 0));
        let MultipartReplyBody::Group { stats } = reply_round_trip(&b).body else {
            panic!()
        };
        assert_eq!(stats.len(), 2);
        let g = &stats[0];
        assert_eq!((g.group_id, g.ref_count, g.packet_count), (5, 2, 100));
        assert_eq!(
            (g.byte_count, g.duration_sec, g.duration_nsec),
            (6400, 12, 34)
        );
        assert_eq!(
            g.bucket_stats,
            vec![
                BucketCounter {
                    packet_count: 1,
                    byte_count: 64
                },
                BucketCounter {
                    packet_count: 2,
                    byte_count: 128
                }
            ]
        );
        assert!(stats[1].bucket_stats.is_empty());
    }

    #[test]
    fn group_stats_length_errors() {
        for (len, extra) in [(39u16, 0usize), (48, 8), (72, 0), (0, 0)] {
            let mut b = mp_header(multipart_type::GROUP, 0);
            b.extend(group_stats(len, 1, 0));
            b.put_zeros(extra);
            let e = reply(&b).unwrap_err();
            assert_eq!(e.error, BAD_LEN, "length {len}");
        }
    }

    fn meter_stats(meter_id: u32, len: u16, bands: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.put_u32(meter_id);
        b.put_u16(len);
        b.put_zeros(6);
        b.put_u32(3); // flow_count
        b.put_u64(50);
        b.put_u64(5000);
        b.put_u32(7);
        b.put_u32(8);
        for i in 0..bands {
            b.put_u64(i + 10);
            b.put_u64(i + 1000);
        }
        b
    }

    #[test]
    fn meter_stats_are_40_bytes_plus_16_per_band() {
        let mut b = mp_header(multipart_type::METER, 0);
        b.extend(meter_stats(1, 40 + 16, 1));
        b.extend(meter_stats(2, 40 + 32, 2));
        let MultipartReplyBody::Meter { stats } = reply_round_trip(&b).body else {
            panic!()
        };
        assert_eq!(stats[0].meter_id, 1);
        assert_eq!(stats[0].flow_count, 3);
        assert_eq!(
            (stats[0].packet_in_count, stats[0].byte_in_count),
            (50, 5000)
        );
        assert_eq!((stats[0].duration_sec, stats[0].duration_nsec), (7, 8));
        assert_eq!(
            stats[1].band_stats[1],
            MeterBandStats {
                packet_band_count: 11,
                byte_band_count: 1001
            }
        );
        for (len, extra) in [(24u16, 0usize), (44, 4), (80, 0)] {
            let mut b = mp_header(multipart_type::METER, 0);
            b.extend(meter_stats(1, len, 0));
            b.put_zeros(extra);
            assert_eq!(reply(&b).unwrap_err().error, BAD_LEN, "length {len}");
        }
    }

    #[test]
    fn meter_config_carries_every_band_type() {
        let mut b = mp_header(multipart_type::METER_CONFIG, 0);
        b.put_u16(8 + 16 + 16 + 20);
        b.put_u16(0b1001); // KBPS | STATS
        b.put_u32(9);
        // drop
        b.put_u16(1);
        b.put_u16(16);
        b.put_u32(1000);
        b.put_u32(100);
        b.put_zeros(4);
        // dscp remark
        b.put_u16(2);
        b.put_u16(16);
        b.put_u32(2000);
        b.put_u32(200);
        b.put_u8(3);
        b.put_zeros(3);
        // experimenter with 4 bytes of data
        b.put_u16(0xffff);
        b.put_u16(20);
        b.put_u32(3000);
        b.put_u32(300);
        b.put_u32(0x00ab_cdef);
        b.put_u32(0x0102_0304);
        let MultipartReplyBody::MeterConfig { configs } = reply_round_trip(&b).body else {
            panic!()
        };
        assert_eq!(
            configs,
            vec![MeterConfig {
                flags: 9,
                meter_id: 9,
                bands: vec![
                    MeterBand::Drop {
                        rate: 1000,
                        burst_size: 100
                    },
                    MeterBand::DscpRemark {
                        rate: 2000,
                        burst_size: 200,
                        prec_level: 3
                    },
                    MeterBand::Experimenter {
                        rate: 3000,
                        burst_size: 300,
                        experimenter: 0xabcdef,
                        data: vec![1, 2, 3, 4]
                    }
                ]
            }]
        );

        // A drop band claiming 24 bytes (and having them) is malformed.
        let mut bad = mp_header(multipart_type::METER_CONFIG, 0);
        bad.put_u16(8 + 24);
        bad.put_u16(0);
        bad.put_u32(1);
        bad.put_u16(1);
        bad.put_u16(24);
        bad.put_zeros(20);
        assert_eq!(reply(&bad).unwrap_err().error, BAD_LEN);
        // A band shorter than its header.
        let mut bad = mp_header(multipart_type::METER_CONFIG, 0);
        bad.put_u16(8 + 8);
        bad.put_u16(0);
        bad.put_u32(1);
        bad.put_u16(1);
        bad.put_u16(8);
        bad.put_zeros(4);
        assert_eq!(reply(&bad).unwrap_err().error, BAD_LEN);
        // An unknown band type.
        let mut bad = mp_header(multipart_type::METER_CONFIG, 0);
        bad.put_u16(8 + 16);
        bad.put_u16(0);
        bad.put_u32(1);
        bad.put_u16(7);
        bad.put_u16(16);
        bad.put_zeros(12);
        assert_eq!(
            reply(&bad).unwrap_err().error,
            OfpError::MeterModFailed(MeterModFailedCode::BadBand)
        );
        // A config length past the end.
        let mut bad = mp_header(multipart_type::METER_CONFIG, 0);
        bad.put_u16(100);
        bad.put_u16(0);
        bad.put_u32(1);
        assert_eq!(reply(&bad).unwrap_err().error, BAD_LEN);
    }

    #[test]
    fn flow_stats_request_and_reply_layouts() {
        // An empty match is type 1, length 4, padded to 8.
        let empty_match = [0u8, 1, 0, 4, 0, 0, 0, 0];
        let mut b = mp_header(multipart_type::FLOW, 0);
        b.put_u8(0xff);
        b.put_zeros(3);
        b.put_u32(crate::consts::port_no::ANY);
        b.put_u32(crate::consts::group_no::ANY);
        b.put_zeros(4);
        b.put_u64(0x1234);
        b.put_u64(0xffff);
        b.put_bytes(&empty_match);
        let MultipartRequestBody::Flow(f) = request_round_trip(&b).body else {
            panic!()
        };
        assert_eq!(
            (f.table_id, f.cookie, f.cookie_mask),
            (0xff, 0x1234, 0xffff)
        );
        assert!(f.match_.fields.is_empty());
        b[0..2].copy_from_slice(&multipart_type::AGGREGATE.to_be_bytes());
        assert!(matches!(
            request_round_trip(&b).body,
            MultipartRequestBody::Aggregate(_)
        ));

        let mut b = mp_header(multipart_type::FLOW, 0);
        b.put_u16(48 + 8);
        b.put_u8(3);
        b.put_zeros(1);
        b.put_u32(10);
        b.put_u32(20);
        b.put_u16(0x8000);
        b.put_u16(60);
        b.put_u16(0);
        b.put_u16(1);
        b.put_zeros(4);
        b.put_u64(0xc0ffee);
        b.put_u64(5);
        b.put_u64(500);
        b.put_bytes(&empty_match);
        let MultipartReplyBody::Flow { stats } = reply_round_trip(&b).body else {
            panic!()
        };
        let s = &stats[0];
        assert_eq!((s.table_id, s.duration_sec, s.duration_nsec), (3, 10, 20));
        assert_eq!((s.priority, s.idle_timeout, s.flags), (0x8000, 60, 1));
        assert_eq!((s.cookie, s.packet_count, s.byte_count), (0xc0ffee, 5, 500));
        assert!(s.instructions.is_empty());
        // Length shorter than the fixed part, and past the end.
        for len in [40u16, 64] {
            let mut bad = b.clone();
            bad[8..10].copy_from_slice(&len.to_be_bytes());
            assert_eq!(reply(&bad).unwrap_err().error, BAD_LEN, "length {len}");
        }
    }

    #[test]
    fn group_desc_buckets() {
        let mut b = mp_header(multipart_type::GROUP_DESC, 0);
        b.put_u16(8 + 16 + 16);
        b.put_u8(1); // select
        b.put_zeros(1);
        b.put_u32(42);
        for (w, p) in [(10u16, 1u32), (20, 2)] {
            b.put_u16(16);
            b.put_u16(w);
            b.put_u32(p);
            b.put_u32(crate::consts::group_no::ANY);
            b.put_zeros(4);
        }
        let MultipartReplyBody::GroupDesc { groups } = reply_round_trip(&b).body else {
            panic!()
        };
        assert_eq!(groups[0].group_type, GroupType::Select);
        assert_eq!(groups[0].group_id, 42);
        assert_eq!(groups[0].buckets.len(), 2);
        assert_eq!(groups[0].buckets[1].weight, 20);
        assert_eq!(groups[0].buckets[1].watch_port, 2);
        // Bucket shorter than 16 bytes.
        let mut bad = b.clone();
        bad[16..18].copy_from_slice(&8u16.to_be_bytes());
        assert_eq!(reply(&bad).unwrap_err().error, BAD_LEN);
        // Unknown group type.
        let mut bad = b.clone();
        bad[10] = 9;
        assert_eq!(
            reply(&bad).unwrap_err().error,
            OfpError::GroupModFailed(GroupModFailedCode::BadType)
        );
    }

    #[test]
    fn nested_match_action_and_instruction_errors_propagate() {
        // Flow stats request whose match has type 0 (OFPMT_STANDARD).
        let mut b = mp_header(multipart_type::FLOW, 0);
        b.put_u8(0);
        b.put_zeros(3);
        b.put_u32(0xffff_ffff);
        b.put_u32(0xffff_ffff);
        b.put_zeros(4);
        b.put_u64(0);
        b.put_u64(0);
        b.put_bytes(&[0, 0, 0, 4, 0, 0, 0, 0]);
        let e = crate::multipart::tests::request(&b).unwrap_err();
        assert!(matches!(e.error, OfpError::BadMatch(_)), "{e}");
        assert_eq!(e.offset, 8 + 32);

        // Flow stats whose only instruction has an unknown type.
        let mut b = mp_header(multipart_type::FLOW, 0);
        b.put_u16(48 + 8 + 8);
        b.put_zeros(46);
        b.put_bytes(&[0, 1, 0, 4, 0, 0, 0, 0]);
        b.put_u16(0x77);
        b.put_u16(8);
        b.put_zeros(4);
        let e = reply(&b).unwrap_err();
        assert!(matches!(e.error, OfpError::BadInstruction(_)), "{e}");

        // Group desc whose bucket holds an action of unknown type.
        let mut b = mp_header(multipart_type::GROUP_DESC, 0);
        b.put_u16(8 + 16 + 8);
        b.put_u8(0);
        b.put_zeros(1);
        b.put_u32(1);
        b.put_u16(16 + 8);
        b.put_u16(0);
        b.put_u32(0xffff_ffff);
        b.put_u32(0xffff_ffff);
        b.put_zeros(4);
        b.put_u16(0x99);
        b.put_u16(8);
        b.put_zeros(4);
        let e = reply(&b).unwrap_err();
        assert!(matches!(e.error, OfpError::BadAction(_)), "{e}");
    }

    #[test]
    fn record_errors_point_at_the_record() {
        let mut b = mp_header(multipart_type::GROUP, 0);
        b.extend(group_stats(40, 1, 0));
        b.extend(group_stats(20, 2, 0));
        let e = reply(&b).unwrap_err();
        assert_eq!(e.error, BAD_LEN);
        assert_eq!(e.offset, 8 + 40);
        // A record cut inside its length field.
        let mut b = mp_header(multipart_type::METER, 0);
        b.put_bytes(&[0, 0, 0, 1, 0]);
        let e = reply(&b).unwrap_err();
        assert_eq!((e.error, e.offset), (BAD_LEN, 8));
    }
}
