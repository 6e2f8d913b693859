//! Property tests for [`Message`]: every message type round-trips through
//! encode and decode (bytes and value), and no input makes the decoder
//! panic.

use super::Message;
use crate::async_config::AsyncConfig;
use crate::echo::{Echo, Experimenter};
use crate::error::DecodeError;
use crate::error_msg::ErrorMsg;
use crate::flow_mod::FlowMod;
use crate::flow_removed::FlowRemoved;
use crate::group_mod::{GroupMod, GroupModCommand};
use crate::hello::{Hello, HelloElement};
use crate::meter_mod::{MeterMod, MeterModCommand};
use crate::multipart::tests::strategies::arb_request_body;
use crate::multipart::{MultipartReply, MultipartReplyBody, MultipartRequest};
use crate::oxm::MacAddr;
use crate::packet_in::PacketIn;
use crate::packet_out::PacketOut;
use crate::port_status::{PortMod, PortStatus};
use crate::queue_config::{PacketQueue, QueueGetConfigReply, QueueGetConfigRequest, QueueProperty};
use crate::role::Role;
use crate::strategies::{
    arb_actions, arb_bucket, arb_group_type, arb_instructions, arb_match, arb_meter_band, arb_port,
};
use crate::switch_config::{FeaturesReply, SwitchConfig};
use crate::table_mod::TableMod;
use crate::wire::Reader;
use proptest::collection::vec;
use proptest::prelude::*;

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..max)
}

fn arb_hello() -> impl Strategy<Value = Hello> {
    let element = prop_oneof![
        vec(any::<u32>(), 0..4).prop_map(|bitmaps| HelloElement::VersionBitmap { bitmaps }),
        (
            any::<u16>().prop_filter("not a bitmap", |t| *t != 1),
            bytes(12)
        )
            .prop_map(|(elem_type, data)| HelloElement::Unknown { elem_type, data }),
    ];
    (any::<u8>(), vec(element, 0..4)).prop_map(|(version, elements)| Hello { version, elements })
}

fn arb_error() -> impl Strategy<Value = ErrorMsg> {
    prop_oneof![
        (0..0xffffu16, any::<u16>(), bytes(64)).prop_map(|(err_type, code, data)| {
            ErrorMsg::Standard {
                err_type,
                code,
                data,
            }
        }),
        (any::<u16>(), any::<u32>(), bytes(64)).prop_map(|(exp_type, experimenter, data)| {
            ErrorMsg::Experimenter {
                exp_type,
                experimenter,
                data,
            }
        }),
    ]
}

/// Decodes a body from random bytes for its fixed part, an empty match and
/// then `after`: every fixed field arbitrary without naming one; the
/// strategy then sets what follows the fixed part.
fn decode_fixed<T>(
    decode: fn(&mut Reader) -> Result<T, DecodeError>,
    mut fixed: Vec<u8>,
    after: &[u8],
) -> T {
    fixed.extend([0, 1, 0, 4, 0, 0, 0, 0]);
    fixed.extend(after);
    decode(&mut Reader::new(&fixed)).expect("a fixed part and an empty match decode")
}

fn arb_flow_mod() -> impl Strategy<Value = FlowMod> {
    (
        vec(any::<u8>(), 40),
        0..5u8,
        arb_match(),
        arb_instructions(),
    )
        .prop_map(|(mut fixed, command, match_, instructions)| {
            fixed[17] = command;
            FlowMod {
                match_,
                instructions,
                ..decode_fixed(FlowMod::decode, fixed, &[])
            }
        })
}

fn arb_group_mod() -> impl Strategy<Value = GroupMod> {
    use GroupModCommand::*;
    let command = prop::sample::select(vec![Add, Modify, Delete]);
    (
        command,
        arb_group_type(),
        any::<u32>(),
        vec(arb_bucket(), 0..4),
    )
        .prop_map(|(command, group_type, group_id, buckets)| GroupMod {
            command,
            group_type,
            group_id,
            buckets,
        })
}

fn arb_meter_mod() -> impl Strategy<Value = MeterMod> {
    use MeterModCommand::*;
    let command = prop::sample::select(vec![Add, Modify, Delete]);
    (
        command,
        any::<u16>(),
        any::<u32>(),
        vec(arb_meter_band(), 0..5),
    )
        .prop_map(|(command, flags, meter_id, bands)| MeterMod {
            command,
            flags,
            meter_id,
            bands,
        })
}

fn arb_queue_reply() -> impl Strategy<Value = QueueGetConfigReply> {
    let property = prop_oneof![
        any::<u16>().prop_map(|rate| QueueProperty::MinRate { rate }),
        any::<u16>().prop_map(|rate| QueueProperty::MaxRate { rate }),
        (any::<u32>(), bytes(12))
            .prop_map(|(experimenter, data)| QueueProperty::Experimenter { experimenter, data }),
        (3..0xffffu16, bytes(12)).prop_map(|(property_type, data)| QueueProperty::Unknown {
            property_type,
            data
        }),
    ];
    let queue = (any::<u32>(), any::<u32>(), vec(property, 0..4)).prop_map(
        |(queue_id, port, properties)| PacketQueue {
            queue_id,
            port,
            properties,
        },
    );
    (any::<u32>(), vec(queue, 0..4)).prop_map(|(port, queues)| QueueGetConfigReply { port, queues })
}

fn arb_multipart_request() -> impl Strategy<Value = MultipartRequest> {
    (any::<u16>(), arb_request_body()).prop_map(|(flags, body)| MultipartRequest { flags, body })
}

fn arb_multipart_reply() -> impl Strategy<Value = MultipartReply> {
    (any::<u16>(), vec(arb_port(), 0..4)).prop_map(|(flags, ports)| MultipartReply {
        flags,
        body: MultipartReplyBody::PortDesc { ports },
    })
}

fn arb_message() -> impl Strategy<Value = Message> {
    let simple = prop_oneof![
        arb_hello().prop_map(Message::Hello),
        arb_error().prop_map(Message::Error),
        bytes(64).prop_map(|data| Message::EchoRequest(Echo { data })),
        bytes(64).prop_map(|data| Message::EchoReply(Echo { data })),
        (any::<u32>(), any::<u32>(), bytes(64)).prop_map(|(experimenter, exp_type, data)| {
            Message::Experimenter(Experimenter {
                experimenter,
                exp_type,
                data,
            })
        }),
        Just(Message::FeaturesRequest),
        (
            any::<u64>(),
            any::<u32>(),
            any::<u8>(),
            any::<u8>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(
                |(datapath_id, n_buffers, n_tables, auxiliary_id, capabilities, reserved)| {
                    Message::FeaturesReply(FeaturesReply {
                        datapath_id,
                        n_buffers,
                        n_tables,
                        auxiliary_id,
                        capabilities,
                        reserved,
                    })
                }
            ),
        Just(Message::GetConfigRequest),
        (any::<u16>(), any::<u16>()).prop_map(|(flags, miss_send_len)| {
            Message::GetConfigReply(SwitchConfig {
                flags,
                miss_send_len,
            })
        }),
        (any::<u16>(), any::<u16>()).prop_map(|(flags, miss_send_len)| {
            Message::SetConfig(SwitchConfig {
                flags,
                miss_send_len,
            })
        }),
        Just(Message::BarrierRequest),
        Just(Message::BarrierReply),
        Just(Message::GetAsyncRequest),
    ];
    let flows = prop_oneof![
        (vec(any::<u8>(), 16), arb_match(), bytes(128)).prop_map(|(fixed, match_, data)| {
            Message::PacketIn(PacketIn {
                match_,
                data,
                ..decode_fixed(PacketIn::decode, fixed, &[0, 0])
            })
        }),
        (vec(any::<u8>(), 40), arb_match()).prop_map(|(fixed, match_)| {
            Message::FlowRemoved(FlowRemoved {
                match_,
                ..decode_fixed(FlowRemoved::decode, fixed, &[])
            })
        }),
        (any::<u8>(), arb_port())
            .prop_map(|(reason, desc)| Message::PortStatus(PortStatus { reason, desc })),
        (any::<u32>(), any::<u32>(), arb_actions(), bytes(128)).prop_map(
            |(buffer_id, in_port, actions, data)| {
                Message::PacketOut(PacketOut {
                    buffer_id,
                    in_port,
                    actions,
                    data,
                })
            }
        ),
        arb_flow_mod().prop_map(Message::FlowMod),
        arb_group_mod().prop_map(Message::GroupMod),
        arb_meter_mod().prop_map(Message::MeterMod),
    ];
    let rest = prop_oneof![
        (
            any::<u32>(),
            any::<[u8; 6]>().prop_map(MacAddr),
            any::<u32>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(|(port_no, hw_addr, config, mask, advertise)| {
                Message::PortMod(PortMod {
                    port_no,
                    hw_addr,
                    config,
                    mask,
                    advertise,
                })
            }),
        (any::<u8>(), any::<u32>())
            .prop_map(|(table_id, config)| Message::TableMod(TableMod { table_id, config })),
        arb_multipart_request().prop_map(Message::MultipartRequest),
        arb_multipart_reply().prop_map(Message::MultipartReply),
        any::<u32>()
            .prop_map(|port| Message::QueueGetConfigRequest(QueueGetConfigRequest { port })),
        arb_queue_reply().prop_map(Message::QueueGetConfigReply),
        (any::<u32>(), any::<u64>()).prop_map(|(role, generation_id)| {
            Message::RoleRequest(Role {
                role,
                generation_id,
            })
        }),
        (any::<u32>(), any::<u64>()).prop_map(|(role, generation_id)| {
            Message::RoleReply(Role {
                role,
                generation_id,
            })
        }),
        any::<[u32; 6]>().prop_map(|m| Message::GetAsyncReply(AsyncConfig {
            packet_in_mask: [m[0], m[1]],
            port_status_mask: [m[2], m[3]],
            flow_removed_mask: [m[4], m[5]],
        })),
        any::<[u32; 6]>().prop_map(|m| Message::SetAsync(AsyncConfig {
            packet_in_mask: [m[0], m[1]],
            port_status_mask: [m[2], m[3]],
            flow_removed_mask: [m[4], m[5]],
        })),
    ];
    prop_oneof![simple, flows, rest]
}

/// Bytes that start with a well-formed version-4 header of any defined
/// type whose length matches.
fn arb_headed_bytes() -> impl Strategy<Value = Vec<u8>> {
    (0u8..32, any::<u32>(), bytes(300)).prop_map(|(msg_type, xid, body)| {
        let mut b = vec![4, msg_type];
        b.extend(((body.len() + 8) as u16).to_be_bytes());
        b.extend(xid.to_be_bytes());
        b.extend(body);
        b
    })
}

fn check_stable(bytes: &[u8]) {
    if let Ok((xid, msg)) = Message::decode(bytes) {
        let again = msg.encode(xid);
        assert_eq!(again.len(), bytes.len(), "re-encoding changed the length");
        let (xid2, msg2) = Message::decode(&again).expect("an encoded message must decode");
        assert_eq!((xid2, msg2), (xid, msg));
    }
}

/// Every object key in `v` is snake_case; every string that holds bytes is
/// checked by the caller.
fn keys_are_snake_case(v: &serde_json::Value) -> Result<(), String> {
    match v {
        serde_json::Value::Object(map) => {
            for (k, child) in map {
                let ok = !k.is_empty()
                    && k.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
                if !ok {
                    return Err(format!("key `{k}` is not snake_case"));
                }
                keys_are_snake_case(child)?;
            }
            Ok(())
        }
        serde_json::Value::Array(list) => list.iter().try_for_each(keys_are_snake_case),
        _ => Ok(()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn json_uses_snake_case_names(msg in arb_message()) {
        let v = serde_json::to_value(&msg).map_err(|e| TestCaseError::fail(e.to_string()))?;
        keys_are_snake_case(&v).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn every_message_round_trips(msg in arb_message(), xid in any::<u32>()) {
        let bytes = msg.encode(xid);
        prop_assert_eq!(usize::from(u16::from_be_bytes([bytes[2], bytes[3]])), bytes.len());
        prop_assert_eq!(bytes[1], msg.msg_type());
        let (xid2, decoded) = Message::decode(&bytes)
            .map_err(|e| TestCaseError::fail(format!("{e} for {msg:?}")))?;
        prop_assert_eq!(xid2, xid);
        prop_assert_eq!(&decoded, &msg);
        prop_assert_eq!(decoded.encode(xid), bytes);
    }

    #[test]
    fn random_bytes_never_panic(b in bytes(300)) {
        check_stable(&b);
    }

    #[test]
    fn random_bodies_under_a_valid_header_never_panic(b in arb_headed_bytes()) {
        check_stable(&b);
    }

    #[test]
    fn cut_or_extended_messages_are_errors(msg in arb_message(), cut in any::<prop::sample::Index>()) {
        let bytes = msg.encode(1);
        // Any strict prefix fails: the header length no longer matches.
        let n = cut.index(bytes.len());
        prop_assert!(Message::decode(&bytes[..n]).is_err());
        // So does a message whose header claims less than it has, and a
        // fixed or self-delimited body cut short with its length patched.
        if n >= 8 {
            let mut short = bytes[..n].to_vec();
            short[2..4].copy_from_slice(&(n as u16).to_be_bytes());
            check_stable(&short);
        }
    }
}
