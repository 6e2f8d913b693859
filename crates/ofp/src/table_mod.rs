//! `OFPT_TABLE_MOD` (spec 1.3.5 §7.3.3): table configuration.

use crate::error::DecodeError;
use crate::wire::{Reader, Writer};
use serde::Serialize;

/// `ofp_table_mod` (after the header).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct TableMod {
    /// A table number or `OFPTT_ALL`.
    pub table_id: u8,
    /// `OFPTC_*` bits (all deprecated in 1.3; kept raw).
    pub config: u32,
}

impl TableMod {
    /// Body length (the message is 16 bytes).
    pub const BODY_LEN: usize = 8;

    /// Decodes the body.
    pub fn decode(r: &mut Reader) -> Result<TableMod, DecodeError> {
        let table_id = r.u8()?;
        r.skip(3)?;
        Ok(TableMod {
            table_id,
            config: r.u32()?,
        })
    }

    /// Encodes the body.
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u8(self.table_id);
        w.put_zeros(3);
        w.put_u32(self.config);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let t = TableMod::decode(&mut Reader::new(&[0xff, 1, 1, 1, 0, 0, 0, 3])).unwrap();
        assert_eq!(t.table_id, 0xff);
        assert_eq!(t.config, 3);
        let mut w = Vec::new();
        t.encode(&mut w);
        assert_eq!(w, [0xff, 0, 0, 0, 0, 0, 0, 3]);
    }
}
