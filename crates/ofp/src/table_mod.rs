//! `OFPT_TABLE_MOD` (spec 1.3.5 §7.3.3): table configuration.

use crate::wire::wire_layout;
use serde::Serialize;

/// `ofp_table_mod` (after the header).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct TableMod {
    /// A table number or `OFPTT_ALL`.
    pub table_id: u8,
    /// `OFPTC_*` bits (all deprecated in 1.3; kept raw).
    pub config: u32,
}

wire_layout!(TableMod: BODY_LEN = 8, { table_id, pad 3, config });

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Reader;

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
