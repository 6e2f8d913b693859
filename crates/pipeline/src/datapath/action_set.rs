//! The action set (spec 1.3.5 §5.10): at most one action of each type,
//! a write replacing the action of the same type, executed at the end of
//! the pipeline in the spec's fixed order whatever order they were written
//! in.
//!
//! Order: copy_ttl_in; pops (pop_vlan, pop_pbb, pop_mpls); push_mpls;
//! push_pbb; push_vlan; copy_ttl_out; dec_ttl (dec_mpls_ttl, dec_nw_ttl);
//! set (set_mpls_ttl, set_nw_ttl, then set_field by OXM field number, one
//! per field); qos (set_queue); group; output. Output is ignored when a
//! group is present (the executor does that).

use ofp::{Action, Oxm};

/// Fixed slots, in execution order; set_field lives in its own list
/// between `SET_NW_TTL` and `SET_QUEUE`.
mod slot {
    pub const COPY_TTL_IN: usize = 0;
    pub const POP_VLAN: usize = 1;
    pub const POP_PBB: usize = 2;
    pub const POP_MPLS: usize = 3;
    pub const PUSH_MPLS: usize = 4;
    pub const PUSH_PBB: usize = 5;
    pub const PUSH_VLAN: usize = 6;
    pub const COPY_TTL_OUT: usize = 7;
    pub const DEC_MPLS_TTL: usize = 8;
    pub const DEC_NW_TTL: usize = 9;
    pub const SET_MPLS_TTL: usize = 10;
    pub const SET_NW_TTL: usize = 11;
    /// First slot after the set-fields.
    pub const AFTER_SET_FIELD: usize = 12;
    pub const SET_QUEUE: usize = 12;
    pub const GROUP: usize = 13;
    pub const OUTPUT: usize = 14;
    pub const N: usize = 15;
}

/// One packet's action set. `Default` is empty; [`ActionSet::clear`]
/// keeps the allocations so a worker can reuse one per packet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActionSet {
    slots: [Option<Action>; slot::N],
    /// Set-field actions, sorted by OXM field number, one per field.
    set_fields: Vec<(u8, Action)>,
}

fn slot_of(a: &Action) -> Option<usize> {
    Some(match a {
        Action::CopyTtlIn => slot::COPY_TTL_IN,
        Action::PopVlan => slot::POP_VLAN,
        Action::PopPbb => slot::POP_PBB,
        Action::PopMpls { .. } => slot::POP_MPLS,
        Action::PushMpls { .. } => slot::PUSH_MPLS,
        Action::PushPbb { .. } => slot::PUSH_PBB,
        Action::PushVlan { .. } => slot::PUSH_VLAN,
        Action::CopyTtlOut => slot::COPY_TTL_OUT,
        Action::DecMplsTtl => slot::DEC_MPLS_TTL,
        Action::DecNwTtl => slot::DEC_NW_TTL,
        Action::SetMplsTtl { .. } => slot::SET_MPLS_TTL,
        Action::SetNwTtl { .. } => slot::SET_NW_TTL,
        Action::SetQueue { .. } => slot::SET_QUEUE,
        Action::Group { .. } => slot::GROUP,
        Action::Output { .. } => slot::OUTPUT,
        Action::SetField { .. } | Action::Experimenter { .. } => return None,
    })
}

impl ActionSet {
    /// Empties the set (the clear-actions instruction).
    pub fn clear(&mut self) {
        self.slots.iter_mut().for_each(|s| *s = None);
        self.set_fields.clear();
    }

    /// True when the set holds no action.
    pub fn is_empty(&self) -> bool {
        self.slots.iter().all(Option::is_none) && self.set_fields.is_empty()
    }

    /// Merges a write-actions list: each action replaces the set's action
    /// of the same type (for set-field: of the same field). Experimenter
    /// actions are ignored (they are refused at install).
    pub fn write(&mut self, actions: &[Action]) {
        for a in actions {
            if let Some(s) = slot_of(a) {
                if let Some(slot) = self.slots.get_mut(s) {
                    *slot = Some(a.clone());
                }
            } else if let Action::SetField {
                field: Oxm::Basic { field, .. },
            } = a
            {
                let f = *field as u8;
                match self.set_fields.binary_search_by_key(&f, |(k, _)| *k) {
                    Ok(i) => {
                        if let Some(e) = self.set_fields.get_mut(i) {
                            e.1 = a.clone();
                        }
                    }
                    Err(i) => self.set_fields.insert(i, (f, a.clone())),
                }
            }
        }
    }

    /// The group action, if any.
    pub fn group(&self) -> Option<u32> {
        match self.slots.get(slot::GROUP) {
            Some(Some(Action::Group { group_id })) => Some(*group_id),
            _ => None,
        }
    }

    /// The actions in execution order (output included, even when a group
    /// makes the executor ignore it).
    pub fn iter(&self) -> impl Iterator<Item = &Action> {
        let (before, after) = self.slots.split_at(slot::AFTER_SET_FIELD);
        before
            .iter()
            .flatten()
            .chain(self.set_fields.iter().map(|(_, a)| a))
            .chain(after.iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofp::{OxmField, OxmValue};

    fn sf(field: OxmField, v: OxmValue) -> Action {
        Action::SetField {
            field: Oxm::basic(field, v),
        }
    }

    #[test]
    fn executes_in_spec_order_whatever_the_write_order() {
        let mut s = ActionSet::default();
        assert!(s.is_empty());
        s.write(&[
            Action::Output {
                port: 1,
                max_len: 0,
            },
            Action::Group { group_id: 7 },
            Action::SetQueue { queue_id: 2 },
            sf(
                OxmField::Ipv4Dst,
                OxmValue::Ipv4(std::net::Ipv4Addr::new(10, 0, 0, 1)),
            ),
            Action::SetNwTtl { nw_ttl: 9 },
            Action::DecNwTtl,
            Action::CopyTtlOut,
            Action::PushVlan { ethertype: 0x8100 },
            Action::PushPbb { ethertype: 0x88e7 },
            Action::PushMpls { ethertype: 0x8847 },
            Action::PopMpls { ethertype: 0x0800 },
            Action::PopVlan,
            Action::CopyTtlIn,
            sf(OxmField::EthDst, OxmValue::Mac(ofp::MacAddr([1; 6]))),
        ]);
        let order: Vec<u16> = s.iter().map(Action::type_code).collect();
        use ofp::action::action_type as t;
        assert_eq!(
            order,
            vec![
                t::COPY_TTL_IN,
                t::POP_VLAN,
                t::POP_MPLS,
                t::PUSH_MPLS,
                t::PUSH_PBB,
                t::PUSH_VLAN,
                t::COPY_TTL_OUT,
                t::DEC_NW_TTL,
                t::SET_NW_TTL,
                t::SET_FIELD,
                t::SET_FIELD,
                t::SET_QUEUE,
                t::GROUP,
                t::OUTPUT
            ]
        );
        // set-fields by field number: eth_dst (3) before ipv4_dst (12).
        let fields: Vec<Action> = s
            .iter()
            .filter(|a| matches!(a, Action::SetField { .. }))
            .cloned()
            .collect();
        assert_eq!(
            fields[0],
            sf(OxmField::EthDst, OxmValue::Mac(ofp::MacAddr([1; 6])))
        );
        assert_eq!(s.group(), Some(7));
    }

    #[test]
    fn write_replaces_same_type_and_clear_empties() {
        let mut s = ActionSet::default();
        s.write(&[Action::Output {
            port: 1,
            max_len: 0,
        }]);
        s.write(&[
            Action::Output {
                port: 2,
                max_len: 0,
            },
            sf(OxmField::VlanVid, OxmValue::U16(0x1005)),
        ]);
        s.write(&[sf(OxmField::VlanVid, OxmValue::U16(0x1006))]);
        let all: Vec<&Action> = s.iter().collect();
        assert_eq!(all.len(), 2);
        assert_eq!(*all[0], sf(OxmField::VlanVid, OxmValue::U16(0x1006)));
        assert_eq!(
            *all[1],
            Action::Output {
                port: 2,
                max_len: 0
            }
        );
        s.clear();
        assert!(s.is_empty());
        assert_eq!(s.iter().count(), 0);
    }
}
