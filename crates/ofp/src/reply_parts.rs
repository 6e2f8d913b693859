//! Multipart replies split into messages (spec 1.3.5 §7.3.5): a reply
//! body too long for one message (65535 bytes) goes out as several, every
//! one but the last with `OFPMPF_REPLY_MORE`, split between records.
//! [`ReplyParts`] encodes one part at a time, so a reply of a million
//! flows never exists encoded all at once, and can be refilled page by
//! page by a caller that produces the body in pages.

use crate::consts::OFP_VERSION;
use crate::header::msg_type;
use crate::multipart::{MultipartReply, MultipartReplyBody, OFPMPF_REPLY_MORE};
use crate::Message;

/// Multipart reply message header plus multipart header.
const MP_REPLY_OVERHEAD: usize = 16;

fn mp_message(xid: u32, mp_type: u16, flags: u16, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(MP_REPLY_OVERHEAD + body.len());
    put_mp_message(&mut m, xid, mp_type, flags, body);
    m
}

/// Appends the multipart reply message of `body` to `m`.
fn put_mp_message(m: &mut Vec<u8>, xid: u32, mp_type: u16, flags: u16, body: &[u8]) {
    let len = MP_REPLY_OVERHEAD + body.len();
    m.extend_from_slice(&[OFP_VERSION, msg_type::MULTIPART_REPLY]);
    m.extend_from_slice(&u16::try_from(len).unwrap_or(u16::MAX).to_be_bytes());
    m.extend_from_slice(&xid.to_be_bytes());
    m.extend_from_slice(&mp_type.to_be_bytes());
    m.extend_from_slice(&flags.to_be_bytes());
    m.extend_from_slice(&[0; 4]);
    m.extend_from_slice(body);
}

/// Encodes record `i` of a list-shaped reply body into `w`; `false` when
/// there is no record `i`. `None` for the single-record bodies.
fn encode_record(body: &MultipartReplyBody, i: usize, w: &mut Vec<u8>) -> Option<bool> {
    use MultipartReplyBody as B;
    fn one<T>(items: &[T], i: usize, w: &mut Vec<u8>, enc: impl Fn(&T, &mut Vec<u8>)) -> bool {
        items.get(i).map(|r| enc(r, w)).is_some()
    }
    Some(match body {
        B::Flow { stats } => one(stats, i, w, |s, w| s.encode(w)),
        B::Table { stats } => one(stats, i, w, |s, w| s.encode(w)),
        B::PortStats { stats } => one(stats, i, w, |s, w| s.encode(w)),
        B::Queue { stats } => one(stats, i, w, |s, w| s.encode(w)),
        B::Group { stats } => one(stats, i, w, |s, w| s.encode(w)),
        B::GroupDesc { groups } => one(groups, i, w, |s, w| s.encode(w)),
        B::Meter { stats } => one(stats, i, w, |s, w| s.encode(w)),
        B::MeterConfig { configs } => one(configs, i, w, |s, w| s.encode(w)),
        B::TableFeatures { tables } => one(tables, i, w, |s, w| s.encode(w)),
        B::PortDesc { ports } => one(ports, i, w, |s, w| s.encode(w)),
        B::Desc(_)
        | B::Aggregate(_)
        | B::GroupFeatures(_)
        | B::MeterFeatures(_)
        | B::Experimenter(_) => return None,
    })
}

/// A multipart reply being written part by part: each [`ReplyParts::next`]
/// encodes the next message of at most `max_len` bytes (list bodies split
/// between records; every message but the last has `OFPMPF_REPLY_MORE`),
/// so a reply of a million flows never exists encoded all at once. A
/// record is never split (none is longer than a message can be).
pub struct ReplyParts {
    xid: u32,
    mp_type: u16,
    body: Option<MultipartReplyBody>,
    /// Records already encoded ([`ReplyParts::new_records`]) and how far
    /// they have been written.
    records: Option<(Vec<u8>, usize)>,
    next: usize,
    /// A record encoded that did not fit the previous part.
    carry: Vec<u8>,
    budget: usize,
    done: bool,
    /// Another page follows this body: its last part says "more" too.
    pub continues: bool,
}

impl ReplyParts {
    /// The parts of `body` as the reply to request `xid`.
    pub fn new(xid: u32, body: MultipartReplyBody, max_len: usize) -> Self {
        ReplyParts {
            xid,
            mp_type: body.multipart_type(),
            body: Some(body),
            records: None,
            next: 0,
            carry: Vec::new(),
            budget: max_len.saturating_sub(MP_REPLY_OVERHEAD).max(1),
            done: false,
            continues: false,
        }
    }

    /// The parts of a list-shaped reply of type `mp_type` whose records
    /// are already encoded, back to back, in `records`: each record starts
    /// with its own `u16` length (flow stats, table features, port
    /// descriptions are of this shape; [`crate::stats::encode_flow_stats`]
    /// writes flow stats so). Split between records as [`ReplyParts::new`]
    /// splits a body.
    pub fn new_records(xid: u32, mp_type: u16, records: Vec<u8>, max_len: usize) -> Self {
        ReplyParts {
            xid,
            mp_type,
            body: None,
            records: Some((records, 0)),
            next: 0,
            carry: Vec::new(),
            budget: max_len.saturating_sub(MP_REPLY_OVERHEAD).max(1),
            done: false,
            continues: false,
        }
    }

    /// Continues with the next page's encoded `records` once this one is
    /// done (see [`ReplyParts::new_records`]).
    pub fn refill_records(&mut self, records: Vec<u8>, continues: bool) {
        self.records = Some((records, 0));
        self.body = None;
        self.done = false;
        self.continues = continues;
    }

    /// Continues with the next page's `body` (same reply type) once this
    /// one is done; `continues` says whether yet another page follows.
    pub fn refill(&mut self, body: MultipartReplyBody, continues: bool) {
        self.records = None;
        self.body = Some(body);
        self.next = 0;
        self.done = false;
        self.continues = continues;
    }

    /// The xid of the request this replies to.
    pub fn xid(&self) -> u32 {
        self.xid
    }

    /// Whether every part has been produced.
    pub fn is_done(&self) -> bool {
        self.done
    }
}

impl ReplyParts {
    /// Appends the next part to `out` (what [`Iterator::next`] gives,
    /// without a message of its own: encoded records are copied once, from
    /// the page into `out`); `false` when every part has been produced.
    pub fn next_into(&mut self, out: &mut Vec<u8>) -> bool {
        if self.done {
            return false;
        }
        if self.records.is_some() {
            return self.next_records(Some(out)).is_some();
        }
        match self.next() {
            Some(m) => {
                out.extend_from_slice(&m);
                true
            }
            None => false,
        }
    }

    /// The next part of encoded records: appended to `out` when given
    /// (`Some(vec![])` back), else returned as a message.
    fn next_records(&mut self, out: Option<&mut Vec<u8>>) -> Option<Vec<u8>> {
        let (records, at) = self.records.as_mut()?;
        // Whole records while they fit (at least one a part); a record
        // whose length is too short or runs past the end takes the rest,
        // so a bad length can neither loop nor lose bytes.
        let start = *at;
        while *at < records.len() {
            let rest = records.len() - *at;
            let len = match records.get(*at..*at + 2) {
                Some(&[hi, lo]) => usize::from(u16::from_be_bytes([hi, lo])),
                _ => rest,
            };
            let len = if len < 4 || len > rest { rest } else { len };
            if *at > start && *at + len - start > self.budget {
                break;
            }
            *at += len;
        }
        let more = *at < records.len();
        let part = records.get(start..*at).unwrap_or_default();
        let flags = if more || self.continues {
            OFPMPF_REPLY_MORE
        } else {
            0
        };
        let msg = match out {
            Some(out) => {
                put_mp_message(out, self.xid, self.mp_type, flags, part);
                Vec::new()
            }
            None => mp_message(self.xid, self.mp_type, flags, part),
        };
        if !more {
            self.done = true;
            self.records = None;
        }
        Some(msg)
    }
}

impl Iterator for ReplyParts {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        if self.done {
            return None;
        }
        if self.records.is_some() {
            return self.next_records(None);
        }
        let body = self.body.as_ref()?;
        let mut part = std::mem::take(&mut self.carry);
        let mut rec = Vec::new();
        let more = loop {
            rec.clear();
            match encode_record(body, self.next, &mut rec) {
                None => {
                    // A single-record body: one message, as encoded.
                    self.done = true;
                    let body = self.body.take()?;
                    return Some(
                        Message::MultipartReply(MultipartReply { flags: 0, body }).encode(self.xid),
                    );
                }
                Some(false) => break false,
                Some(true) => {}
            }
            self.next += 1;
            if part.is_empty() || part.len() + rec.len() <= self.budget {
                part.extend_from_slice(&rec);
            } else {
                self.carry = std::mem::take(&mut rec);
                break true;
            }
        };
        if !more {
            self.done = true;
            self.body = None;
        }
        let flags = if more || self.continues {
            OFPMPF_REPLY_MORE
        } else {
            0
        };
        Some(mp_message(self.xid, self.mp_type, flags, &part))
    }
}

/// Encodes a multipart reply whole, as the messages [`ReplyParts`] yields.
pub fn encode_multipart_reply(xid: u32, body: MultipartReplyBody, max_len: usize) -> Vec<Vec<u8>> {
    ReplyParts::new(xid, body, max_len).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_splitting_respects_a_small_limit() {
        let ports: Vec<crate::Port> = (1..=40)
            .map(|i| crate::Port {
                port_no: i,
                ..Default::default()
            })
            .collect();
        let msgs = encode_multipart_reply(
            5,
            MultipartReplyBody::PortDesc {
                ports: ports.clone(),
            },
            1024,
        );
        // 64-byte ports, 1008-byte budget: 15 per message.
        assert_eq!(msgs.len(), 3);
        let mut got = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            assert!(m.len() <= 1024);
            match Message::decode(m).unwrap().1 {
                Message::MultipartReply(MultipartReply {
                    flags,
                    body: MultipartReplyBody::PortDesc { ports },
                }) => {
                    assert_eq!(flags == OFPMPF_REPLY_MORE, i < 2);
                    got.extend(ports);
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(got, ports);
        // An empty list is one message.
        let empty = encode_multipart_reply(5, MultipartReplyBody::Flow { stats: vec![] }, 1024);
        assert_eq!(empty.len(), 1);
    }

    fn flow_stats(n: u16) -> Vec<crate::stats::FlowStats> {
        use crate::action::Action;
        use crate::instruction::Instruction;
        use crate::oxm::{Match, Oxm, OxmField, OxmValue};
        (0..n)
            .map(|i| crate::stats::FlowStats {
                table_id: (i % 3) as u8,
                duration_sec: u32::from(i),
                duration_nsec: 7,
                priority: i,
                idle_timeout: 1,
                hard_timeout: 2,
                flags: 1,
                cookie: u64::from(i) << 32,
                packet_count: u64::from(i) * 3,
                byte_count: u64::from(i) * 300,
                // Records of different lengths: 0, 1 or 2 fields.
                match_: Match {
                    fields: (0..i % 3)
                        .map(|f| Oxm::basic(OxmField::InPort, OxmValue::U32(u32::from(i + f))))
                        .collect(),
                },
                instructions: (0..i % 2)
                    .map(|_| Instruction::ApplyActions {
                        actions: vec![Action::Output {
                            port: u32::from(i),
                            max_len: 0,
                        }],
                    })
                    .collect(),
            })
            .collect()
    }

    fn records_of(stats: &[crate::stats::FlowStats]) -> Vec<u8> {
        use crate::stats::{encode_flow_stats, FlowStatsHead};
        let mut w = Vec::new();
        for s in stats {
            let head = FlowStatsHead {
                table_id: s.table_id,
                duration_sec: s.duration_sec,
                duration_nsec: s.duration_nsec,
                priority: s.priority,
                idle_timeout: s.idle_timeout,
                hard_timeout: s.hard_timeout,
                flags: s.flags,
                cookie: s.cookie,
                packet_count: s.packet_count,
                byte_count: s.byte_count,
            };
            encode_flow_stats(
                &mut w,
                &head,
                |w| {
                    crate::oxm::Match::encode_with(w, |w| {
                        for f in &s.match_.fields {
                            f.encode(w);
                        }
                    })
                },
                |w| {
                    for i in &s.instructions {
                        i.encode(w);
                    }
                },
            );
        }
        w
    }

    #[test]
    fn encoded_records_go_out_as_the_body_would() {
        use crate::multipart::multipart_type;
        for n in [0, 1, 5, 300] {
            let stats = flow_stats(n);
            let records = records_of(&stats);
            // The borrowed encoder writes what FlowStats::encode writes.
            let mut whole = Vec::new();
            for s in &stats {
                s.encode(&mut whole);
            }
            assert_eq!(records, whole);
            for max in [64, 200, 1024, 65535] {
                let by_body = encode_multipart_reply(
                    9,
                    MultipartReplyBody::Flow {
                        stats: stats.clone(),
                    },
                    max,
                );
                let by_records: Vec<_> =
                    ReplyParts::new_records(9, multipart_type::FLOW, records.clone(), max)
                        .collect();
                assert_eq!(by_records, by_body, "{n} records, max {max}");
                // Appended part by part: the same bytes, one part a call.
                let mut parts =
                    ReplyParts::new_records(9, multipart_type::FLOW, records.clone(), max);
                let mut out = Vec::new();
                let mut calls = 0;
                while parts.next_into(&mut out) {
                    calls += 1;
                }
                assert_eq!(out, by_body.concat(), "{n} records, max {max}");
                assert_eq!(calls, by_body.len());
                assert!(parts.is_done() && !parts.next_into(&mut out));
            }
        }
    }

    #[test]
    fn encoded_records_refilled_page_by_page_say_more_until_the_last() {
        use crate::multipart::multipart_type;
        let stats = flow_stats(40);
        let (a, b) = stats.split_at(25);
        let mut parts = ReplyParts::new_records(3, multipart_type::FLOW, records_of(a), 1024);
        parts.continues = true;
        let mut msgs: Vec<Vec<u8>> = parts.by_ref().collect();
        assert!(parts.is_done());
        parts.refill_records(records_of(b), false);
        msgs.extend(parts.by_ref());
        let mut got = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            match Message::decode(m).unwrap().1 {
                Message::MultipartReply(MultipartReply {
                    flags,
                    body: MultipartReplyBody::Flow { stats },
                }) => {
                    assert_eq!(flags == OFPMPF_REPLY_MORE, i + 1 < msgs.len(), "part {i}");
                    got.extend(stats);
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(got, stats);
    }

    #[test]
    fn a_bad_record_length_ends_the_reply_instead_of_looping() {
        use crate::multipart::multipart_type;
        for records in [
            vec![0u8; 3],
            vec![0, 1, 9, 9],
            vec![0xff, 0xff, 0, 0],
            vec![7],
        ] {
            let n = records.len();
            let msgs: Vec<_> =
                ReplyParts::new_records(1, multipart_type::FLOW, records, 1024).collect();
            assert_eq!(msgs.len(), 1);
            assert_eq!(msgs[0].len(), MP_REPLY_OVERHEAD + n);
        }
    }
}
