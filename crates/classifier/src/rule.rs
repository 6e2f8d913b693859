//! The rule model ([`Rule`], [`FieldMatch`], [`Hit`]), rule validation
//! into canonical form, the matching predicate, and [`LinearRef`], the
//! obviously correct linear scan every fast structure is tested against.

use packet::flow_key::FlowKey;
use std::collections::BTreeMap;

/// One constrained field of a rule: the packet's OXM field `field`
/// (numbered as in `packet::flow_key::field`) must be present and equal to
/// `value` under `mask`. Values and masks are right-aligned numbers, as
/// [`FlowKey::get`] returns them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldMatch {
    /// OXM field number (0..=39).
    pub field: u8,
    /// The value; bits outside `mask` are ignored (cleared on insert).
    pub value: u128,
    /// The mask; a zero mask means "any" and the field is dropped.
    pub mask: u128,
}

/// A classification rule: an identifier, a priority and the fields it
/// constrains. Among the rules a packet matches, the highest priority
/// wins; among equal priorities the smallest `id` wins.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Rule {
    /// Caller's identifier, unique within a table.
    pub id: u64,
    /// Priority; higher wins.
    pub priority: u16,
    /// Constrained fields (any order on input; canonical after insert).
    pub fields: Vec<FieldMatch>,
}

/// The outcome of a lookup: which rule was hit and its priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hit {
    /// The rule's id.
    pub id: u64,
    /// The rule's priority.
    pub priority: u16,
}

impl Hit {
    /// True when `self` beats `other`: higher priority, or equal priority
    /// and smaller id.
    #[inline]
    pub fn beats(&self, other: &Hit) -> bool {
        self.priority > other.priority || (self.priority == other.priority && self.id < other.id)
    }

    /// The better of two optional hits.
    #[inline]
    pub fn best(a: Option<Hit>, b: Option<Hit>) -> Option<Hit> {
        match (a, b) {
            (Some(x), Some(y)) => Some(if y.beats(&x) { y } else { x }),
            (x, None) => x,
            (None, y) => y,
        }
    }
}

/// Why a rule was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    /// A rule with this id is already in the table.
    DuplicateId(u64),
    /// The same field appears twice in one rule.
    DuplicateField(u8),
    /// A field number outside 0..=39.
    BadField(u8),
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuleError::DuplicateId(id) => write!(f, "rule id {id} already present"),
            RuleError::DuplicateField(x) => write!(f, "field {x} appears twice"),
            RuleError::BadField(x) => write!(f, "field {x} is not an OXM basic field"),
        }
    }
}

impl std::error::Error for RuleError {}

/// Highest OXM basic field number the classifier knows.
pub const MAX_FIELD: u8 = 39;

impl Rule {
    /// Puts the rule in canonical form: values masked, zero-mask fields
    /// dropped, fields sorted by number. Refuses unknown and repeated
    /// fields.
    pub fn canonicalize(&mut self) -> Result<(), RuleError> {
        for f in &mut self.fields {
            if f.field > MAX_FIELD {
                return Err(RuleError::BadField(f.field));
            }
            f.value &= f.mask;
        }
        self.fields.retain(|f| f.mask != 0);
        self.fields.sort();
        for w in self.fields.windows(2) {
            if let [a, b] = w {
                if a.field == b.field {
                    return Err(RuleError::DuplicateField(a.field));
                }
            }
        }
        Ok(())
    }

    /// The hit this rule produces.
    pub fn hit(&self) -> Hit {
        Hit {
            id: self.id,
            priority: self.priority,
        }
    }

    /// True when every field of the rule is present in `key` and equal
    /// under the mask. A field the packet lacks never matches.
    pub fn matches(&self, key: &FlowKey) -> bool {
        self.fields.iter().all(|f| match key.get(f.field) {
            Some(v) => v & f.mask == f.value & f.mask,
            None => false,
        })
    }
}

/// The reference classifier: every rule scanned on every lookup. Slow
/// (O(rules)) and obviously right; the property tests compare every fast
/// structure with it.
#[derive(Clone, Debug, Default)]
pub struct LinearRef {
    rules: BTreeMap<u64, Rule>,
}

impl LinearRef {
    /// An empty rule set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a rule (canonicalized); refuses a duplicate id.
    pub fn insert(&mut self, mut rule: Rule) -> Result<(), RuleError> {
        rule.canonicalize()?;
        if self.rules.contains_key(&rule.id) {
            return Err(RuleError::DuplicateId(rule.id));
        }
        self.rules.insert(rule.id, rule);
        Ok(())
    }

    /// Removes and returns the rule with this id.
    pub fn remove(&mut self, id: u64) -> Option<Rule> {
        self.rules.remove(&id)
    }

    /// The best matching rule: highest priority, then smallest id.
    pub fn lookup(&self, key: &FlowKey) -> Option<Hit> {
        let mut best: Option<Hit> = None;
        // Ascending id order: a strict "beats" keeps the smallest id.
        for r in self.rules.values() {
            if best.is_some_and(|b| r.priority <= b.priority) {
                continue;
            }
            if r.matches(key) {
                best = Some(r.hit());
            }
        }
        best
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// True when there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules (canonical form), in id order.
    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::flow_key::field;

    fn fm(field: u8, value: u128, mask: u128) -> FieldMatch {
        FieldMatch { field, value, mask }
    }

    #[test]
    fn canonical_form() {
        let mut r = Rule {
            id: 1,
            priority: 5,
            fields: vec![
                fm(12, 0x0a0000ff, 0xffffff00),
                fm(5, 0x800, 0xffff),
                fm(3, 7, 0),
            ],
        };
        r.canonicalize().unwrap();
        assert_eq!(
            r.fields,
            vec![fm(5, 0x800, 0xffff), fm(12, 0x0a000000, 0xffffff00)]
        );
        let mut dup = Rule {
            id: 1,
            priority: 5,
            fields: vec![fm(5, 1, 1), fm(5, 0, 2)],
        };
        assert_eq!(dup.canonicalize(), Err(RuleError::DuplicateField(5)));
        let mut bad = Rule {
            id: 1,
            priority: 5,
            fields: vec![fm(40, 1, 1)],
        };
        assert_eq!(bad.canonicalize(), Err(RuleError::BadField(40)));
    }

    #[test]
    fn reference_priority_ties_and_absent_fields() {
        let mut k = FlowKey::default();
        k.set_metadata_fields(3, 3, 0, 0);
        let mut t = LinearRef::new();
        t.insert(Rule {
            id: 9,
            priority: 10,
            fields: vec![fm(field::IN_PORT, 3, 0xffff_ffff)],
        })
        .unwrap();
        t.insert(Rule {
            id: 4,
            priority: 10,
            fields: vec![],
        })
        .unwrap();
        assert_eq!(t.lookup(&k).map(|h| h.id), Some(4), "tie -> smallest id");
        t.insert(Rule {
            id: 20,
            priority: 11,
            fields: vec![fm(field::ETH_TYPE, 0, 0xffff)],
        })
        .unwrap();
        assert_eq!(
            t.lookup(&k).map(|h| h.id),
            Some(4),
            "absent field never matches"
        );
        assert_eq!(
            t.insert(Rule {
                id: 4,
                priority: 1,
                fields: vec![]
            }),
            Err(RuleError::DuplicateId(4))
        );
        assert!(t.remove(4).is_some());
        assert_eq!(t.lookup(&k).map(|h| h.id), Some(9));
    }
}
