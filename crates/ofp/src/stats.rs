//! Statistics records carried in multipart replies (spec 1.3.5 §7.3.5):
//! flow, aggregate, table, port, queue, group, group description, group
//! features, meter, meter configuration and meter features, and the flow
//! stats request shared by FLOW and AGGREGATE.
//!
//! Every record here has a fixed layout or a length field of its own; the
//! decoders check that length against both the record's minimum size and
//! the bytes actually left, so a record can never reach into its
//! neighbour. Lists are decoded until their reader is empty.

use crate::error::{BadRequestCode, DecodeError, OfpError};
use crate::flow_mod::FlowMod;
use crate::group_mod::{Bucket, GroupMod, GroupModCommand, GroupType};
use crate::instruction::Instruction;
use crate::meter_mod::{MeterBand, MeterMod, MeterModCommand};
use crate::oxm::Match;
use crate::wire::{wire_layout, Reader};
use serde::Serialize;

/// `BAD_REQUEST/BAD_LEN` at the reader's offset.
pub(crate) fn bad_len(r: &Reader, reason: impl Into<String>) -> DecodeError {
    r.error(OfpError::BadRequest(BadRequestCode::BadLen), reason)
}

pub(crate) use crate::wire::{decode_all, len_placeholder, patch_len};

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
}

wire_layout! {
    FlowStatsRequest {
        table_id, pad 3, out_port, out_group, pad 4, cookie, cookie_mask, match_,
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

    /// The FLOW_REMOVED body reporting this entry's departure for
    /// `reason` (`OFPRR_*`), with these counters and age.
    pub fn into_flow_removed(self, reason: u8) -> crate::FlowRemoved {
        crate::FlowRemoved {
            cookie: self.cookie,
            priority: self.priority,
            reason,
            table_id: self.table_id,
            duration_sec: self.duration_sec,
            duration_nsec: self.duration_nsec,
            idle_timeout: self.idle_timeout,
            hard_timeout: self.hard_timeout,
            packet_count: self.packet_count,
            byte_count: self.byte_count,
            match_: self.match_,
        }
    }
}

wire_layout! {
    FlowStats: record(0, "flow stats", 48) {
        len, table_id, pad 1, duration_sec, duration_nsec, priority, idle_timeout, hard_timeout,
        flags, pad 4, cookie, packet_count, byte_count, match_, instructions,
    }
}

/// An `ofp_flow_stats` record's fixed fields, for [`encode_flow_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowStatsHead {
    pub table_id: u8,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub flags: u16,
    pub cookie: u64,
    pub packet_count: u64,
    pub byte_count: u64,
}

/// Appends one `ofp_flow_stats` record to `w` from borrowed parts, the
/// bytes [`FlowStats::encode`] writes for the same values: `write_match`
/// appends the `ofp_match` (padding included, e.g. with
/// [`Match::encode_with`]) and `write_instructions` the instruction
/// TLVs (a switch that keeps them encoded copies them). A switch
/// answering a FLOW request over a million entries writes each record
/// straight from its table this way, without building (and freeing) a
/// [`FlowStats`] per entry.
pub fn encode_flow_stats(
    w: &mut Vec<u8>,
    head: &FlowStatsHead,
    write_match: impl FnOnce(&mut Vec<u8>),
    write_instructions: impl FnOnce(&mut Vec<u8>),
) {
    let start = w.len();
    // The fixed part (its length patched below) in one copy.
    let mut fixed = [0u8; 48];
    fixed[2] = head.table_id;
    fixed[4..8].copy_from_slice(&head.duration_sec.to_be_bytes());
    fixed[8..12].copy_from_slice(&head.duration_nsec.to_be_bytes());
    fixed[12..14].copy_from_slice(&head.priority.to_be_bytes());
    fixed[14..16].copy_from_slice(&head.idle_timeout.to_be_bytes());
    fixed[16..18].copy_from_slice(&head.hard_timeout.to_be_bytes());
    fixed[18..20].copy_from_slice(&head.flags.to_be_bytes());
    fixed[24..32].copy_from_slice(&head.cookie.to_be_bytes());
    fixed[32..40].copy_from_slice(&head.packet_count.to_be_bytes());
    fixed[40..48].copy_from_slice(&head.byte_count.to_be_bytes());
    w.extend_from_slice(&fixed);
    write_match(w);
    write_instructions(w);
    patch_len(w, start, start);
}

/// `ofp_aggregate_stats_reply`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct AggregateStats {
    pub packet_count: u64,
    pub byte_count: u64,
    pub flow_count: u32,
}

wire_layout!(AggregateStats: LEN = 24, { packet_count, byte_count, flow_count, pad 4 });

/// `ofp_table_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct TableStats {
    pub table_id: u8,
    pub active_count: u32,
    pub lookup_count: u64,
    pub matched_count: u64,
}

wire_layout!(TableStats: LEN = 24, { table_id, pad 3, active_count, lookup_count, matched_count });

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

wire_layout! {
    PortStats: LEN = 112, {
        port_no, pad 4, rx_packets, tx_packets, rx_bytes, tx_bytes, rx_dropped, tx_dropped,
        rx_errors, tx_errors, rx_frame_err, rx_over_err, rx_crc_err, collisions, duration_sec,
        duration_nsec,
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

wire_layout! {
    QueueStats: LEN = 40, {
        port_no, queue_id, tx_bytes, tx_packets, tx_errors, duration_sec, duration_nsec,
    }
}

/// `ofp_bucket_counter`: packet and byte counts of one bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct BucketCounter {
    pub packet_count: u64,
    pub byte_count: u64,
}

wire_layout!(BucketCounter: LEN = 16, { packet_count, byte_count });

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

wire_layout! {
    GroupStats: record(0, "group stats", 40) {
        len, pad 2, group_id, ref_count, pad 4, packet_count, byte_count, duration_sec,
        duration_nsec, bucket_stats,
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
    /// The GROUP_MOD (ADD) that installs this group again.
    pub fn into_group_mod(self) -> GroupMod {
        GroupMod {
            command: GroupModCommand::Add,
            group_type: self.group_type,
            group_id: self.group_id,
            buckets: self.buckets,
        }
    }
}

wire_layout!(GroupDesc: record(0, "group desc", 8) { len, group_type, pad 1, group_id, buckets });

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

wire_layout!(GroupFeatures: LEN = 40, { types, capabilities, max_groups, actions });

/// `ofp_meter_band_stats`: counts of one band.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct MeterBandStats {
    pub packet_band_count: u64,
    pub byte_band_count: u64,
}

wire_layout!(MeterBandStats: LEN = 16, { packet_band_count, byte_band_count });

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

wire_layout! {
    MeterStats: record(4, "meter stats", 40) {
        meter_id, len, pad 6, flow_count, packet_in_count, byte_in_count, duration_sec,
        duration_nsec, band_stats,
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
    /// The METER_MOD (ADD) that installs this meter again.
    pub fn into_meter_mod(self) -> MeterMod {
        MeterMod {
            command: MeterModCommand::Add,
            flags: self.flags,
            meter_id: self.meter_id,
            bands: self.bands,
        }
    }
}

wire_layout!(MeterConfig: record(0, "meter config", 8) { len, flags, meter_id, bands });

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

wire_layout! {
    MeterFeatures: LEN = 16, {
        max_meter, band_types, capabilities, max_bands, max_color, pad 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::GroupModFailedCode;
    use crate::error::MeterModFailedCode;
    use crate::multipart::tests::{
        mp_header, reply, reply_round_trip, request_round_trip, BAD_LEN,
    };
    use crate::multipart::{multipart_type, MultipartReplyBody, MultipartRequestBody};
    use crate::wire::Writer;

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

        // A meter config (meter 1, no flags) holding one band of this
        // type and claimed length, followed by `body` bytes of zeros.
        let one_band = |band_type: u16, band_len: u16, body: usize| {
            let mut b = mp_header(multipart_type::METER_CONFIG, 0);
            b.put_u16(8 + 4 + body as u16);
            b.put_u16(0);
            b.put_u32(1);
            b.put_u16(band_type);
            b.put_u16(band_len);
            b.put_zeros(body);
            reply(&b).unwrap_err().error
        };
        // A drop band claiming 24 bytes (and having them) is malformed.
        assert_eq!(one_band(1, 24, 20), BAD_LEN);
        // A band shorter than its header.
        assert_eq!(one_band(1, 8, 4), BAD_LEN);
        // An unknown band type.
        assert_eq!(
            one_band(7, 16, 12),
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
