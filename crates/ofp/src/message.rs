//! [`Message`]: every OpenFlow 1.3 message type, decoded from and encoded to
//! one whole message (header included).
//!
//! Decoding checks, in order: the header is there and its length is at
//! least 8 and equals the buffer's length (`BAD_REQUEST/BAD_LEN`); HELLO is
//! then decoded whatever its version, so that negotiation can happen; any
//! other message must be version 4 (`BAD_REQUEST/BAD_VERSION`) and of a
//! known type (`BAD_REQUEST/BAD_TYPE`); finally the body must be exactly as
//! long as its type allows (`BAD_REQUEST/BAD_LEN` for too short or trailing
//! bytes), and errors inside it (commands, matches, actions, ...) propagate
//! with their own type and code. Offsets in errors count from the first
//! byte of the message.

use crate::async_config::AsyncConfig;
use crate::consts::{OFP_HEADER_LEN, OFP_VERSION};
use crate::echo::{Echo, Experimenter};
use crate::error::{BadRequestCode, DecodeError, OfpError};
use crate::error_msg::ErrorMsg;
use crate::flow_mod::FlowMod;
use crate::flow_removed::FlowRemoved;
use crate::group_mod::GroupMod;
use crate::header::{msg_type as t, msg_type_name, Header};
use crate::hello::Hello;
use crate::meter_mod::MeterMod;
use crate::multipart::{MultipartReply, MultipartRequest};
use crate::packet_in::PacketIn;
use crate::packet_out::PacketOut;
use crate::port_status::{PortMod, PortStatus};
use crate::queue_config::{QueueGetConfigReply, QueueGetConfigRequest};
use crate::role::Role;
use crate::switch_config::{FeaturesReply, SwitchConfig};
use crate::table_mod::TableMod;
use crate::wire::{bad_len, Reader, Writer};
use serde::Serialize;

/// One OpenFlow 1.3 message (without its xid, which travels beside it).
///
/// Serialized (JSON) as the body alone; bodiless messages serialize as
/// `null`. Use [`Message::type_name`] for the type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Message {
    /// `OFPT_HELLO` (0).
    Hello(Hello),
    /// `OFPT_ERROR` (1).
    Error(ErrorMsg),
    /// `OFPT_ECHO_REQUEST` (2).
    EchoRequest(Echo),
    /// `OFPT_ECHO_REPLY` (3).
    EchoReply(Echo),
    /// `OFPT_EXPERIMENTER` (4).
    Experimenter(Experimenter),
    /// `OFPT_FEATURES_REQUEST` (5).
    FeaturesRequest,
    /// `OFPT_FEATURES_REPLY` (6).
    FeaturesReply(FeaturesReply),
    /// `OFPT_GET_CONFIG_REQUEST` (7).
    GetConfigRequest,
    /// `OFPT_GET_CONFIG_REPLY` (8).
    GetConfigReply(SwitchConfig),
    /// `OFPT_SET_CONFIG` (9).
    SetConfig(SwitchConfig),
    /// `OFPT_PACKET_IN` (10).
    PacketIn(PacketIn),
    /// `OFPT_FLOW_REMOVED` (11).
    FlowRemoved(FlowRemoved),
    /// `OFPT_PORT_STATUS` (12).
    PortStatus(PortStatus),
    /// `OFPT_PACKET_OUT` (13).
    PacketOut(PacketOut),
    /// `OFPT_FLOW_MOD` (14).
    FlowMod(FlowMod),
    /// `OFPT_GROUP_MOD` (15).
    GroupMod(GroupMod),
    /// `OFPT_PORT_MOD` (16).
    PortMod(PortMod),
    /// `OFPT_TABLE_MOD` (17).
    TableMod(TableMod),
    /// `OFPT_MULTIPART_REQUEST` (18).
    MultipartRequest(MultipartRequest),
    /// `OFPT_MULTIPART_REPLY` (19).
    MultipartReply(MultipartReply),
    /// `OFPT_BARRIER_REQUEST` (20).
    BarrierRequest,
    /// `OFPT_BARRIER_REPLY` (21).
    BarrierReply,
    /// `OFPT_QUEUE_GET_CONFIG_REQUEST` (22).
    QueueGetConfigRequest(QueueGetConfigRequest),
    /// `OFPT_QUEUE_GET_CONFIG_REPLY` (23).
    QueueGetConfigReply(QueueGetConfigReply),
    /// `OFPT_ROLE_REQUEST` (24).
    RoleRequest(Role),
    /// `OFPT_ROLE_REPLY` (25).
    RoleReply(Role),
    /// `OFPT_GET_ASYNC_REQUEST` (26).
    GetAsyncRequest,
    /// `OFPT_GET_ASYNC_REPLY` (27).
    GetAsyncReply(AsyncConfig),
    /// `OFPT_SET_ASYNC` (28).
    SetAsync(AsyncConfig),
    /// `OFPT_METER_MOD` (29).
    MeterMod(MeterMod),
}

impl Message {
    /// Decodes exactly one whole message (header included) and returns its
    /// xid with it. Never panics.
    pub fn decode(bytes: &[u8]) -> Result<(u32, Message), DecodeError> {
        let header = Header::decode(bytes)?;
        if usize::from(header.length) != bytes.len() {
            return Err(bad_len(
                2,
                format!(
                    "header length {} but the message is {} bytes",
                    header.length,
                    bytes.len()
                ),
            ));
        }
        let mut r = Reader::new(bytes);
        r.skip(OFP_HEADER_LEN)?;
        if header.msg_type == t::HELLO {
            let hello = Hello::decode(header.version, &mut r)?;
            return Ok((header.xid, Message::Hello(hello)));
        }
        if header.version != OFP_VERSION {
            return Err(DecodeError::new(
                OfpError::BadRequest(BadRequestCode::BadVersion),
                0,
                format!("version {:#04x}, expected 0x04", header.version),
            ));
        }
        let msg = match header.msg_type {
            t::ERROR => Message::Error(ErrorMsg::decode(&mut r)?),
            t::ECHO_REQUEST => Message::EchoRequest(Echo::decode(&mut r)?),
            t::ECHO_REPLY => Message::EchoReply(Echo::decode(&mut r)?),
            t::EXPERIMENTER => Message::Experimenter(Experimenter::decode(&mut r)?),
            t::FEATURES_REQUEST => Message::FeaturesRequest,
            t::FEATURES_REPLY => Message::FeaturesReply(FeaturesReply::decode(&mut r)?),
            t::GET_CONFIG_REQUEST => Message::GetConfigRequest,
            t::GET_CONFIG_REPLY => Message::GetConfigReply(SwitchConfig::decode(&mut r)?),
            t::SET_CONFIG => Message::SetConfig(SwitchConfig::decode(&mut r)?),
            t::PACKET_IN => Message::PacketIn(PacketIn::decode(&mut r)?),
            t::FLOW_REMOVED => Message::FlowRemoved(FlowRemoved::decode(&mut r)?),
            t::PORT_STATUS => Message::PortStatus(PortStatus::decode(&mut r)?),
            t::PACKET_OUT => Message::PacketOut(PacketOut::decode(&mut r)?),
            t::FLOW_MOD => Message::FlowMod(FlowMod::decode(&mut r)?),
            t::GROUP_MOD => Message::GroupMod(GroupMod::decode(&mut r)?),
            t::PORT_MOD => Message::PortMod(PortMod::decode(&mut r)?),
            t::TABLE_MOD => Message::TableMod(TableMod::decode(&mut r)?),
            t::MULTIPART_REQUEST => Message::MultipartRequest(MultipartRequest::decode(&mut r)?),
            t::MULTIPART_REPLY => Message::MultipartReply(MultipartReply::decode(&mut r)?),
            t::BARRIER_REQUEST => Message::BarrierRequest,
            t::BARRIER_REPLY => Message::BarrierReply,
            t::QUEUE_GET_CONFIG_REQUEST => {
                Message::QueueGetConfigRequest(QueueGetConfigRequest::decode(&mut r)?)
            }
            t::QUEUE_GET_CONFIG_REPLY => {
                Message::QueueGetConfigReply(QueueGetConfigReply::decode(&mut r)?)
            }
            t::ROLE_REQUEST => Message::RoleRequest(Role::decode(&mut r)?),
            t::ROLE_REPLY => Message::RoleReply(Role::decode(&mut r)?),
            t::GET_ASYNC_REQUEST => Message::GetAsyncRequest,
            t::GET_ASYNC_REPLY => Message::GetAsyncReply(AsyncConfig::decode(&mut r)?),
            t::SET_ASYNC => Message::SetAsync(AsyncConfig::decode(&mut r)?),
            t::METER_MOD => Message::MeterMod(MeterMod::decode(&mut r)?),
            other => {
                return Err(DecodeError::new(
                    OfpError::BadRequest(BadRequestCode::BadType),
                    1,
                    format!("unknown message type {other}"),
                ))
            }
        };
        if !r.is_empty() {
            return Err(bad_len(
                r.offset(),
                format!(
                    "{} trailing bytes after the {} body",
                    r.remaining(),
                    msg.type_name()
                ),
            ));
        }
        Ok((header.xid, msg))
    }

    /// Encodes the whole message with `xid`. The version is 4 except for a
    /// HELLO, which carries its own. Bodies longer than 65527 bytes cannot be
    /// expressed on the wire; the caller must not build them (the length
    /// field would be wrong).
    pub fn encode(&self, xid: u32) -> Vec<u8> {
        let mut w = Vec::with_capacity(64);
        let version = match self {
            Message::Hello(h) => h.version,
            _ => OFP_VERSION,
        };
        Header {
            version,
            msg_type: self.msg_type(),
            length: 0,
            xid,
        }
        .encode(&mut w);
        match self {
            Message::Hello(m) => m.encode(&mut w),
            Message::Error(m) => m.encode(&mut w),
            Message::EchoRequest(m) | Message::EchoReply(m) => m.encode(&mut w),
            Message::Experimenter(m) => m.encode(&mut w),
            Message::FeaturesReply(m) => m.encode(&mut w),
            Message::GetConfigReply(m) | Message::SetConfig(m) => m.encode(&mut w),
            Message::PacketIn(m) => m.encode(&mut w),
            Message::FlowRemoved(m) => m.encode(&mut w),
            Message::PortStatus(m) => m.encode(&mut w),
            Message::PacketOut(m) => m.encode(&mut w),
            Message::FlowMod(m) => m.encode(&mut w),
            Message::GroupMod(m) => m.encode(&mut w),
            Message::PortMod(m) => m.encode(&mut w),
            Message::TableMod(m) => m.encode(&mut w),
            Message::MultipartRequest(m) => m.encode(&mut w),
            Message::MultipartReply(m) => m.encode(&mut w),
            Message::QueueGetConfigRequest(m) => m.encode(&mut w),
            Message::QueueGetConfigReply(m) => m.encode(&mut w),
            Message::RoleRequest(m) | Message::RoleReply(m) => m.encode(&mut w),
            Message::GetAsyncReply(m) | Message::SetAsync(m) => m.encode(&mut w),
            Message::MeterMod(m) => m.encode(&mut w),
            Message::FeaturesRequest
            | Message::GetConfigRequest
            | Message::BarrierRequest
            | Message::BarrierReply
            | Message::GetAsyncRequest => {}
        }
        let len = u16::try_from(w.len()).unwrap_or(u16::MAX);
        w.patch_u16(2, len);
        w
    }

    /// The `OFPT_*` number.
    pub fn msg_type(&self) -> u8 {
        match self {
            Message::Hello(_) => t::HELLO,
            Message::Error(_) => t::ERROR,
            Message::EchoRequest(_) => t::ECHO_REQUEST,
            Message::EchoReply(_) => t::ECHO_REPLY,
            Message::Experimenter(_) => t::EXPERIMENTER,
            Message::FeaturesRequest => t::FEATURES_REQUEST,
            Message::FeaturesReply(_) => t::FEATURES_REPLY,
            Message::GetConfigRequest => t::GET_CONFIG_REQUEST,
            Message::GetConfigReply(_) => t::GET_CONFIG_REPLY,
            Message::SetConfig(_) => t::SET_CONFIG,
            Message::PacketIn(_) => t::PACKET_IN,
            Message::FlowRemoved(_) => t::FLOW_REMOVED,
            Message::PortStatus(_) => t::PORT_STATUS,
            Message::PacketOut(_) => t::PACKET_OUT,
            Message::FlowMod(_) => t::FLOW_MOD,
            Message::GroupMod(_) => t::GROUP_MOD,
            Message::PortMod(_) => t::PORT_MOD,
            Message::TableMod(_) => t::TABLE_MOD,
            Message::MultipartRequest(_) => t::MULTIPART_REQUEST,
            Message::MultipartReply(_) => t::MULTIPART_REPLY,
            Message::BarrierRequest => t::BARRIER_REQUEST,
            Message::BarrierReply => t::BARRIER_REPLY,
            Message::QueueGetConfigRequest(_) => t::QUEUE_GET_CONFIG_REQUEST,
            Message::QueueGetConfigReply(_) => t::QUEUE_GET_CONFIG_REPLY,
            Message::RoleRequest(_) => t::ROLE_REQUEST,
            Message::RoleReply(_) => t::ROLE_REPLY,
            Message::GetAsyncRequest => t::GET_ASYNC_REQUEST,
            Message::GetAsyncReply(_) => t::GET_ASYNC_REPLY,
            Message::SetAsync(_) => t::SET_ASYNC,
            Message::MeterMod(_) => t::METER_MOD,
        }
    }

    /// The spec's name of the type without `OFPT_`, e.g. `FLOW_MOD`.
    pub fn type_name(&self) -> &'static str {
        msg_type_name(self.msg_type()).unwrap_or("UNKNOWN")
    }
}

#[cfg(test)]
#[path = "message_proptests.rs"]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{FlowModFailedCode, GroupModFailedCode, MeterModFailedCode};

    fn msg(version: u8, msg_type: u8, xid: u32, body: &[u8]) -> Vec<u8> {
        let mut b = vec![version, msg_type];
        b.extend(((body.len() + 8) as u16).to_be_bytes());
        b.extend(xid.to_be_bytes());
        b.extend(body);
        b
    }

    fn round_trip(bytes: &[u8]) -> Message {
        let (xid, m) = Message::decode(bytes).unwrap();
        assert_eq!(m.encode(xid), bytes, "{m:?}");
        assert_eq!(m.msg_type(), bytes[1]);
        m
    }

    fn err(bytes: &[u8]) -> DecodeError {
        Message::decode(bytes).unwrap_err()
    }

    const BAD_LEN: OfpError = OfpError::BadRequest(BadRequestCode::BadLen);

    #[test]
    fn bodiless_messages() {
        for (ty, name) in [
            (t::FEATURES_REQUEST, "FEATURES_REQUEST"),
            (t::GET_CONFIG_REQUEST, "GET_CONFIG_REQUEST"),
            (t::BARRIER_REQUEST, "BARRIER_REQUEST"),
            (t::BARRIER_REPLY, "BARRIER_REPLY"),
            (t::GET_ASYNC_REQUEST, "GET_ASYNC_REQUEST"),
        ] {
            let b = msg(4, ty, 0x1234_5678, &[]);
            let (xid, m) = Message::decode(&b).unwrap();
            assert_eq!(xid, 0x1234_5678);
            assert_eq!(m.type_name(), name);
            assert_eq!(m.encode(xid), b);
            // A body where none is allowed is a length error.
            let e = err(&msg(4, ty, 1, &[0]));
            assert_eq!((e.error, e.offset), (BAD_LEN, 8));
        }
    }

    #[test]
    fn simple_messages_round_trip() {
        let cases: &[(u8, &[u8])] = &[
            (t::ERROR, &[0, 1, 0, 6, 1, 2, 3]),
            (t::ECHO_REQUEST, b"abc"),
            (t::ECHO_REPLY, b""),
            (t::EXPERIMENTER, &[0, 0, 0x23, 0x20, 0, 0, 0, 1, 9]),
            (
                t::FEATURES_REPLY,
                &[
                    0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 254, 0, 0, 0, 0, 0, 0, 0x4f, 0, 0, 0, 0,
                ],
            ),
            (t::GET_CONFIG_REPLY, &[0, 0, 0, 128]),
            (t::SET_CONFIG, &[0, 1, 0xff, 0xff]),
            (t::TABLE_MOD, &[1, 0, 0, 0, 0, 0, 0, 3]),
            (t::QUEUE_GET_CONFIG_REQUEST, &[0, 0, 0, 1, 0, 0, 0, 0]),
            (
                t::QUEUE_GET_CONFIG_REPLY,
                &[
                    0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 16, 0, 0, 0, 0, 0, 0,
                ],
            ),
            (
                t::ROLE_REQUEST,
                &[0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5],
            ),
            (
                t::ROLE_REPLY,
                &[0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5],
            ),
            (t::GET_ASYNC_REPLY, &[0; 24]),
            (t::SET_ASYNC, &[1; 24]),
            (
                t::PORT_MOD,
                &[
                    0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0,
                    0, 0, 0, 0, 0, 0,
                ],
            ),
            (t::GROUP_MOD, &[0, 2, 0, 0, 0, 0, 0, 1]),
            (t::METER_MOD, &[0, 2, 0, 1, 0, 0, 0, 1]),
        ];
        for (ty, body) in cases {
            let m = round_trip(&msg(4, *ty, 7, body));
            assert_eq!(m.msg_type(), *ty);
        }
    }

    #[test]
    fn fixed_bodies_reject_short_and_trailing_bytes() {
        for (ty, len) in [
            (t::FEATURES_REPLY, 24),
            (t::GET_CONFIG_REPLY, 4),
            (t::SET_CONFIG, 4),
            (t::TABLE_MOD, 8),
            (t::PORT_MOD, 32),
            (t::PORT_STATUS, 72),
            (t::QUEUE_GET_CONFIG_REQUEST, 8),
            (t::ROLE_REQUEST, 16),
            (t::ROLE_REPLY, 16),
            (t::GET_ASYNC_REPLY, 24),
            (t::SET_ASYNC, 24),
        ] {
            let short = vec![0u8; len - 1];
            assert_eq!(
                err(&msg(4, ty, 0, &short)).error,
                BAD_LEN,
                "type {ty} short"
            );
            let long = vec![0u8; len + 1];
            let e = err(&msg(4, ty, 0, &long));
            assert_eq!((e.error, e.offset), (BAD_LEN, 8 + len), "type {ty} long");
            // Exactly right decodes.
            assert!(Message::decode(&msg(4, ty, 0, &vec![0u8; len])).is_ok());
        }
    }

    #[test]
    fn header_errors() {
        assert_eq!(err(&[4, 0, 0]).error, BAD_LEN);
        // Length field below 8.
        assert_eq!(err(&[4, 2, 0, 4, 0, 0, 0, 0]).error, BAD_LEN);
        // Length field disagrees with the buffer, both ways.
        let mut b = msg(4, t::ECHO_REQUEST, 0, b"xy");
        b[3] = 9;
        assert_eq!(err(&b).error, BAD_LEN);
        b[3] = 11;
        assert_eq!(err(&b).error, BAD_LEN);
        // Wrong version.
        let e = err(&msg(1, t::ECHO_REQUEST, 0, &[]));
        assert_eq!(e.error, OfpError::BadRequest(BadRequestCode::BadVersion));
        // Unknown type.
        let e = err(&msg(4, 30, 0, &[]));
        assert_eq!(
            (e.error, e.offset),
            (OfpError::BadRequest(BadRequestCode::BadType), 1)
        );
        let e = err(&msg(4, 255, 0, &[]));
        assert_eq!(e.error, OfpError::BadRequest(BadRequestCode::BadType));
    }

    #[test]
    fn hello_of_any_version_decodes() {
        let b = msg(1, t::HELLO, 3, &[]);
        let m = round_trip(&b);
        assert_eq!(
            m,
            Message::Hello(Hello {
                version: 1,
                elements: vec![]
            })
        );
        let b = msg(6, t::HELLO, 3, &[0, 1, 0, 8, 0, 0, 0, 0x50]);
        let Message::Hello(h) = round_trip(&b) else {
            panic!("not a hello")
        };
        assert_eq!(h.versions(), vec![4, 6]);
        let b = Message::Hello(Hello::default()).encode(1);
        assert_eq!(b, [4, 0, 0, 16, 0, 0, 0, 1, 0, 1, 0, 8, 0, 0, 0, 0x10]);
    }

    #[test]
    fn command_errors_propagate() {
        let e = err(&msg(4, t::GROUP_MOD, 0, &[0, 9, 0, 0, 0, 0, 0, 1]));
        assert_eq!(
            e.error,
            OfpError::GroupModFailed(GroupModFailedCode::BadCommand)
        );
        assert_eq!(e.offset, 8);
        let e = err(&msg(4, t::GROUP_MOD, 0, &[0, 0, 9, 0, 0, 0, 0, 1]));
        assert_eq!(
            e.error,
            OfpError::GroupModFailed(GroupModFailedCode::BadType)
        );
        let e = err(&msg(4, t::METER_MOD, 0, &[0, 9, 0, 0, 0, 0, 0, 1]));
        assert_eq!(
            e.error,
            OfpError::MeterModFailed(MeterModFailedCode::BadCommand)
        );
        let e = err(&msg(
            4,
            t::METER_MOD,
            0,
            &[
                0, 0, 0, 0, 0, 0, 0, 1, 0, 7, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ],
        ));
        assert_eq!(
            (e.error, e.offset),
            (OfpError::MeterModFailed(MeterModFailedCode::BadBand), 16)
        );
        let mut fm = vec![0u8; 16];
        fm.extend([0, 9, 0, 0, 0, 0, 0, 0]);
        fm.extend([0xff; 12]);
        fm.extend([0, 0, 0, 0, 0, 1, 0, 4, 0, 0, 0, 0]);
        let e = err(&msg(4, t::FLOW_MOD, 0, &fm));
        assert_eq!(
            (e.error, e.offset),
            (OfpError::FlowModFailed(FlowModFailedCode::BadCommand), 25)
        );
    }

    /// A flow-mod body with the given match and instruction bytes.
    fn flow_mod(match_: &[u8], instructions: &[u8]) -> Vec<u8> {
        let mut fm = vec![0u8; 16];
        fm.extend([0, 0, 0, 0, 0, 0, 0x80, 0]); // table 0, ADD, timeouts, prio
        fm.extend([0xff; 12]);
        fm.extend([0, 0, 0, 0]);
        fm.extend(match_);
        fm.extend(instructions);
        msg(4, t::FLOW_MOD, 9, &fm)
    }

    const EMPTY_MATCH: [u8; 8] = [0, 1, 0, 4, 0, 0, 0, 0];

    #[test]
    fn nested_errors_propagate_with_absolute_offsets() {
        // A well-formed flow-mod: output to port 1 in an apply-actions.
        let output = [0, 0, 0, 16, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 0, 0, 0];
        let mut apply = vec![0, 4, 0, 24, 0, 0, 0, 0];
        apply.extend(output);
        round_trip(&flow_mod(&EMPTY_MATCH, &apply));

        // Match of type 0 (OFPMT_STANDARD): a BAD_MATCH error at byte 48.
        let e = err(&flow_mod(&[0, 0, 0, 4, 0, 0, 0, 0], &[]));
        assert!(matches!(e.error, OfpError::BadMatch(_)), "{e}");
        assert_eq!(e.offset, 48);

        // Unknown instruction type 9 right after the match.
        let e = err(&flow_mod(&EMPTY_MATCH, &[0, 9, 0, 8, 0, 0, 0, 0]));
        assert!(matches!(e.error, OfpError::BadInstruction(_)), "{e}");
        assert_eq!(e.offset, 56);

        // Unknown action type 99 inside the apply-actions.
        let mut bad_apply = vec![0, 4, 0, 16, 0, 0, 0, 0];
        bad_apply.extend([0, 99, 0, 8, 0, 0, 0, 0]);
        let e = err(&flow_mod(&EMPTY_MATCH, &bad_apply));
        assert!(matches!(e.error, OfpError::BadAction(_)), "{e}");
        assert_eq!(e.offset, 64);

        // The same bad action in a packet-out and in a group bucket.
        let mut po = vec![0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0, 8, 0, 0, 0, 0, 0, 0];
        po.extend([0, 99, 0, 8, 0, 0, 0, 0]);
        let e = err(&msg(4, t::PACKET_OUT, 0, &po));
        assert!(matches!(e.error, OfpError::BadAction(_)), "{e}");
        assert_eq!(e.offset, 24);
        let mut gm = vec![0, 0, 0, 0, 0, 0, 0, 1];
        gm.extend([
            0, 24, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,
        ]);
        gm.extend([0, 99, 0, 8, 0, 0, 0, 0]);
        let e = err(&msg(4, t::GROUP_MOD, 0, &gm));
        assert!(matches!(e.error, OfpError::BadAction(_)), "{e}");
        assert_eq!(e.offset, 32);

        // A packet-in whose match runs past the message.
        let mut pi = vec![0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];
        pi.extend([0u8; 8]);
        pi.extend([0, 1, 0, 12, 0x80, 0, 0, 4]);
        let e = err(&msg(4, t::PACKET_IN, 0, &pi));
        assert!(e.is_length_error(), "{e}");

        // A flow-mod without room for its match.
        let e = err(&flow_mod(&[], &[]));
        assert!(e.is_length_error(), "{e}");
    }

    #[test]
    fn error_message_accessor() {
        let b = msg(4, t::ERROR, 0, &[0, 5, 0, 6]);
        let Message::Error(e) = round_trip(&b) else {
            panic!("not an error")
        };
        assert_eq!(
            e.error(),
            Some(OfpError::FlowModFailed(FlowModFailedCode::BadCommand))
        );
    }
}
