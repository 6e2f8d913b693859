//! What every part of an `edit-config` checks first: its operation
//! attribute, the children it allows, the leaves it requires.

use crate::error::RpcError;
use crate::xml::Element;

use super::NS;

/// The `edit-config` operations (RFC 6241 §7.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EditOp {
    /// Merge into what is there.
    Merge,
    /// Replace what is there.
    Replace,
    /// Create; an error when it exists.
    Create,
    /// Delete; an error when missing.
    Delete,
    /// Delete if there.
    Remove,
    /// Only descend.
    None,
}

impl EditOp {
    /// The attribute's spelling.
    pub fn parse(s: &str) -> Option<EditOp> {
        Some(match s {
            "merge" => EditOp::Merge,
            "replace" => EditOp::Replace,
            "create" => EditOp::Create,
            "delete" => EditOp::Delete,
            "remove" => EditOp::Remove,
            "none" => EditOp::None,
            _ => return None,
        })
    }
}

pub(super) fn op_of(el: &Element, inherited: EditOp) -> Result<EditOp, RpcError> {
    match el.attr("operation") {
        None => Ok(inherited),
        Some(s) => match EditOp::parse(s) {
            Some(EditOp::None) | None => Err(RpcError::bad_attribute(&el.name, "operation", s)),
            Some(op) => Ok(op),
        },
    }
}

pub(super) fn allow(el: &Element, names: &[&str]) -> Result<(), RpcError> {
    for c in &el.children {
        if c.ns.as_deref() != Some(NS) {
            return Err(RpcError::unknown_namespace(
                &c.name,
                c.ns.as_deref().unwrap_or(""),
            ));
        }
        if !names.contains(&c.name.as_str()) {
            return Err(RpcError::unknown_element(&c.name, &el.name));
        }
    }
    Ok(())
}

pub(super) fn required<'a>(el: &'a Element, key: &str) -> Result<&'a str, RpcError> {
    match el.child_text(key) {
        Some(t) if !t.is_empty() => Ok(t),
        _ => Err(RpcError::missing_element(key, &el.name)),
    }
}
