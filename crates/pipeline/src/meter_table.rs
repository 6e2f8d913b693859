//! The meter table (spec 1.3.5 §5.7, §6.6, §7.3.4.4): METER_MOD
//! semantics, token-bucket rate measurement on a caller-supplied clock,
//! and the METER, METER_CONFIG and METER_FEATURES answers.
//!
//! # Measuring
//!
//! Each band has its own token bucket that fills at the band's rate
//! (bits per second for `OFPMF_KBPS` meters, with 1 kbit = 1000 bits;
//! packets per second for `OFPMF_PKTPS`) up to its burst size. A packet
//! takes its cost (length × 8 bits, or one packet) from every band whose
//! bucket holds enough; the bands whose buckets do not are the ones whose
//! rate the measured rate exceeds, and of those the one with the highest
//! rate applies (spec §5.7). Tokens are kept in unit-nanoseconds (`u128`),
//! so refilling is exact integer arithmetic: `rate × elapsed_ns`.
//!
//! Burst sizes: with `OFPMF_BURST` the band's `burst_size` (kilobits or
//! packets) is the bucket size, and 0 is refused (`BAD_BURST`). Without
//! it `burst_size` is ignored, as the spec says, and the bucket holds
//! 100 ms at the band's rate, but never less than one 1518-byte frame (or
//! one packet), so that a conforming stream of full frames passes.
//!
//! # Decisions
//!
//! * Meter ids `0`, above `OFPM_MAX`, and the virtual meters
//!   `OFPM_SLOWPATH` / `OFPM_CONTROLLER` (not supported) are
//!   `INVALID_METER` for ADD and MODIFY. DELETE of `OFPM_ALL` deletes all;
//!   DELETE of an absent meter is `UNKNOWN_METER`.
//! * Flags: unknown bits, or not exactly one of KBPS and PKTPS:
//!   `BAD_FLAGS`. Bands: experimenter bands `BAD_BAND`; rate 0
//!   `BAD_RATE`; a DSCP-remark `prec_level` above 63 `BAD_BAND_VALUE`;
//!   more bands than configured `OUT_OF_BANDS`; more meters
//!   `OUT_OF_METERS`. A meter without bands is accepted: it only counts.
//! * Counters are kept whether or not `OFPMF_STATS` is set.
//! * MODIFY keeps the meter's counters and age; the bands (and their
//!   buckets and counters) are replaced.
//! * Deleting a meter removes the flows using it
//!   ([`crate::RemovalReason::MeterDelete`]).

use crate::flow_entry::FlowRemoved;
use crate::flow_table::Tables;
use crate::Time;
use ofp::consts::meter_no;
use ofp::error::MeterModFailedCode;
use ofp::meter_mod::{meter_band_type, meter_flags};
use ofp::{MeterBand, MeterMod, MeterModCommand, OfpError};
use std::collections::BTreeMap;

/// Size limits of the meter table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetersConfig {
    /// Most meters: `OUT_OF_METERS` beyond it.
    pub max_meters: usize,
    /// Most bands in one meter: `OUT_OF_BANDS` beyond it (at most 255).
    pub max_bands: u8,
}

impl Default for MetersConfig {
    /// 65536 meters of up to 8 bands.
    fn default() -> Self {
        MetersConfig {
            max_meters: 65536,
            max_bands: 8,
        }
    }
}

/// What a meter decides for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeterVerdict {
    /// No band applies: the packet goes on unchanged.
    Pass,
    /// Band `band` (index in the meter's band list) drops the packet.
    Drop { band: usize },
    /// Band `band` lowers the packet's drop precedence by `prec_level`.
    DscpRemark { band: usize, prec_level: u8 },
}

/// The state of one band.
#[derive(Clone, Debug, PartialEq, Eq)]
struct BandState {
    band: MeterBand,
    /// Units (bits or packets) per second.
    rate: u128,
    /// Bucket size in unit-nanoseconds.
    capacity: u128,
    /// Tokens now, in unit-nanoseconds.
    tokens: u128,
    packet_count: u64,
    byte_count: u64,
}

const NS: u128 = 1_000_000_000;

fn band_rate(b: &MeterBand) -> u32 {
    match b {
        MeterBand::Drop { rate, .. }
        | MeterBand::DscpRemark { rate, .. }
        | MeterBand::Experimenter { rate, .. } => *rate,
    }
}

fn band_burst(b: &MeterBand) -> u32 {
    match b {
        MeterBand::Drop { burst_size, .. }
        | MeterBand::DscpRemark { burst_size, .. }
        | MeterBand::Experimenter { burst_size, .. } => *burst_size,
    }
}

impl BandState {
    fn new(band: &MeterBand, flags: u16) -> BandState {
        let kbps = flags & meter_flags::KBPS != 0;
        let rate = u128::from(band_rate(band)) * if kbps { 1000 } else { 1 };
        let size = if flags & meter_flags::BURST != 0 {
            u128::from(band_burst(band)) * if kbps { 1000 } else { 1 }
        } else {
            let floor = if kbps { 1518 * 8 } else { 1 };
            (rate / 10).max(floor)
        };
        let capacity = size * NS;
        BandState {
            band: band.clone(),
            rate,
            capacity,
            tokens: capacity,
            packet_count: 0,
            byte_count: 0,
        }
    }
}

/// One meter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meter {
    meter_id: u32,
    flags: u16,
    bands: Vec<BandState>,
    installed_at: Time,
    /// Time of the last refill.
    last: Time,
    packet_in_count: u64,
    byte_in_count: u64,
}

impl Meter {
    fn new(mm: &MeterMod, now: Time) -> Meter {
        Meter {
            meter_id: mm.meter_id,
            flags: mm.flags,
            bands: mm
                .bands
                .iter()
                .map(|b| BandState::new(b, mm.flags))
                .collect(),
            installed_at: now,
            last: now,
            packet_in_count: 0,
            byte_in_count: 0,
        }
    }

    /// The meter's id.
    pub fn id(&self) -> u32 {
        self.meter_id
    }

    /// Measures one packet of `packet_len` bytes arriving at `now` and
    /// says which band, if any, applies to it.
    pub fn apply(&mut self, now: Time, packet_len: u32) -> MeterVerdict {
        let elapsed = u128::from(now.nanos_since(self.last));
        if now > self.last {
            self.last = now;
        }
        self.packet_in_count = self.packet_in_count.wrapping_add(1);
        self.byte_in_count = self.byte_in_count.wrapping_add(u64::from(packet_len));
        let kbps = self.flags & meter_flags::KBPS != 0;
        let cost = if kbps {
            u128::from(packet_len) * 8 * NS
        } else {
            NS
        };
        let mut chosen: Option<usize> = None;
        let mut chosen_rate = 0u128;
        for (i, b) in self.bands.iter_mut().enumerate() {
            b.tokens = b
                .tokens
                .saturating_add(b.rate.saturating_mul(elapsed))
                .min(b.capacity);
            if b.tokens >= cost {
                b.tokens -= cost;
            } else if chosen.is_none() || b.rate > chosen_rate {
                chosen = Some(i);
                chosen_rate = b.rate;
            }
        }
        let Some(i) = chosen else {
            return MeterVerdict::Pass;
        };
        let Some(b) = self.bands.get_mut(i) else {
            return MeterVerdict::Pass;
        };
        b.packet_count = b.packet_count.wrapping_add(1);
        b.byte_count = b.byte_count.wrapping_add(u64::from(packet_len));
        match b.band {
            MeterBand::DscpRemark { prec_level, .. } => MeterVerdict::DscpRemark {
                band: i,
                prec_level,
            },
            // Experimenter bands are refused at METER_MOD; drop if one
            // ever got here.
            MeterBand::Drop { .. } | MeterBand::Experimenter { .. } => {
                MeterVerdict::Drop { band: i }
            }
        }
    }
}

/// One `ofp_meter_band_stats`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BandStats {
    pub packet_band_count: u64,
    pub byte_band_count: u64,
}

/// One `ofp_meter_stats`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeterStats {
    pub meter_id: u32,
    pub flow_count: u32,
    pub packet_in_count: u64,
    pub byte_in_count: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub band_stats: Vec<BandStats>,
}

/// One `ofp_meter_config`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeterConfig {
    pub flags: u16,
    pub meter_id: u32,
    pub bands: Vec<MeterBand>,
}

/// `ofp_meter_features`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeterFeatures {
    pub max_meter: u32,
    /// Bitmap of `1 << OFPMBT_*` supported.
    pub band_types: u32,
    /// `OFPMF_*` flags supported.
    pub capabilities: u32,
    pub max_bands: u8,
    pub max_color: u8,
}

/// The meter table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Meters {
    config: MetersConfig,
    meters: BTreeMap<u32, Meter>,
}

const fn mm_failed(code: MeterModFailedCode) -> OfpError {
    OfpError::MeterModFailed(code)
}

const KNOWN_FLAGS: u16 =
    meter_flags::KBPS | meter_flags::PKTPS | meter_flags::BURST | meter_flags::STATS;

impl Meters {
    /// An empty meter table.
    pub fn new(config: MetersConfig) -> Meters {
        Meters {
            config,
            meters: BTreeMap::new(),
        }
    }

    /// Whether meter `id` exists.
    pub fn contains(&self, id: u32) -> bool {
        self.meters.contains_key(&id)
    }

    /// A meter by id.
    pub fn get(&self, id: u32) -> Option<&Meter> {
        self.meters.get(&id)
    }

    /// A meter by id, to measure packets with.
    pub fn get_mut(&mut self, id: u32) -> Option<&mut Meter> {
        self.meters.get_mut(&id)
    }

    /// Number of meters.
    pub fn len(&self) -> usize {
        self.meters.len()
    }

    /// True when there is no meter.
    pub fn is_empty(&self) -> bool {
        self.meters.is_empty()
    }

    /// Applies one METER_MOD at `now`. Deleting meters removes the flows
    /// in `tables` that use them; the FLOW_REMOVED events for those that
    /// asked are returned. On error nothing has changed.
    pub fn apply_meter_mod(
        &mut self,
        mm: &MeterMod,
        tables: &mut Tables,
        now: Time,
    ) -> Result<Vec<FlowRemoved>, OfpError> {
        match mm.command {
            MeterModCommand::Add | MeterModCommand::Modify => {
                self.check(mm)?;
                let mut meter = Meter::new(mm, now);
                if let Some(old) = self.meters.get(&mm.meter_id) {
                    meter.installed_at = old.installed_at;
                    meter.packet_in_count = old.packet_in_count;
                    meter.byte_in_count = old.byte_in_count;
                }
                self.meters.insert(mm.meter_id, meter);
                Ok(Vec::new())
            }
            MeterModCommand::Delete => {
                let id = mm.meter_id;
                if id == meter_no::ALL {
                    let ids: Vec<u32> = self.meters.keys().copied().collect();
                    self.meters.clear();
                    let mut events = Vec::new();
                    for m in ids {
                        events.extend(tables.remove_meter_users(m, now));
                    }
                    return Ok(events);
                }
                if id == 0 || id > meter_no::MAX {
                    return Err(mm_failed(MeterModFailedCode::InvalidMeter));
                }
                if self.meters.remove(&id).is_none() {
                    return Err(mm_failed(MeterModFailedCode::UnknownMeter));
                }
                Ok(tables.remove_meter_users(id, now))
            }
        }
    }

    /// Every check of an ADD or MODIFY, before anything changes.
    fn check(&self, mm: &MeterMod) -> Result<(), OfpError> {
        let id = mm.meter_id;
        if id == 0 || id > meter_no::MAX {
            return Err(mm_failed(MeterModFailedCode::InvalidMeter));
        }
        let exists = self.meters.contains_key(&id);
        match mm.command {
            MeterModCommand::Add if exists => {
                return Err(mm_failed(MeterModFailedCode::MeterExists));
            }
            MeterModCommand::Add if self.meters.len() >= self.config.max_meters => {
                return Err(mm_failed(MeterModFailedCode::OutOfMeters));
            }
            MeterModCommand::Modify if !exists => {
                return Err(mm_failed(MeterModFailedCode::UnknownMeter));
            }
            _ => {}
        }
        let rate_kinds = mm.flags & (meter_flags::KBPS | meter_flags::PKTPS);
        if mm.flags & !KNOWN_FLAGS != 0
            || rate_kinds == 0
            || rate_kinds == meter_flags::KBPS | meter_flags::PKTPS
        {
            return Err(mm_failed(MeterModFailedCode::BadFlags));
        }
        if mm.bands.len() > usize::from(self.config.max_bands) {
            return Err(mm_failed(MeterModFailedCode::OutOfBands));
        }
        for b in &mm.bands {
            if let MeterBand::Experimenter { .. } = b {
                return Err(mm_failed(MeterModFailedCode::BadBand));
            }
            if band_rate(b) == 0 {
                return Err(mm_failed(MeterModFailedCode::BadRate));
            }
            if mm.flags & meter_flags::BURST != 0 && band_burst(b) == 0 {
                return Err(mm_failed(MeterModFailedCode::BadBurst));
            }
            if let MeterBand::DscpRemark { prec_level, .. } = b {
                if *prec_level > 63 {
                    return Err(mm_failed(MeterModFailedCode::BadBandValue));
                }
            }
        }
        Ok(())
    }

    /// The METER multipart reply body for `meter_id` (`OFPM_ALL` for
    /// every meter; one that does not exist gives an empty list).
    pub fn stats(&self, meter_id: u32, tables: &Tables, now: Time) -> Vec<MeterStats> {
        self.select(meter_id)
            .map(|m| {
                let (duration_sec, duration_nsec) = now.duration_since(m.installed_at);
                MeterStats {
                    meter_id: m.meter_id,
                    flow_count: u32::try_from(tables.meter_flow_count(m.meter_id))
                        .unwrap_or(u32::MAX),
                    packet_in_count: m.packet_in_count,
                    byte_in_count: m.byte_in_count,
                    duration_sec,
                    duration_nsec,
                    band_stats: m
                        .bands
                        .iter()
                        .map(|b| BandStats {
                            packet_band_count: b.packet_count,
                            byte_band_count: b.byte_count,
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// The METER_CONFIG multipart reply body for `meter_id` (or all).
    pub fn configs(&self, meter_id: u32) -> Vec<MeterConfig> {
        self.select(meter_id)
            .map(|m| MeterConfig {
                flags: m.flags,
                meter_id: m.meter_id,
                bands: m.bands.iter().map(|b| b.band.clone()).collect(),
            })
            .collect()
    }

    fn select(&self, meter_id: u32) -> impl Iterator<Item = &Meter> {
        self.meters
            .values()
            .filter(move |m| meter_id == meter_no::ALL || m.meter_id == meter_id)
    }

    /// The METER_FEATURES reply: drop and DSCP-remark bands, both rate
    /// units, bursts and statistics.
    pub fn features(&self) -> MeterFeatures {
        MeterFeatures {
            max_meter: u32::try_from(self.config.max_meters).unwrap_or(u32::MAX),
            band_types: (1 << meter_band_type::DROP) | (1 << meter_band_type::DSCP_REMARK),
            capabilities: u32::from(KNOWN_FLAGS),
            max_bands: self.config.max_bands,
            max_color: 0,
        }
    }
}
