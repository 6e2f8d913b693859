//! `OFPT_QUEUE_GET_CONFIG_REQUEST` / `_REPLY` (spec 1.3.5 §7.3.6) and the
//! queue description with its properties (§7.2.2).
//!
//! Queue and property lengths are taken exactly as sent (os-ken sends
//! experimenter properties whose length is not a multiple of 8, with no
//! padding), so every well-formed reply round-trips.

use crate::error::DecodeError;
use crate::wire::{bad_len, record, wire_layout, wire_numbers, Reader, Writer};
use serde::Serialize;

wire_numbers! {
    /// `OFPQT_*` queue property types.
    pub mod queue_property: u16 {
        MIN_RATE = 1, MAX_RATE = 2, EXPERIMENTER = 0xffff,
    }
}

/// `ofp_queue_get_config_request` (after the header).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct QueueGetConfigRequest {
    /// Port to query, or `OFPP_ANY` for all.
    pub port: u32,
}

impl QueueGetConfigRequest {
    /// Body length (the message is 16 bytes).
    pub const BODY_LEN: usize = 8;

    /// Decodes the body.
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let port = r.u32()?;
        r.skip(4)?;
        Ok(QueueGetConfigRequest { port })
    }

    /// Encodes the body.
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u32(self.port);
        w.put_zeros(4);
    }
}

/// A queue property.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "property", rename_all = "snake_case")]
pub enum QueueProperty {
    /// `OFPQT_MIN_RATE`: in 1/10 of a percent; above 1000 is disabled.
    MinRate { rate: u16 },
    /// `OFPQT_MAX_RATE`: in 1/10 of a percent; above 1000 is disabled.
    MaxRate { rate: u16 },
    /// `OFPQT_EXPERIMENTER`: `data` is everything after the 16 fixed bytes.
    Experimenter {
        experimenter: u32,
        #[serde(serialize_with = "crate::serde_hex")]
        data: Vec<u8>,
    },
    /// A property type this crate does not know: the bytes after its 8-byte
    /// header.
    Unknown {
        property_type: u16,
        #[serde(serialize_with = "crate::serde_hex")]
        data: Vec<u8>,
    },
}

/// `ofp_packet_queue`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct PacketQueue {
    /// Queue id.
    pub queue_id: u32,
    /// Port the queue is attached to (or, in the reply, the port asked for).
    pub port: u32,
    /// Properties in wire order.
    pub properties: Vec<QueueProperty>,
}

/// `ofp_queue_get_config_reply` (after the header).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct QueueGetConfigReply {
    /// Port the queue is attached to (or, in the reply, the port asked for).
    pub port: u32,
    /// The queues, in wire order.
    pub queues: Vec<PacketQueue>,
}

impl QueueProperty {
    /// Decodes one property.
    pub fn decode(r: &mut Reader) -> Result<QueueProperty, DecodeError> {
        let at = r.offset();
        let mut body = record(r, 2, 8, "queue property")?;
        let property_type = body.u16()?;
        let len = usize::from(body.u16()?);
        body.skip(4)?;
        let fixed_16 = || {
            if len == 16 {
                Ok(())
            } else {
                Err(bad_len(at, format!("rate property length {len}, not 16")))
            }
        };
        Ok(match property_type {
            queue_property::MIN_RATE | queue_property::MAX_RATE => {
                fixed_16()?;
                let rate = body.u16()?;
                if property_type == queue_property::MIN_RATE {
                    QueueProperty::MinRate { rate }
                } else {
                    QueueProperty::MaxRate { rate }
                }
            }
            queue_property::EXPERIMENTER => {
                let experimenter = body.u32().map_err(|_| {
                    bad_len(at, format!("experimenter property length {len} below 16"))
                })?;
                body.skip(4).map_err(|_| {
                    bad_len(at, format!("experimenter property length {len} below 16"))
                })?;
                QueueProperty::Experimenter {
                    experimenter,
                    data: body.rest().to_vec(),
                }
            }
            _ => QueueProperty::Unknown {
                property_type,
                data: body.rest().to_vec(),
            },
        })
    }

    /// Encodes one property.
    pub fn encode(&self, w: &mut Vec<u8>) {
        let start = w.len();
        match self {
            QueueProperty::MinRate { rate } | QueueProperty::MaxRate { rate } => {
                let t = if matches!(self, QueueProperty::MinRate { .. }) {
                    queue_property::MIN_RATE
                } else {
                    queue_property::MAX_RATE
                };
                w.put_u16(t);
                w.put_u16(16);
                w.put_zeros(4);
                w.put_u16(*rate);
                w.put_zeros(6);
            }
            QueueProperty::Experimenter { experimenter, data } => {
                w.put_u16(queue_property::EXPERIMENTER);
                w.put_u16(0);
                w.put_zeros(4);
                w.put_u32(*experimenter);
                w.put_zeros(4);
                w.put_bytes(data);
            }
            QueueProperty::Unknown {
                property_type,
                data,
            } => {
                w.put_u16(*property_type);
                w.put_u16(0);
                w.put_zeros(4);
                w.put_bytes(data);
            }
        }
        let len = w.len() - start;
        w.patch_u16(start + 2, len as u16);
    }
}

wire_layout!(PacketQueue: record(8, "queue", 16) { queue_id, port, len, pad 6, properties });

wire_layout!(QueueGetConfigReply { port, pad 4, queues });

crate::wire::codec_field!(QueueProperty);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{BadRequestCode, OfpError};
    use crate::wire::reencodes;

    fn reply_body() -> Vec<u8> {
        let mut b = vec![0, 0, 0, 5, 0, 0, 0, 0];
        // queue 99 on port 5, length 16 + 16 + 16 + 17
        b.extend([0, 0, 0, 99, 0, 0, 0, 5, 0, 65, 0, 0, 0, 0, 0, 0]);
        b.extend([0, 1, 0, 16, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0]);
        b.extend([0, 2, 0, 16, 0, 0, 0, 0, 0x03, 0x84, 0, 0, 0, 0, 0, 0]);
        b.extend([
            0xff, 0xff, 0, 17, 0, 0, 0, 0, 0, 0, 0x03, 0xe7, 0, 0, 0, 0, 7,
        ]);
        b
    }

    #[test]
    fn reply_with_all_property_kinds() {
        let body = reply_body();
        let reply = reencodes(
            &body,
            QueueGetConfigReply::decode,
            QueueGetConfigReply::encode,
        );
        assert_eq!(reply.port, 5);
        assert_eq!(reply.queues.len(), 1);
        let q = &reply.queues[0];
        assert_eq!((q.queue_id, q.port), (99, 5));
        assert_eq!(
            q.properties,
            vec![
                QueueProperty::MinRate { rate: 10 },
                QueueProperty::MaxRate { rate: 900 },
                QueueProperty::Experimenter {
                    experimenter: 999,
                    data: vec![7]
                },
            ]
        );
    }

    #[test]
    fn bad_lengths_are_errors() {
        let bad = OfpError::BadRequest(BadRequestCode::BadLen);
        // The reply with byte `at` set to `v`: its error and offset.
        let with = |at: usize, v: u8| {
            let mut body = reply_body();
            body[at] = v;
            let e = QueueGetConfigReply::decode(&mut Reader::new(&body)).unwrap_err();
            (e.error, e.offset)
        };
        assert_eq!(with(17, 66).0, bad, "queue longer than the message");
        assert_eq!(with(27, 12), (bad, 24), "min_rate length 12");
        assert_eq!(with(27, 4).0, bad, "property length below 8");
        assert_eq!(with(17, 15).0, bad, "queue length below 16");
    }

    #[test]
    fn request_layout() {
        let q =
            QueueGetConfigRequest::decode(&mut Reader::new(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]))
                .unwrap();
        assert_eq!(q.port, 0xffff_ffff);
        let mut w = Vec::new();
        q.encode(&mut w);
        assert_eq!(w, [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
    }
}
