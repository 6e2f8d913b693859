//! `OFPT_PACKET_OUT` (spec 1.3.5 §7.3.7): a packet sent by the controller
//! through an action list.

use crate::action::Action;
use crate::error::{BadRequestCode, DecodeError, OfpError};
use crate::wire::{FieldList, Reader, Writer};
use serde::Serialize;

/// `ofp_packet_out` (after the header). `actions_len` is not stored: it is
/// computed on encode.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct PacketOut {
    /// Buffer id, or `OFP_NO_BUFFER` when `data` holds the packet.
    pub buffer_id: u32,
    /// Ingress port for the actions (`OFPP_CONTROLLER` when none).
    pub in_port: u32,
    pub actions: Vec<Action>,
    /// The frame when `buffer_id` is `OFP_NO_BUFFER`.
    #[serde(serialize_with = "crate::serde_hex")]
    pub data: Vec<u8>,
}

impl Default for PacketOut {
    fn default() -> Self {
        PacketOut {
            buffer_id: crate::consts::OFP_NO_BUFFER,
            in_port: crate::consts::port_no::CONTROLLER,
            actions: Vec::new(),
            data: Vec::new(),
        }
    }
}

impl PacketOut {
    /// Decodes the body.
    pub fn decode(r: &mut Reader) -> Result<PacketOut, DecodeError> {
        let buffer_id = r.u32()?;
        let in_port = r.u32()?;
        let at = r.offset();
        let actions_len = usize::from(r.u16()?);
        r.skip(6)?;
        let mut actions_r = r.sub(actions_len).map_err(|_| {
            DecodeError::new(
                OfpError::BadRequest(BadRequestCode::BadLen),
                at,
                format!("actions_len {actions_len} exceeds the message"),
            )
        })?;
        let actions = Action::decode_list(&mut actions_r)?;
        Ok(PacketOut {
            buffer_id,
            in_port,
            actions,
            data: r.rest().to_vec(),
        })
    }

    /// Encodes the body.
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u32(self.buffer_id);
        w.put_u32(self.in_port);
        let len_at = w.len();
        w.put_u16(0);
        w.put_zeros(6);
        let start = w.len();
        Action::encode_list(&self.actions, w);
        let actions_len = w.len() - start;
        w.patch_u16(len_at, actions_len as u16);
        w.put_bytes(&self.data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::reencodes;

    #[test]
    fn layout_without_actions() {
        let body = [
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfd, // buffer, in_port
            0, 0, 0, 0, 0, 0, 0, 0, // actions_len 0, pad
            1, 2, 3,
        ];
        let p = reencodes(&body, PacketOut::decode, PacketOut::encode);
        assert_eq!(
            p,
            PacketOut {
                data: vec![1, 2, 3],
                ..PacketOut::default()
            }
        );
    }

    #[test]
    fn actions_len_past_the_end_is_bad_len() {
        let body = [0, 0, 0, 1, 0, 0, 0, 1, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0];
        let e = PacketOut::decode(&mut Reader::new(&body)).unwrap_err();
        assert_eq!(e.error, OfpError::BadRequest(BadRequestCode::BadLen));
        assert_eq!(e.offset, 8);
    }
}
