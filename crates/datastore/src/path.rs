//! Typed field paths: where in a configuration a finding is, as segments
//! (a bridge, a port, a field name, a position in a list) rather than
//! text. Validation gives one with every [`Diagnostic`](crate::Diagnostic);
//! a file's messages show it by position (`bridges[0].ports[1].port`), a
//! transaction's by name (`bridges.br0.ports.eth3.port`), and a
//! transaction gives each finding to the operation that touched the same
//! bridge, port or field, comparing segments, never text.

use std::fmt::Write as _;

/// One step of a [`FieldPath`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Seg {
    /// A bridge: its position in the list (when it has one: an operation
    /// names bridges by name only) and its name, which is what identifies
    /// it.
    Bridge {
        /// Position in `bridges`.
        index: Option<usize>,
        /// Its name.
        name: String,
    },
    /// A port of a bridge: its position in the bridge's list (when known)
    /// and its label, the interface name or, for a port without one (a
    /// patch port), its number; the label identifies it.
    Port {
        /// Position in the bridge's `ports`.
        index: Option<usize>,
        /// Interface name, or the port number in decimal.
        label: String,
    },
    /// A field or section name (`dataplane`, `controllers`, `port`).
    Key(String),
    /// A position in a list (`controllers[1]`, `flows[3]`).
    Index(usize),
}

/// A path to a field of a configuration; the empty path is the whole of
/// it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FieldPath {
    segs: Vec<Seg>,
}

impl FieldPath {
    /// The whole configuration.
    pub fn root() -> FieldPath {
        FieldPath::default()
    }

    /// The segments, outermost first.
    pub fn segs(&self) -> &[Seg] {
        &self.segs
    }

    /// Whether this is the whole configuration.
    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    /// This path with `seg` appended.
    pub fn push(&self, seg: Seg) -> FieldPath {
        let mut p = self.clone();
        p.segs.push(seg);
        p
    }

    /// A top-level bridge by name (and position, when known).
    pub fn bridge(index: Option<usize>, name: &str) -> FieldPath {
        FieldPath::root().push(Seg::Bridge {
            index,
            name: name.to_string(),
        })
    }

    /// A port of this (bridge) path.
    pub fn port(&self, index: Option<usize>, label: impl Into<String>) -> FieldPath {
        self.push(Seg::Port {
            index,
            label: label.into(),
        })
    }

    /// Field names below this path: `rest` is one name or several joined
    /// by `.`, each optionally followed by `[N]` positions
    /// (`"queues[2].id"`). Names come from the code, never from input.
    pub fn at(&self, rest: impl AsRef<str>) -> FieldPath {
        let mut p = self.clone();
        for part in rest.as_ref().split('.') {
            let (name, mut tail) = match part.find('[') {
                Some(i) => (&part[..i], &part[i..]),
                None => (part, ""),
            };
            if !name.is_empty() {
                p.segs.push(Seg::Key(name.to_string()));
            }
            while let Some(t) = tail.strip_prefix('[') {
                let Some(end) = t.find(']') else { break };
                match t[..end].parse() {
                    Ok(i) => p.segs.push(Seg::Index(i)),
                    Err(_) => p.segs.push(Seg::Key(t[..end].to_string())),
                }
                tail = &t[end + 1..];
            }
        }
        p
    }

    /// One field name below this path, taken whole (a name from input,
    /// which may hold `.`).
    pub fn key(&self, name: impl Into<String>) -> FieldPath {
        self.push(Seg::Key(name.into()))
    }

    /// Position `i` in the list at this path.
    pub fn index(&self, i: usize) -> FieldPath {
        self.push(Seg::Index(i))
    }

    /// The last field name (`n_tables` of `bridges[0].n_tables`).
    pub fn leaf(&self) -> &str {
        self.segs
            .iter()
            .rev()
            .find_map(|s| match s {
                Seg::Key(k) => Some(k.as_str()),
                _ => None,
            })
            .unwrap_or("")
    }

    /// The path as text: bridges and ports by position
    /// (`bridges[0].ports[1].port`), or by name when `by_name` or when
    /// the position is not known (`bridges.br0.ports.eth3.port`).
    pub fn render(&self, by_name: bool) -> String {
        let mut out = String::new();
        for s in &self.segs {
            match s {
                Seg::Bridge { index, name } => {
                    out.push_str(if out.is_empty() { "" } else { "." });
                    match index {
                        Some(i) if !by_name => {
                            let _ = write!(out, "bridges[{i}]");
                        }
                        _ => {
                            let _ = write!(out, "bridges.{name}");
                        }
                    }
                }
                Seg::Port { index, label } => match index {
                    Some(i) if !by_name => {
                        let _ = write!(out, ".ports[{i}]");
                    }
                    _ => {
                        let _ = write!(out, ".ports.{label}");
                    }
                },
                Seg::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
                Seg::Index(i) => {
                    let _ = write!(out, "[{i}]");
                }
            }
        }
        out
    }

    /// Whether one path is the other or holds it; bridges and ports are
    /// compared by what identifies them (name, label), not by position,
    /// which operations change.
    /// The whole configuration is related to nothing.
    pub fn related(&self, other: &FieldPath) -> bool {
        !self.is_empty()
            && !other.is_empty()
            && self
                .segs
                .iter()
                .zip(&other.segs)
                .all(|(a, b)| same_seg(a, b))
    }
}

impl From<&FieldPath> for FieldPath {
    fn from(p: &FieldPath) -> FieldPath {
        p.clone()
    }
}

fn same_seg(a: &Seg, b: &Seg) -> bool {
    match (a, b) {
        (Seg::Bridge { name: x, .. }, Seg::Bridge { name: y, .. }) => x == y,
        (Seg::Port { label: x, .. }, Seg::Port { label: y, .. }) => x == y,
        (Seg::Key(x), Seg::Key(y)) => x == y,
        (Seg::Index(x), Seg::Index(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_by_position_and_by_name() {
        let p = FieldPath::bridge(Some(1), "br1")
            .port(Some(0), "eth3")
            .at("queues[2].id");
        assert_eq!(p.render(false), "bridges[1].ports[0].queues[2].id");
        assert_eq!(p.render(true), "bridges.br1.ports.eth3.queues[2].id");
        assert_eq!(p.leaf(), "id");
        let d = FieldPath::root().at("dataplane.burst.rx_read");
        assert_eq!(d.render(true), "dataplane.burst.rx_read");
        assert_eq!(
            FieldPath::bridge(None, "br0")
                .at("controllers")
                .index(1)
                .render(false),
            "bridges.br0.controllers[1]"
        );
        assert_eq!(FieldPath::root().render(false), "");
    }

    #[test]
    fn related_compares_identity_not_position() {
        let port = FieldPath::bridge(None, "br0").port(None, "eth3");
        let field = FieldPath::bridge(Some(0), "br0")
            .port(Some(4), "eth3")
            .at("backend");
        assert!(port.related(&field));
        assert!(field.related(&port));
        let other = FieldPath::bridge(Some(0), "br0").port(Some(4), "eth33");
        assert!(!port.related(&other));
        let other_bridge = FieldPath::bridge(Some(0), "br00");
        assert!(!port.related(&other_bridge));
        assert!(!FieldPath::root()
            .at("dataplane")
            .related(&FieldPath::root().at("tls")));
    }
}
