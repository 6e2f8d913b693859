//! Subtree filtering (RFC 6241 section 6) of the rendered tree.

use crate::xml::Element;

/// RFC 6241 §6 subtree filtering of `data` by `filter` (same element
/// name): `None` when nothing is selected.
pub fn subtree(data: &Element, filter: &Element) -> Option<Element> {
    if data.name != filter.name || (filter.ns.is_some() && filter.ns != data.ns) {
        return None;
    }
    if filter.children.is_empty() {
        if filter.text.is_empty() || filter.text == data.text {
            return Some(data.clone());
        }
        return None;
    }
    let (matches, others): (Vec<&Element>, Vec<&Element>) = filter
        .children
        .iter()
        .partition(|f| f.children.is_empty() && !f.text.is_empty());
    for m in &matches {
        if !data
            .children
            .iter()
            .any(|d| d.name == m.name && d.text == m.text)
        {
            return None;
        }
    }
    if others.is_empty() {
        return Some(data.clone());
    }
    let mut out = Element {
        children: Vec::new(),
        ..data.clone()
    };
    let mut selected = false;
    for d in &data.children {
        if matches.iter().any(|m| m.name == d.name) {
            out.children.push(d.clone());
            continue;
        }
        for f in &others {
            if let Some(x) = subtree(d, f) {
                out.children.push(x);
                selected = true;
                break;
            }
        }
    }
    if selected || matches.is_empty() && data.children.is_empty() {
        Some(out)
    } else if !matches.is_empty() {
        // A list entry whose keys matched: keys only.
        Some(out)
    } else {
        None
    }
}
