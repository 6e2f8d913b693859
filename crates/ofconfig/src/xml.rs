//! A small owned XML element tree read with quick-xml's namespace-aware pull
//! reader, and the escaping the replies need.
//!
//! A document with a `<!DOCTYPE>` is refused (so no entity can be declared),
//! only the five predefined entities and character references are expanded,
//! and the tree is bounded in depth and in element count, so a hostile
//! message costs at most its size (itself bounded by the framer).

use quick_xml::events::Event;
use quick_xml::name::ResolveResult;
use quick_xml::NsReader;

/// Deepest element nesting accepted.
pub const MAX_DEPTH: usize = 64;
/// Most elements in one document.
pub const MAX_ELEMENTS: usize = 100_000;

/// One element: its namespace, local name, attributes (local name, value),
/// children and the text directly inside it (trimmed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Element {
    /// The namespace URI it is in, if any.
    pub ns: Option<String>,
    /// Local name (no prefix).
    pub name: String,
    /// Attributes by local name (namespace declarations left out).
    pub attrs: Vec<(String, String)>,
    /// Child elements in document order.
    pub children: Vec<Element>,
    /// Character data directly inside, trimmed.
    pub text: String,
}

impl Element {
    /// The first child with this local name.
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    /// Every child with this local name.
    pub fn children_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    /// The text of the first child with this local name.
    pub fn child_text(&self, name: &str) -> Option<&str> {
        self.child(name).map(|c| c.text.as_str())
    }

    /// An attribute's value by local name.
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses one document into its root element.
pub fn parse(doc: &[u8]) -> Result<Element, String> {
    let text = std::str::from_utf8(doc).map_err(|_| "the message is not UTF-8".to_string())?;
    let mut reader = NsReader::from_str(text);
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    let mut count = 0usize;
    loop {
        let (ns, ev) = reader
            .read_resolved_event()
            .map_err(|e| format!("XML error: {e}"))?;
        let ns = match ns {
            ResolveResult::Bound(n) => Some(n.as_ref().to_string()),
            ResolveResult::Unbound => None,
            ResolveResult::Unknown(p) => {
                return Err(format!("XML error: unknown namespace prefix {}", p))
            }
        };
        match ev {
            Event::Start(ref e) | Event::Empty(ref e) => {
                count += 1;
                if count > MAX_ELEMENTS || stack.len() >= MAX_DEPTH {
                    return Err("XML error: the document is too large or too deep".into());
                }
                if root.is_some() {
                    return Err("XML error: content after the root element".into());
                }
                let name = e.local_name().as_ref().to_string();
                let mut attrs = Vec::new();
                for a in e.attributes() {
                    let a = a.map_err(|e| format!("XML error in an attribute: {e}"))?;
                    let key = a.key;
                    if key.as_ref() == "xmlns" || key.as_ref().starts_with("xmlns:") {
                        continue;
                    }
                    let v = a
                        .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                        .map_err(|e| format!("XML error in an attribute: {e}"))?;
                    attrs.push((key.local_name().as_ref().to_string(), v.into_owned()));
                }
                let el = Element {
                    ns,
                    name,
                    attrs,
                    children: Vec::new(),
                    text: String::new(),
                };
                if matches!(ev, Event::Empty(_)) {
                    close(el, &mut stack, &mut root);
                } else {
                    stack.push(el);
                }
            }
            Event::End(_) => {
                let mut el = stack
                    .pop()
                    .ok_or_else(|| "XML error: unbalanced end tag".to_string())?;
                el.text = el.text.trim().to_string();
                close(el, &mut stack, &mut root);
            }
            Event::Text(t) => {
                push_text(&mut stack, &t.xml10_content())?;
            }
            Event::CData(t) => {
                push_text(&mut stack, &t)?;
            }
            Event::GeneralRef(r) => {
                let c = match r.resolve_char_ref() {
                    Ok(Some(c)) => c,
                    Ok(None) => match r.as_ref() {
                        "lt" => '<',
                        "gt" => '>',
                        "amp" => '&',
                        "apos" => '\'',
                        "quot" => '"',
                        other => return Err(format!("XML error: undeclared entity &{};", other)),
                    },
                    Err(e) => return Err(format!("XML error: {e}")),
                };
                push_text(&mut stack, c.encode_utf8(&mut [0; 4]))?;
            }
            Event::DocType(_) => return Err("XML error: a DTD is not accepted".into()),
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) => {}
            Event::Eof => break,
        }
    }
    if !stack.is_empty() {
        return Err("XML error: the document ends inside an element".into());
    }
    root.ok_or_else(|| "XML error: no element".to_string())
}

fn close(el: Element, stack: &mut [Element], root: &mut Option<Element>) {
    match stack.last_mut() {
        Some(parent) => parent.children.push(el),
        None => *root = Some(el),
    }
}

fn push_text(stack: &mut [Element], s: &str) -> Result<(), String> {
    match stack.last_mut() {
        Some(el) => {
            el.text.push_str(s);
            Ok(())
        }
        None if s.trim().is_empty() => Ok(()),
        None => Err("XML error: text outside the root element".into()),
    }
}

/// `s` escaped for element text and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// Writes `el` back as XML (with `xmlns` where the namespace changes from
/// `parent_ns`), for echoing parts of a request.
pub fn write(el: &Element, parent_ns: Option<&str>, out: &mut String) {
    out.push('<');
    out.push_str(&el.name);
    if el.ns.as_deref() != parent_ns {
        if let Some(ns) = &el.ns {
            out.push_str(&format!(" xmlns=\"{}\"", escape(ns)));
        }
    }
    for (k, v) in &el.attrs {
        out.push_str(&format!(" {}=\"{}\"", k, escape(v)));
    }
    if el.children.is_empty() && el.text.is_empty() {
        out.push_str("/>");
        return;
    }
    out.push('>');
    out.push_str(&escape(&el.text));
    for c in &el.children {
        write(c, el.ns.as_deref(), out);
    }
    out.push_str(&format!("</{}>", el.name));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_namespaces_text_and_attributes() {
        let doc = br#"<?xml version="1.0"?>
<rpc message-id="7" xmlns="urn:ietf:params:xml:ns:netconf:base:1.0" xmlns:o="urn:onf:config:yang">
  <edit-config><config><o:capable-switch><o:id>a &amp; b&#33;</o:id><o:x o:operation="delete"/></o:capable-switch></config></edit-config>
</rpc>"#;
        let root = parse(doc).unwrap();
        assert_eq!(root.name, "rpc");
        assert_eq!(root.attr("message-id"), Some("7"));
        assert_eq!(
            root.ns.as_deref(),
            Some("urn:ietf:params:xml:ns:netconf:base:1.0")
        );
        let cs = root
            .child("edit-config")
            .and_then(|e| e.child("config"))
            .and_then(|c| c.child("capable-switch"))
            .unwrap();
        assert_eq!(cs.ns.as_deref(), Some("urn:onf:config:yang"));
        assert_eq!(cs.child_text("id"), Some("a & b!"));
        assert_eq!(cs.child("x").unwrap().attr("operation"), Some("delete"));
    }

    #[test]
    fn refuses_dtds_entities_and_broken_documents() {
        let bomb = br#"<!DOCTYPE r [<!ENTITY a "aaaa">]><r>&a;</r>"#;
        assert!(parse(bomb).unwrap_err().contains("DTD"));
        assert!(parse(b"<r>&a;</r>").unwrap_err().contains("entity"));
        assert!(parse(b"<r><a></r>").is_err());
        assert!(parse(b"<r>").is_err());
        assert!(parse(b"").is_err());
        assert!(parse(b"<r/><s/>").is_err());
        assert!(parse(b"<p:r/>").is_err());
        assert!(parse(&[0xff, 0xfe]).is_err());
        let deep = "<a>".repeat(MAX_DEPTH + 1) + &"</a>".repeat(MAX_DEPTH + 1);
        assert!(parse(deep.as_bytes()).is_err());
    }

    #[test]
    fn writes_back_what_it_read() {
        let root =
            parse(br#"<a xmlns="urn:x" k="&lt;v"><b>t&amp;</b><c xmlns="urn:y"/></a>"#).unwrap();
        let mut s = String::new();
        write(&root, None, &mut s);
        assert_eq!(
            s,
            r#"<a xmlns="urn:x" k="&lt;v"><b>t&amp;</b><c xmlns="urn:y"/></a>"#
        );
        assert_eq!(parse(s.as_bytes()).unwrap(), root);
    }
}
