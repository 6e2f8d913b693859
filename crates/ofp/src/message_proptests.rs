//! Property tests for [`Message`]: every message type round-trips through
//! encode and decode (bytes and value), and no input makes the decoder
//! panic.

use super::Message;
use crate::async_config::AsyncConfig;
use crate::echo::{Echo, Experimenter};
use crate::error_msg::ErrorMsg;
use crate::flow_mod::{FlowMod, FlowModCommand};
use crate::flow_removed::FlowRemoved;
use crate::group_mod::{Bucket, GroupMod, GroupModCommand, GroupType};
use crate::hello::{Hello, HelloElement};
use crate::meter_mod::{MeterBand, MeterMod, MeterModCommand};
use crate::multipart::{
    MultipartReply, MultipartReplyBody, MultipartRequest, MultipartRequestBody,
};
use crate::oxm::MacAddr;
use crate::packet_in::PacketIn;
use crate::packet_out::PacketOut;
use crate::port::Port;
use crate::port_status::{PortMod, PortStatus};
use crate::queue_config::{PacketQueue, QueueGetConfigReply, QueueGetConfigRequest, QueueProperty};
use crate::role::Role;
use crate::strategies::{arb_actions, arb_instructions, arb_match};
use crate::switch_config::{FeaturesReply, SwitchConfig};
use crate::table_mod::TableMod;
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

fn arb_mac() -> impl Strategy<Value = MacAddr> {
    any::<[u8; 6]>().prop_map(MacAddr)
}

fn arb_port() -> impl Strategy<Value = Port> {
    (
        any::<u32>(),
        arb_mac(),
        "[a-zA-Z0-9_\\-]{0,16}",
        any::<[u32; 8]>(),
    )
        .prop_map(|(port_no, hw_addr, name, v)| Port {
            port_no,
            hw_addr,
            name,
            config: v[0],
            state: v[1],
            curr: v[2],
            advertised: v[3],
            supported: v[4],
            peer: v[5],
            curr_speed: v[6],
            max_speed: v[7],
        })
}

fn arb_flow_mod() -> impl Strategy<Value = FlowMod> {
    let command = prop_oneof![
        Just(FlowModCommand::Add),
        Just(FlowModCommand::Modify),
        Just(FlowModCommand::ModifyStrict),
        Just(FlowModCommand::Delete),
        Just(FlowModCommand::DeleteStrict),
    ];
    (
        (any::<u64>(), any::<u64>(), any::<u8>(), command),
        (any::<u16>(), any::<u16>(), any::<u16>(), any::<u32>()),
        (any::<u32>(), any::<u32>(), any::<u16>()),
        arb_match(),
        arb_instructions(),
    )
        .prop_map(
            |(
                (cookie, cookie_mask, table_id, command),
                (idle_timeout, hard_timeout, priority, buffer_id),
                (out_port, out_group, flags),
                match_,
                instructions,
            )| FlowMod {
                cookie,
                cookie_mask,
                table_id,
                command,
                idle_timeout,
                hard_timeout,
                priority,
                buffer_id,
                out_port,
                out_group,
                flags,
                match_,
                instructions,
            },
        )
}

fn arb_group_mod() -> impl Strategy<Value = GroupMod> {
    let command = prop_oneof![
        Just(GroupModCommand::Add),
        Just(GroupModCommand::Modify),
        Just(GroupModCommand::Delete),
    ];
    let group_type = prop_oneof![
        Just(GroupType::All),
        Just(GroupType::Select),
        Just(GroupType::Indirect),
        Just(GroupType::FastFailover),
    ];
    let bucket = (any::<u16>(), any::<u32>(), any::<u32>(), arb_actions()).prop_map(
        |(weight, watch_port, watch_group, actions)| Bucket {
            weight,
            watch_port,
            watch_group,
            actions,
        },
    );
    (command, group_type, any::<u32>(), vec(bucket, 0..4)).prop_map(
        |(command, group_type, group_id, buckets)| GroupMod {
            command,
            group_type,
            group_id,
            buckets,
        },
    )
}

fn arb_meter_mod() -> impl Strategy<Value = MeterMod> {
    let command = prop_oneof![
        Just(MeterModCommand::Add),
        Just(MeterModCommand::Modify),
        Just(MeterModCommand::Delete),
    ];
    let band = prop_oneof![
        (any::<u32>(), any::<u32>())
            .prop_map(|(rate, burst_size)| MeterBand::Drop { rate, burst_size }),
        (any::<u32>(), any::<u32>(), any::<u8>()).prop_map(|(rate, burst_size, prec_level)| {
            MeterBand::DscpRemark {
                rate,
                burst_size,
                prec_level,
            }
        }),
        (any::<u32>(), any::<u32>(), any::<u32>(), bytes(16)).prop_map(
            |(rate, burst_size, experimenter, data)| MeterBand::Experimenter {
                rate,
                burst_size,
                experimenter,
                data,
            }
        ),
    ];
    (command, any::<u16>(), any::<u32>(), vec(band, 0..5)).prop_map(
        |(command, flags, meter_id, bands)| MeterMod {
            command,
            flags,
            meter_id,
            bands,
        },
    )
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
    let body = prop_oneof![
        Just(MultipartRequestBody::Desc),
        Just(MultipartRequestBody::Table),
        any::<u32>().prop_map(|port_no| MultipartRequestBody::PortStats { port_no }),
        (any::<u32>(), any::<u32>())
            .prop_map(|(port_no, queue_id)| MultipartRequestBody::Queue { port_no, queue_id }),
        any::<u32>().prop_map(|group_id| MultipartRequestBody::Group { group_id }),
        Just(MultipartRequestBody::GroupDesc),
        Just(MultipartRequestBody::GroupFeatures),
        any::<u32>().prop_map(|meter_id| MultipartRequestBody::Meter { meter_id }),
        any::<u32>().prop_map(|meter_id| MultipartRequestBody::MeterConfig { meter_id }),
        Just(MultipartRequestBody::MeterFeatures),
        Just(MultipartRequestBody::PortDesc),
    ];
    (any::<u16>(), body).prop_map(|(flags, body)| MultipartRequest { flags, body })
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
        (
            (
                any::<u32>(),
                any::<u16>(),
                any::<u8>(),
                any::<u8>(),
                any::<u64>()
            ),
            arb_match(),
            bytes(128)
        )
            .prop_map(
                |((buffer_id, total_len, reason, table_id, cookie), match_, data)| {
                    Message::PacketIn(PacketIn {
                        buffer_id,
                        total_len,
                        reason,
                        table_id,
                        cookie,
                        match_,
                        data,
                    })
                }
            ),
        (
            (any::<u64>(), any::<u16>(), any::<u8>(), any::<u8>()),
            (any::<u32>(), any::<u32>(), any::<u16>(), any::<u16>()),
            (any::<u64>(), any::<u64>()),
            arb_match()
        )
            .prop_map(
                |(
                    (cookie, priority, reason, table_id),
                    (duration_sec, duration_nsec, idle_timeout, hard_timeout),
                    (packet_count, byte_count),
                    match_,
                )| {
                    Message::FlowRemoved(FlowRemoved {
                        cookie,
                        priority,
                        reason,
                        table_id,
                        duration_sec,
                        duration_nsec,
                        idle_timeout,
                        hard_timeout,
                        packet_count,
                        byte_count,
                        match_,
                    })
                }
            ),
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
            arb_mac(),
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
