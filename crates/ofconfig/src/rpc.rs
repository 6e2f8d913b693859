//! NETCONF operations (RFC 6241) as a plain state machine: a hello or an
//! `<rpc>` in, a reply document out. The datastore is behind [`Store`] so
//! everything here is tested without SSH or a running switch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use datastore::Op;

pub use crate::error::RpcError;
use crate::framing::Mode;
use crate::model::{self, EditOp, Snapshot};
use crate::xml::{self, escape, Element};

/// The NETCONF base namespace.
pub const BASE_NS: &str = "urn:ietf:params:xml:ns:netconf:base:1.0";

/// What the server announces in its hello.
pub const CAPABILITIES: &[&str] = &[
    "urn:ietf:params:netconf:base:1.0",
    "urn:ietf:params:netconf:base:1.1",
    "urn:ietf:params:netconf:capability:writable-running:1.0",
    "urn:ietf:params:netconf:capability:validate:1.0",
    "urn:ietf:params:netconf:capability:validate:1.1",
    "urn:onf:config:yang?module=of-config",
];

/// The switch's datastore as the operations see it.
pub trait Store: Send + Sync {
    /// The running configuration (with live state when `state`).
    fn snapshot(&self, state: bool) -> Snapshot;
    /// Applies `ops` as one transaction (validates only when `dry_run`).
    fn transact(&self, ops: &[Op], dry_run: bool) -> Result<(), String>;
}

/// The state shared by every session: the lock on running and how to end
/// a session (kill-session).
#[derive(Default)]
pub struct Shared {
    lock: Mutex<Option<u32>>,
    sessions: Mutex<HashMap<u32, Arc<tokio::sync::Notify>>>,
}

impl Shared {
    /// Registers session `id`; the returned notify fires on kill-session.
    pub fn register(&self, id: u32) -> Arc<tokio::sync::Notify> {
        let n = Arc::new(tokio::sync::Notify::new());
        if let Ok(mut s) = self.sessions.lock() {
            s.insert(id, n.clone());
        }
        n
    }

    /// Forgets session `id` and releases its lock.
    pub fn unregister(&self, id: u32) {
        if let Ok(mut s) = self.sessions.lock() {
            s.remove(&id);
        }
        if let Ok(mut l) = self.lock.lock() {
            if *l == Some(id) {
                *l = None;
            }
        }
    }

    fn holder(&self) -> Option<u32> {
        self.lock.lock().ok().and_then(|l| *l)
    }
}

/// What the connection does after sending a reply.
#[derive(Debug, PartialEq, Eq)]
pub enum After {
    /// Go on.
    Continue,
    /// Close the session (close-session).
    Close,
}

/// The server's hello for session `id`.
pub fn server_hello(id: u32) -> String {
    let caps: String = CAPABILITIES
        .iter()
        .map(|c| format!("<capability>{}</capability>", escape(c)))
        .collect();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><hello xmlns=\"{BASE_NS}\"><capabilities>{caps}</capabilities><session-id>{id}</session-id></hello>"
    )
}

/// Reads the client's hello: the framing for the rest of the session.
pub fn client_hello(msg: &[u8]) -> Result<Mode, String> {
    let el = xml::parse(msg)?;
    if el.name != "hello" || el.ns.as_deref() != Some(BASE_NS) {
        return Err(format!("expected a NETCONF hello, got <{}>", el.name));
    }
    if el.child("session-id").is_some() {
        return Err("a client hello must not carry a session-id".into());
    }
    let caps: Vec<&str> = el
        .child("capabilities")
        .map(|c| {
            c.children_named("capability")
                .map(|c| c.text.as_str())
                .collect()
        })
        .unwrap_or_default();
    if caps.contains(&"urn:ietf:params:netconf:base:1.1") {
        Ok(Mode::Chunked)
    } else if caps.contains(&"urn:ietf:params:netconf:base:1.0") {
        Ok(Mode::EndOfMessage)
    } else {
        Err("the client hello names neither base:1.0 nor base:1.1".into())
    }
}

/// One NETCONF session's operations.
pub struct Session<'a> {
    /// This session's id.
    pub id: u32,
    /// The datastore.
    pub store: &'a dyn Store,
    /// Locks and sessions.
    pub shared: &'a Shared,
}

impl Session<'_> {
    /// Handles one message after the hellos: the reply and what next.
    pub fn handle(&self, msg: &[u8]) -> (String, After) {
        let el = match xml::parse(msg) {
            Ok(el) => el,
            Err(e) => return (reply("", Err(RpcError::malformed(&e))), After::Continue),
        };
        if el.name != "rpc" || el.ns.as_deref() != Some(BASE_NS) {
            let e = RpcError::malformed(&format!("expected <rpc> in {BASE_NS}, got <{}>", el.name));
            return (reply("", Err(e)), After::Continue);
        }
        // The reply carries the request's attributes (RFC 6241 4.2). They
        // are kept by local name, so two with different prefixes (`a:x`,
        // `b:x`) would be one name twice, and a prefixed `xmlns` would
        // clash with the reply's own namespace: the first of each name is
        // echoed, and no `xmlns`.
        let mut echoed: Vec<&str> = Vec::new();
        let attrs: String = el
            .attrs
            .iter()
            .filter(|(k, _)| {
                let fresh = k != "xmlns" && plain_name(k) && !echoed.contains(&k.as_str());
                echoed.push(k);
                fresh
            })
            .map(|(k, v)| format!(" {k}=\"{}\"", escape(v)))
            .collect();
        if el.attr("message-id").is_none() {
            let e = RpcError::new("rpc", "missing-attribute", "<rpc> needs a message-id")
                .with("bad-attribute", "message-id")
                .with("bad-element", "rpc");
            return (reply(&attrs, Err(e)), After::Continue);
        }
        let [op] = el.children.as_slice() else {
            let e = RpcError::malformed("<rpc> holds exactly one operation");
            return (reply(&attrs, Err(e)), After::Continue);
        };
        let mut after = After::Continue;
        let result = if op.ns.as_deref() != Some(BASE_NS) {
            Err(RpcError::not_supported(&format!(
                "operation {} in {:?}",
                op.name,
                op.ns.as_deref().unwrap_or("")
            )))
        } else {
            match op.name.as_str() {
                "get" => self.get(op, true),
                "get-config" => self.get(op, false),
                "edit-config" => self.edit_config(op).map(|_| None),
                "validate" => self.validate(op).map(|_| None),
                "lock" => self.lock(op).map(|_| None),
                "unlock" => self.unlock(op).map(|_| None),
                "close-session" => {
                    after = After::Close;
                    Ok(None)
                }
                "kill-session" => self.kill(op).map(|_| None),
                other => Err(RpcError::not_supported(&format!("operation {other}"))),
            }
        };
        (reply(&attrs, result), after)
    }

    fn get(&self, op: &Element, state: bool) -> Result<Option<String>, RpcError> {
        if !state {
            running(op, "source")?;
        }
        for c in &op.children {
            if !matches!(
                (c.name.as_str(), state),
                ("filter", _) | ("source", false) | ("with-defaults", _)
            ) {
                return Err(RpcError::unknown_element(&c.name, &op.name));
            }
        }
        let snap = self.store.snapshot(state);
        let tree = model::render(&snap, state);
        let mut data = String::from("<data>");
        match op.child("filter") {
            None => xml::write(&tree, Some(BASE_NS), &mut data),
            Some(f) => {
                match f.attr("type") {
                    None | Some("subtree") => {}
                    Some(t) => return Err(RpcError::not_supported(&format!("{t} filters"))),
                }
                for sel in &f.children {
                    if let Some(x) = model::subtree(&tree, sel) {
                        xml::write(&x, Some(BASE_NS), &mut data);
                    }
                }
            }
        }
        data.push_str("</data>");
        Ok(Some(data))
    }

    /// validate: running is always valid; a `<config>` source is checked
    /// as a merge into running would be (a dry-run transaction).
    fn validate(&self, op: &Element) -> Result<(), RpcError> {
        let src = op
            .child("source")
            .ok_or_else(|| RpcError::missing_element("source", "validate"))?;
        match src.child("config") {
            Some(config) => self.apply(config, EditOp::Merge, true),
            None => running(op, "source"),
        }
    }

    fn edit_config(&self, op: &Element) -> Result<(), RpcError> {
        running(op, "target")?;
        self.check_lock()?;
        let mut default = EditOp::Merge;
        let mut dry_run = false;
        let mut config = None;
        for c in &op.children {
            match c.name.as_str() {
                "target" => {}
                "default-operation" => {
                    default = match EditOp::parse(&c.text) {
                        Some(o @ (EditOp::Merge | EditOp::Replace | EditOp::None)) => o,
                        _ => return Err(RpcError::invalid_value("default-operation", &c.text)),
                    }
                }
                "test-option" => match c.text.as_str() {
                    "test-then-set" | "set" => {}
                    "test-only" => dry_run = true,
                    v => return Err(RpcError::invalid_value("test-option", v)),
                },
                // Every edit is all or nothing: each option behaves as
                // rollback-on-error.
                "error-option" => match c.text.as_str() {
                    "stop-on-error" | "rollback-on-error" | "continue-on-error" => {}
                    v => return Err(RpcError::invalid_value("error-option", v)),
                },
                "config" => config = Some(c),
                "url" => return Err(RpcError::not_supported("edit-config from a url")),
                other => return Err(RpcError::unknown_element(other, "edit-config")),
            }
        }
        let config = config.ok_or_else(|| RpcError::missing_element("config", "edit-config"))?;
        self.apply(config, default, dry_run)
    }

    /// One transaction for everything under `<config>`.
    fn apply(&self, config: &Element, default: EditOp, dry_run: bool) -> Result<(), RpcError> {
        let snap = self.store.snapshot(false);
        let mut ops = Vec::new();
        for cs in &config.children {
            if cs.name == "capable-switch" && cs.ns.as_deref() != Some(model::NS) {
                return Err(RpcError::unknown_namespace(
                    &cs.name,
                    cs.ns.as_deref().unwrap_or(""),
                ));
            }
            ops.extend(model::edit_ops(&snap, cs, default)?);
        }
        if ops.is_empty() {
            return Ok(());
        }
        self.store
            .transact(&ops, dry_run)
            .map_err(|e| RpcError::failed(&e))
    }

    fn check_lock(&self) -> Result<(), RpcError> {
        match self.shared.holder() {
            Some(h) if h != self.id => Err(RpcError::new(
                "protocol",
                "in-use",
                format!("running is locked by session {h}"),
            )),
            _ => Ok(()),
        }
    }

    /// The lock on running, for `<lock>` or `<unlock>` of `op` (whose
    /// target must be running).
    fn running_lock(&self, op: &Element) -> Result<MutexGuard<'_, Option<u32>>, RpcError> {
        running(op, "target")?;
        self.shared
            .lock
            .lock()
            .map_err(|_| RpcError::failed("lock state poisoned"))
    }

    fn lock(&self, op: &Element) -> Result<(), RpcError> {
        let mut l = self.running_lock(op)?;
        match *l {
            Some(h) => Err(RpcError::new(
                "protocol",
                "lock-denied",
                format!("running is locked by session {h}"),
            )
            .with("session-id", &h.to_string())),
            None => {
                *l = Some(self.id);
                Ok(())
            }
        }
    }

    fn unlock(&self, op: &Element) -> Result<(), RpcError> {
        let mut l = self.running_lock(op)?;
        if *l == Some(self.id) {
            *l = None;
            Ok(())
        } else {
            Err(RpcError::failed(
                "this session does not hold the lock on running",
            ))
        }
    }

    fn kill(&self, op: &Element) -> Result<(), RpcError> {
        let t = op
            .child_text("session-id")
            .ok_or_else(|| RpcError::missing_element("session-id", "kill-session"))?;
        let id: u32 = t
            .parse()
            .map_err(|_| RpcError::invalid_value("session-id", t))?;
        if id == self.id {
            return Err(RpcError::invalid_value(
                "session-id",
                "a session cannot kill itself",
            ));
        }
        let n = self
            .shared
            .sessions
            .lock()
            .ok()
            .and_then(|s| s.get(&id).cloned())
            .ok_or_else(|| RpcError::invalid_value("session-id", &format!("no session {id}")))?;
        n.notify_one();
        self.shared.unregister(id);
        Ok(())
    }
}

/// Checks that `<source>`/`<target>` names running.
fn running(op: &Element, which: &str) -> Result<(), RpcError> {
    let el = op
        .child(which)
        .ok_or_else(|| RpcError::missing_element(which, &op.name))?;
    match el.children.as_slice() {
        [d] if d.name == "running" => Ok(()),
        [d] if matches!(d.name.as_str(), "candidate" | "startup" | "url") => Err(
            RpcError::not_supported(&format!("the {} datastore (only running)", d.name)),
        ),
        [d] => Err(RpcError::invalid_value(
            which,
            &format!("unknown datastore {}", d.name),
        )),
        _ => Err(RpcError::missing_element("running", which)),
    }
}

/// Whether `k` can be written back as an attribute name as it is (a
/// prefix with nothing after it leaves an empty local name).
fn plain_name(k: &str) -> bool {
    let mut chars = k.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

fn reply(attrs: &str, result: Result<Option<String>, RpcError>) -> String {
    let body = match result {
        Ok(None) => "<ok/>".to_string(),
        Ok(Some(data)) => data,
        Err(e) => e.to_xml(),
    };
    format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?><rpc-reply xmlns=\"{BASE_NS}\"{attrs}>{body}</rpc-reply>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BridgeSnap, Snapshot};
    use datastore::FailMode;

    /// A store recording transactions; `fail` makes them fail.
    #[derive(Default)]
    struct Fake {
        txns: Mutex<Vec<(Vec<Op>, bool)>>,
        fail: bool,
    }

    impl Store for Fake {
        fn snapshot(&self, _state: bool) -> Snapshot {
            Snapshot {
                bridges: vec![BridgeSnap {
                    name: "br0".into(),
                    dpid: 1,
                    fail_mode: FailMode::Secure,
                    controllers: vec![],
                    ports: vec![],
                }],
            }
        }
        fn transact(&self, ops: &[Op], dry_run: bool) -> Result<(), String> {
            if self.fail {
                return Err("bridge br0: interface nope0 does not open".into());
            }
            self.txns.lock().unwrap().push((ops.to_vec(), dry_run));
            Ok(())
        }
    }

    fn rpc(body: &str) -> String {
        format!(r#"<rpc message-id="m-1" xmlns="{BASE_NS}">{body}</rpc>"#)
    }

    const EDIT: &str = r#"<edit-config><target><running/></target><config><capable-switch xmlns="urn:onf:config:yang"><logical-switches><switch><id>br0</id><lost-connection-behavior>failStandaloneMode</lost-connection-behavior></switch></logical-switches></capable-switch></config></edit-config>"#;

    fn run(store: &Fake, shared: &Shared, id: u32, msg: &str) -> (String, After) {
        Session { id, store, shared }.handle(msg.as_bytes())
    }

    #[test]
    fn hellos() {
        let h = server_hello(7);
        assert!(h.contains("<session-id>7</session-id>"));
        assert!(h.contains("urn:ietf:params:netconf:base:1.1"));
        let cap = |c: &str| {
            format!(
                r#"<hello xmlns="{BASE_NS}"><capabilities><capability>{c}</capability></capabilities></hello>"#
            )
        };
        assert_eq!(
            client_hello(cap("urn:ietf:params:netconf:base:1.1").as_bytes()),
            Ok(Mode::Chunked)
        );
        assert_eq!(
            client_hello(cap("urn:ietf:params:netconf:base:1.0").as_bytes()),
            Ok(Mode::EndOfMessage)
        );
        assert!(client_hello(cap("urn:x").as_bytes()).is_err());
        assert!(client_hello(b"<hello/>").is_err());
        assert!(client_hello(b"<hello").is_err());
    }

    #[test]
    fn get_config_echoes_message_id_and_attributes() {
        let (f, s) = (Fake::default(), Shared::default());
        let (r, after) = run(
            &f,
            &s,
            1,
            &format!(
                r#"<rpc message-id="42" xmlns:ex="urn:ex" ex:user="x" xmlns="{BASE_NS}"><get-config><source><running/></source></get-config></rpc>"#
            ),
        );
        assert_eq!(after, After::Continue);
        assert!(r.contains(r#"message-id="42""#), "{r}");
        assert!(r.contains(r#"user="x""#), "{r}");
        assert!(
            r.contains("<data><capable-switch xmlns=\"urn:onf:config:yang\"><id>fulmar</id>"),
            "{r}"
        );
        assert!(r.contains("<id>br0</id>"));
    }

    /// Found by the netconf fuzz target: attributes with one local name
    /// under two prefixes were echoed twice, and the reply did not parse.
    #[test]
    fn echoed_attributes_are_one_per_name_and_never_xmlns() {
        let (f, s) = (Fake::default(), Shared::default());
        for (attrs, want) in [
            (
                r#"message-id="1" xmlns:a="urn:a" xmlns:b="urn:b" a:ns="x" b:ns="y""#,
                r#"ns="x""#,
            ),
            (r#"xmlns:a="urn:a" a:ns="x" xml:ns="y""#, r#"ns="x""#),
            (
                r#"message-id="2" xmlns:a="urn:a" a:xmlns="urn:z""#,
                r#"message-id="2""#,
            ),
            (
                r#"message-id="3" xmlns:a="urn:a" a:="urn:z""#,
                r#"message-id="3""#,
            ),
        ] {
            let (r, _) = run(
                &f,
                &s,
                1,
                &format!(
                    r#"<rpc {attrs} xmlns="{BASE_NS}"><get-config><source><running/></source></get-config></rpc>"#
                ),
            );
            xml::parse(r.as_bytes()).unwrap_or_else(|e| panic!("{e}: {r}"));
            assert!(r.contains(want), "{r}");
            assert!(!r.contains("urn:z"), "{r}");
        }
    }

    #[test]
    fn edit_config_is_one_transaction_and_test_only_is_a_dry_run() {
        let (f, s) = (Fake::default(), Shared::default());
        let (r, _) = run(&f, &s, 1, &rpc(EDIT));
        assert!(r.contains("<ok/>"), "{r}");
        let dry = EDIT.replace("</target>", "</target><test-option>test-only</test-option>");
        let (r, _) = run(&f, &s, 1, &rpc(&dry));
        assert!(r.contains("<ok/>"), "{r}");
        let t = f.txns.lock().unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(
            t[0],
            (
                vec![Op::SetFailMode {
                    bridge: "br0".into(),
                    mode: FailMode::Standalone
                }],
                false
            )
        );
        assert!(t[1].1);
    }

    #[test]
    fn errors() {
        let (f, s) = (Fake::default(), Shared::default());
        let tag = |msg: &str| {
            let (r, _) = run(&f, &s, 1, msg);
            let a = r.find("<error-tag>").map(|i| i + 11).unwrap_or(0);
            let b = r.find("</error-tag>").unwrap_or(0);
            assert!(r.contains("<error-severity>error</error-severity>"), "{r}");
            r[a..b].to_string()
        };
        assert_eq!(tag("<rpc"), "malformed-message");
        assert_eq!(tag("<notrpc/>"), "malformed-message");
        assert_eq!(
            tag(&format!(r#"<rpc xmlns="{BASE_NS}"><get/></rpc>"#)),
            "missing-attribute"
        );
        assert_eq!(tag(&rpc("<copy-config/>")), "operation-not-supported");
        assert_eq!(tag(&rpc("<get/><get/>")), "malformed-message");
        assert_eq!(
            tag(&rpc(
                "<get-config><source><candidate/></source></get-config>"
            )),
            "operation-not-supported"
        );
        assert_eq!(tag(&rpc("<get-config/>")), "missing-element");
        assert_eq!(
            tag(&rpc(r#"<get><filter type="xpath" select="/"/></get>"#)),
            "operation-not-supported"
        );
        assert_eq!(
            tag(&rpc(&EDIT.replace("<running/>", "<startup/>"))),
            "operation-not-supported"
        );
        assert_eq!(
            tag(&rpc(&EDIT.replace("failStandaloneMode", "x"))),
            "invalid-value"
        );
        assert_eq!(
            tag(&rpc(&EDIT.replace(
                "</target>",
                "</target><default-operation>delete</default-operation>"
            ))),
            "invalid-value"
        );
        assert_eq!(
            tag(&rpc(&EDIT.replace("urn:onf:config:yang", "urn:x"))),
            "unknown-namespace"
        );
        assert_eq!(
            tag(&rpc(
                r#"<edit-config><target><running/></target></edit-config>"#
            )),
            "missing-element"
        );
        assert!(f.txns.lock().unwrap().is_empty());
        let failing = Fake {
            fail: true,
            ..Fake::default()
        };
        let (r, _) = run(&failing, &s, 1, &rpc(EDIT));
        assert!(r.contains("<error-tag>operation-failed</error-tag>"), "{r}");
        assert!(r.contains("interface nope0 does not open"), "{r}");
    }

    /// Every prefix and many byte-mutations of valid requests get a reply,
    /// never a panic, and never a transaction unless the request is whole.
    #[test]
    fn no_panic_on_mangled_requests() {
        let (f, s) = (Fake::default(), Shared::default());
        let valid = [
            rpc(EDIT),
            rpc(
                r#"<get><filter type="subtree"><capable-switch xmlns="urn:onf:config:yang"><logical-switches><switch><id>br0</id></switch></logical-switches></capable-switch></filter></get>"#,
            ),
            rpc("<lock><target><running/></target></lock>"),
        ];
        let mut seed = 0x2545_f491_u32;
        for msg in &valid {
            let b = msg.as_bytes();
            let before = f.txns.lock().unwrap().len();
            for cut in 0..b.len() {
                let (r, _) = run_bytes(&f, &s, &b[..cut]);
                assert!(r.contains("<rpc-error>"), "{r}");
            }
            assert_eq!(f.txns.lock().unwrap().len(), before);
            for _ in 0..2000 {
                let mut m = b.to_vec();
                for _ in 0..3 {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    let i = seed as usize % m.len();
                    m[i] = b"<>/&;\"=x\0\xff#"[(seed >> 24) as usize % 11];
                }
                let (r, _) = run_bytes(&f, &s, &m);
                assert!(r.starts_with("<?xml"));
            }
        }
        s.unregister(1);
    }

    fn run_bytes(store: &Fake, shared: &Shared, msg: &[u8]) -> (String, After) {
        Session {
            id: 1,
            store,
            shared,
        }
        .handle(msg)
    }

    #[test]
    fn locks_and_sessions() {
        let (f, s) = (Fake::default(), Shared::default());
        let lock = rpc("<lock><target><running/></target></lock>");
        let unlock = rpc("<unlock><target><running/></target></unlock>");
        assert!(run(&f, &s, 1, &lock).0.contains("<ok/>"));
        let (r, _) = run(&f, &s, 2, &lock);
        assert!(
            r.contains("lock-denied") && r.contains("<session-id>1</session-id>"),
            "{r}"
        );
        assert!(run(&f, &s, 2, &rpc(EDIT))
            .0
            .contains("<error-tag>in-use</error-tag>"));
        assert!(run(&f, &s, 2, &unlock).0.contains("operation-failed"));
        assert!(run(&f, &s, 1, &rpc(EDIT)).0.contains("<ok/>"));
        assert!(run(&f, &s, 1, &unlock).0.contains("<ok/>"));
        // A session's lock goes with it.
        assert!(run(&f, &s, 1, &lock).0.contains("<ok/>"));
        let n = s.register(1);
        let kill = |id| {
            rpc(&format!(
                "<kill-session><session-id>{id}</session-id></kill-session>"
            ))
        };
        assert!(run(&f, &s, 2, &kill(1)).0.contains("<ok/>"));
        assert!(run(&f, &s, 2, &lock).0.contains("<ok/>"));
        drop(n);
        assert!(run(&f, &s, 2, &kill(2)).0.contains("invalid-value"));
        assert!(run(&f, &s, 2, &kill(99)).0.contains("invalid-value"));
        let (r, after) = run(&f, &s, 2, &rpc("<close-session/>"));
        assert!(r.contains("<ok/>"));
        assert_eq!(after, After::Close);
    }
}
