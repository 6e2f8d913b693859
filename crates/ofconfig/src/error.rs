//! An `<rpc-error>` (RFC 6241 section 4.3): what every operation and the
//! model's edits return when a request cannot be done. Below both, so the
//! model and the operations share it without naming each other.

use crate::xml::escape;

/// An `<rpc-error>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RpcError {
    /// transport, rpc, protocol or application.
    pub error_type: &'static str,
    /// The RFC 6241 Appendix A tag.
    pub tag: &'static str,
    /// Human-readable text.
    pub message: String,
    /// `<error-info>` children (name, value).
    pub info: Vec<(&'static str, String)>,
}

impl RpcError {
    pub(crate) fn new(
        error_type: &'static str,
        tag: &'static str,
        message: impl Into<String>,
    ) -> RpcError {
        RpcError {
            error_type,
            tag,
            message: message.into(),
            info: Vec::new(),
        }
    }

    pub(crate) fn with(mut self, k: &'static str, v: &str) -> RpcError {
        self.info.push((k, v.to_string()));
        self
    }

    /// The request is not well-formed XML or not a NETCONF message.
    pub fn malformed(msg: &str) -> RpcError {
        RpcError::new("rpc", "malformed-message", msg)
    }

    /// A leaf has a value the model or the switch does not take.
    pub fn invalid_value(element: &str, msg: &str) -> RpcError {
        RpcError::new(
            "application",
            "invalid-value",
            format!("{element}: invalid value: {msg}"),
        )
        .with("bad-element", element)
    }

    /// An element the model does not have here.
    pub fn unknown_element(element: &str, parent: &str) -> RpcError {
        RpcError::new(
            "application",
            "unknown-element",
            format!("unknown element {element} in {parent}"),
        )
        .with("bad-element", element)
    }

    /// An element from a namespace the server does not know.
    pub fn unknown_namespace(element: &str, ns: &str) -> RpcError {
        RpcError::new(
            "application",
            "unknown-namespace",
            format!("element {element} in unknown namespace {ns:?}"),
        )
        .with("bad-element", element)
        .with("bad-namespace", ns)
    }

    /// A required element is missing.
    pub fn missing_element(element: &str, parent: &str) -> RpcError {
        RpcError::new(
            "application",
            "missing-element",
            format!("{parent} needs {element}"),
        )
        .with("bad-element", element)
    }

    /// An attribute with a value the server does not take.
    pub fn bad_attribute(element: &str, attr: &str, value: &str) -> RpcError {
        RpcError::new(
            "protocol",
            "bad-attribute",
            format!("{element}: {attr}={value:?} is not valid here"),
        )
        .with("bad-attribute", attr)
        .with("bad-element", element)
    }

    /// What the request names does not exist.
    pub fn data_missing(what: &str) -> RpcError {
        RpcError::new(
            "application",
            "data-missing",
            format!("{what} does not exist"),
        )
    }

    /// What the request creates exists already.
    pub fn data_exists(what: &str) -> RpcError {
        RpcError::new(
            "application",
            "data-exists",
            format!("{what} exists already"),
        )
    }

    /// Something fulmar does not do.
    pub fn not_supported(what: &str) -> RpcError {
        RpcError::new(
            "protocol",
            "operation-not-supported",
            format!("not supported: {what}"),
        )
    }

    /// The datastore refused the transaction.
    pub fn failed(msg: &str) -> RpcError {
        RpcError::new("application", "operation-failed", msg)
    }

    pub(crate) fn to_xml(&self) -> String {
        let mut s = format!(
            "<rpc-error><error-type>{}</error-type><error-tag>{}</error-tag><error-severity>error</error-severity><error-message xml:lang=\"en\">{}</error-message>",
            self.error_type,
            self.tag,
            escape(&self.message)
        );
        if !self.info.is_empty() {
            s.push_str("<error-info>");
            for (k, v) in &self.info {
                s.push_str(&format!("<{k}>{}</{k}>", escape(v)));
            }
            s.push_str("</error-info>");
        }
        s.push_str("</rpc-error>");
        s
    }
}
