//! OVSDB values in their JSON notation (RFC 7047 section 5.1): atoms,
//! sets (`["set", [...]]`, or one bare atom) and maps (`["map", [[k, v],
//! ...]]`). A [`Datum`] is kept in a canonical order so that two spellings
//! of the same value compare equal; that is how the write-back sees what
//! the database already holds.

use std::collections::BTreeMap;

use serde_json::{json, Value};

/// One scalar.
#[derive(Clone, Debug, PartialEq)]
pub enum Atom {
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
    /// A real.
    Real(f64),
    /// A boolean.
    Bool(bool),
    /// A row reference (`["uuid", ..]`; `["named-uuid", ..]` also lands
    /// here).
    Uuid(String),
}

impl Atom {
    fn parse(v: &Value) -> Option<Atom> {
        match v {
            Value::String(s) => Some(Atom::Str(s.clone())),
            Value::Bool(b) => Some(Atom::Bool(*b)),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Some(Atom::Int(i)),
                None => n.as_f64().map(Atom::Real),
            },
            Value::Array(a) if a.len() == 2 => match (&a[0], &a[1]) {
                (Value::String(tag), Value::String(u)) if tag == "uuid" || tag == "named-uuid" => {
                    Some(Atom::Uuid(u.clone()))
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// The JSON notation.
    pub fn to_json(&self) -> Value {
        match self {
            Atom::Str(s) => json!(s),
            Atom::Int(i) => json!(i),
            Atom::Real(r) => json!(r),
            Atom::Bool(b) => json!(b),
            Atom::Uuid(u) => json!(["uuid", u]),
        }
    }

    fn sort_key(&self) -> String {
        match self {
            Atom::Str(s) => format!("s{s}"),
            Atom::Int(i) => format!("i{i:+021}"),
            Atom::Real(r) => format!("r{r}"),
            Atom::Bool(b) => format!("b{b}"),
            Atom::Uuid(u) => format!("u{u}"),
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Atom::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// A column's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Datum {
    /// A set (a scalar column is a set of one).
    Set(Vec<Atom>),
    /// A map.
    Map(Vec<(Atom, Atom)>),
}

impl Datum {
    /// Parses the JSON notation; `None` when it is not a datum.
    pub fn parse(v: &Value) -> Option<Datum> {
        if let Value::Array(a) = v {
            if a.len() == 2 {
                match (&a[0], &a[1]) {
                    (Value::String(t), Value::Array(items)) if t == "set" => {
                        let atoms: Option<Vec<Atom>> = items.iter().map(Atom::parse).collect();
                        return atoms.map(Datum::set);
                    }
                    (Value::String(t), Value::Array(items)) if t == "map" => {
                        let pairs: Option<Vec<(Atom, Atom)>> = items
                            .iter()
                            .map(|p| match p {
                                Value::Array(kv) if kv.len() == 2 => {
                                    Some((Atom::parse(&kv[0])?, Atom::parse(&kv[1])?))
                                }
                                _ => None,
                            })
                            .collect();
                        return pairs.map(Datum::map);
                    }
                    _ => {}
                }
            }
        }
        Atom::parse(v).map(|a| Datum::Set(vec![a]))
    }

    /// A set in canonical order.
    pub fn set(mut atoms: Vec<Atom>) -> Datum {
        atoms.sort_by_key(Atom::sort_key);
        atoms.dedup();
        Datum::Set(atoms)
    }

    /// A map in canonical order.
    pub fn map(mut pairs: Vec<(Atom, Atom)>) -> Datum {
        pairs.sort_by_key(|(k, _)| k.sort_key());
        pairs.dedup_by(|a, b| a.0 == b.0);
        Datum::Map(pairs)
    }

    /// The empty set (an optional column left out).
    pub fn empty() -> Datum {
        Datum::Set(Vec::new())
    }

    /// A set of one string.
    pub fn str(s: &str) -> Datum {
        Datum::Set(vec![Atom::Str(s.to_string())])
    }

    /// A set of one integer.
    pub fn int(i: i64) -> Datum {
        Datum::Set(vec![Atom::Int(i)])
    }

    /// A set of one boolean.
    pub fn bool(b: bool) -> Datum {
        Datum::Set(vec![Atom::Bool(b)])
    }

    /// A string-to-string map.
    pub fn str_map(m: &BTreeMap<String, String>) -> Datum {
        Datum::map(
            m.iter()
                .map(|(k, v)| (Atom::Str(k.clone()), Atom::Str(v.clone())))
                .collect(),
        )
    }

    /// The JSON notation (a set of one is written as its atom, which every
    /// column type takes).
    pub fn to_json(&self) -> Value {
        match self {
            Datum::Set(a) if a.len() == 1 => a[0].to_json(),
            Datum::Set(a) => json!(["set", a.iter().map(Atom::to_json).collect::<Vec<_>>()]),
            Datum::Map(p) => json!([
                "map",
                p.iter()
                    .map(|(k, v)| json!([k.to_json(), v.to_json()]))
                    .collect::<Vec<_>>()
            ]),
        }
    }

    /// The atoms of a set (a map: none).
    pub fn atoms(&self) -> &[Atom] {
        match self {
            Datum::Set(a) => a,
            Datum::Map(_) => &[],
        }
    }
}

/// Reads the columns of one row (`{"column": datum, ...}`); what does not
/// parse reads as absent, never as a panic.
#[derive(Clone, Copy)]
pub struct RowRef<'a>(pub &'a serde_json::Map<String, Value>);

impl<'a> RowRef<'a> {
    /// The column's datum.
    pub fn get(&self, col: &str) -> Option<Datum> {
        self.0.get(col).and_then(Datum::parse)
    }

    /// A string column (or an optional one that is set).
    pub fn string(&self, col: &str) -> Option<String> {
        match self.get(col)? {
            Datum::Set(a) if a.len() == 1 => a[0].as_str().map(str::to_string),
            _ => None,
        }
    }

    /// An integer column (or an optional one that is set).
    pub fn int(&self, col: &str) -> Option<i64> {
        match self.get(col)? {
            Datum::Set(a) if a.len() == 1 => match a[0] {
                Atom::Int(i) => Some(i),
                _ => None,
            },
            _ => None,
        }
    }

    /// The references of a set-of-uuid column, in canonical order.
    pub fn uuids(&self, col: &str) -> Vec<String> {
        self.get(col)
            .map(|d| {
                d.atoms()
                    .iter()
                    .filter_map(|a| match a {
                        Atom::Uuid(u) => Some(u.clone()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A string-to-string map column.
    pub fn str_map(&self, col: &str) -> BTreeMap<String, String> {
        match self.get(col) {
            Some(Datum::Map(p)) => p
                .iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_str()?.to_string())))
                .collect(),
            _ => BTreeMap::new(),
        }
    }

    /// Whether the column holds anything (a non-empty set or map, or a
    /// `true`).
    pub fn is_set(&self, col: &str) -> bool {
        match self.get(col) {
            Some(Datum::Set(a)) => !a.is_empty() && a != [Atom::Bool(false)],
            Some(Datum::Map(p)) => !p.is_empty(),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_value_compare_equal() {
        let a = Datum::parse(&json!(["set", [["uuid", "b"], ["uuid", "a"]]])).unwrap();
        let b = Datum::parse(&json!(["set", [["uuid", "a"], ["uuid", "b"]]])).unwrap();
        assert_eq!(a, b);
        assert_eq!(
            Datum::parse(&json!("up")).unwrap(),
            Datum::parse(&json!(["set", ["up"]])).unwrap()
        );
        let m1 = Datum::parse(&json!(["map", [["rx_bytes", 5], ["tx_bytes", 7]]])).unwrap();
        let m2 = Datum::parse(&json!(["map", [["tx_bytes", 7], ["rx_bytes", 5]]])).unwrap();
        assert_eq!(m1, m2);
        assert_ne!(
            Datum::empty(),
            Datum::parse(&json!(["map", []])).unwrap_or(Datum::str("x"))
        );
    }

    #[test]
    fn round_trip_and_bad_input() {
        for v in [
            json!(5),
            json!("x"),
            json!(["uuid", "1234"]),
            json!(["set", []]),
            json!(["set", [1, 2]]),
            json!(["map", [["a", "b"]]]),
        ] {
            let d = Datum::parse(&v).unwrap();
            assert_eq!(Datum::parse(&d.to_json()), Some(d));
        }
        for bad in [
            json!(null),
            json!({"a": 1}),
            json!(["set", [null]]),
            json!(["map", [["a"]]]),
            json!(["set"]),
            json!(["uuid", 5]),
        ] {
            assert_eq!(Datum::parse(&bad), None, "{bad}");
        }
    }

    #[test]
    fn row_accessors_never_panic() {
        let row = json!({"name": "br0", "ports": ["set", [["uuid", "p1"]]], "ofport": ["set", []],
                         "other_config": ["map", [["datapath-id", "0000000000000001"]]],
                         "bad": {"x": 1}, "is_connected": true});
        let r = RowRef(row.as_object().unwrap());
        assert_eq!(r.string("name").as_deref(), Some("br0"));
        assert_eq!(r.uuids("ports"), vec!["p1".to_string()]);
        assert_eq!(r.int("ofport"), None);
        assert_eq!(r.str_map("other_config")["datapath-id"], "0000000000000001");
        assert_eq!(r.string("bad"), None);
        assert_eq!(r.uuids("bad"), Vec::<String>::new());
        assert_eq!(r.get("is_connected"), Some(Datum::bool(true)));
        assert!(!r.is_set("ofport"));
        assert!(r.is_set("ports"));
    }
}
