//! AgentX PDUs (RFC 2741 §6): a 20-byte header, then a payload whose
//! length the header gives (a multiple of 4).
//!
//! Decoding reads either byte order (the header's `NETWORK_BYTE_ORDER`
//! flag says which), expands prefix-compressed OIDs (`1.3.6.1.<prefix>`),
//! reads a non-default context where the PDU type allows one, and checks
//! every length against what is left: a truncated or garbled PDU is a
//! [`DecodeError`], never a panic. Encoding always writes network byte
//! order and compresses OIDs under `1.3.6.1`.

use std::fmt;

/// An OID as its sub-identifiers.
pub type Oid = Vec<u32>;

/// Length of the header.
pub const HEADER_LEN: usize = 20;
/// The largest payload accepted (the master's PDUs are far smaller).
pub const MAX_PAYLOAD: u32 = 1 << 20;
/// At most this many sub-identifiers in an OID (RFC 2741 §5.1).
pub const MAX_SUBIDS: usize = 128;

/// Header flags (RFC 2741 §6.1).
pub mod flags {
    /// Register: the subtree is one instance.
    pub const INSTANCE_REGISTRATION: u8 = 0x01;
    /// IndexAllocate: a new index.
    pub const NEW_INDEX: u8 = 0x02;
    /// IndexAllocate: any index.
    pub const ANY_INDEX: u8 = 0x04;
    /// A context octet string follows the header.
    pub const NON_DEFAULT_CONTEXT: u8 = 0x08;
    /// Integers are big-endian.
    pub const NETWORK_BYTE_ORDER: u8 = 0x10;
}

/// PDU type numbers (RFC 2741 §6.1).
pub mod pdu_type {
    pub const OPEN: u8 = 1;
    pub const CLOSE: u8 = 2;
    pub const REGISTER: u8 = 3;
    pub const UNREGISTER: u8 = 4;
    pub const GET: u8 = 5;
    pub const GET_NEXT: u8 = 6;
    pub const GET_BULK: u8 = 7;
    pub const TEST_SET: u8 = 8;
    pub const COMMIT_SET: u8 = 9;
    pub const UNDO_SET: u8 = 10;
    pub const CLEANUP_SET: u8 = 11;
    pub const NOTIFY: u8 = 12;
    pub const PING: u8 = 13;
    pub const INDEX_ALLOCATE: u8 = 14;
    pub const INDEX_DEALLOCATE: u8 = 15;
    pub const ADD_AGENT_CAPS: u8 = 16;
    pub const REMOVE_AGENT_CAPS: u8 = 17;
    pub const RESPONSE: u8 = 18;
}

/// `res.error` values: the SNMP ones used here and AgentX's own (RFC 2741 §6.2.16).
pub mod error {
    pub const NO_ERROR: u16 = 0;
    pub const GEN_ERR: u16 = 5;
    pub const NOT_WRITABLE: u16 = 17;
    pub const COMMIT_FAILED: u16 = 14;
    pub const UNDO_FAILED: u16 = 15;
    pub const OPEN_FAILED: u16 = 256;
    pub const NOT_OPEN: u16 = 257;
    pub const INDEX_WRONG_TYPE: u16 = 258;
    pub const INDEX_ALREADY_ALLOCATED: u16 = 259;
    pub const INDEX_NONE_AVAILABLE: u16 = 260;
    pub const INDEX_NOT_ALLOCATED: u16 = 261;
    pub const UNSUPPORTED_CONTEXT: u16 = 262;
    pub const DUPLICATE_REGISTRATION: u16 = 263;
    pub const UNKNOWN_REGISTRATION: u16 = 264;
    pub const UNKNOWN_AGENT_CAPS: u16 = 265;
    pub const PARSE_ERROR: u16 = 266;
    pub const REQUEST_DENIED: u16 = 267;
    pub const PROCESSING_ERROR: u16 = 268;

    /// The name RFC 2741 gives `code`.
    pub fn name(code: u16) -> &'static str {
        match code {
            NO_ERROR => "noError",
            GEN_ERR => "genErr",
            NOT_WRITABLE => "notWritable",
            COMMIT_FAILED => "commitFailed",
            UNDO_FAILED => "undoFailed",
            OPEN_FAILED => "openFailed",
            NOT_OPEN => "notOpen",
            INDEX_WRONG_TYPE => "indexWrongType",
            INDEX_ALREADY_ALLOCATED => "indexAlreadyAllocated",
            INDEX_NONE_AVAILABLE => "indexNoneAvailable",
            INDEX_NOT_ALLOCATED => "indexNotAllocated",
            UNSUPPORTED_CONTEXT => "unsupportedContext",
            DUPLICATE_REGISTRATION => "duplicateRegistration",
            UNKNOWN_REGISTRATION => "unknownRegistration",
            UNKNOWN_AGENT_CAPS => "unknownAgentCaps",
            PARSE_ERROR => "parseError",
            REQUEST_DENIED => "requestDenied",
            PROCESSING_ERROR => "processingError",
            _ => "other",
        }
    }
}

/// Close reasons (RFC 2741 §6.2.2).
pub mod close_reason {
    pub const OTHER: u8 = 1;
    pub const PARSE_ERROR: u8 = 2;
    pub const PROTOCOL_ERROR: u8 = 3;
    pub const TIMEOUTS: u8 = 4;
    pub const SHUTDOWN: u8 = 5;
    pub const BY_MANAGER: u8 = 6;
}

/// Why bytes are not a PDU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than a field needs.
    Truncated { at: usize, need: usize },
    /// `h.version` is not 1.
    Version(u8),
    /// The payload length is not a multiple of 4 or is too large.
    PayloadLength(u32),
    /// The buffer is longer or shorter than header + payload.
    FrameLength { expected: usize, got: usize },
    /// An unknown `h.type`.
    Type(u8),
    /// An OID of more than 128 sub-identifiers.
    OidTooLong(u8),
    /// An unknown varbind type.
    ValueType(u16),
    /// A field holds a value the PDU type forbids (named).
    Invalid(&'static str),
    /// Bytes left over after the PDU's fields.
    Trailing(usize),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated { at, need } => {
                write!(f, "truncated: {need} more bytes needed at offset {at}")
            }
            DecodeError::Version(v) => write!(f, "version {v}, not 1"),
            DecodeError::PayloadLength(n) => write!(f, "bad payload length {n}"),
            DecodeError::FrameLength { expected, got } => {
                write!(f, "frame of {got} bytes where the header says {expected}")
            }
            DecodeError::Type(t) => write!(f, "unknown PDU type {t}"),
            DecodeError::OidTooLong(n) => write!(f, "OID of {n} sub-identifiers"),
            DecodeError::ValueType(t) => write!(f, "unknown varbind type {t}"),
            DecodeError::Invalid(what) => write!(f, "invalid {what}"),
            DecodeError::Trailing(n) => write!(f, "{n} bytes after the PDU"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// The header (RFC 2741 §6.1) less the type, which [`Body`] carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub pdu_type: u8,
    pub flags: u8,
    pub session_id: u32,
    pub transaction_id: u32,
    pub packet_id: u32,
    pub payload_len: u32,
}

impl Header {
    /// Decodes and checks a header: version 1, a known type, a payload
    /// length that is a multiple of 4 and at most [`MAX_PAYLOAD`].
    pub fn decode(b: &[u8]) -> Result<Header, DecodeError> {
        if b.len() < HEADER_LEN {
            return Err(DecodeError::Truncated {
                at: b.len(),
                need: HEADER_LEN - b.len(),
            });
        }
        if b[0] != 1 {
            return Err(DecodeError::Version(b[0]));
        }
        let pdu_type = b[1];
        if !(pdu_type::OPEN..=pdu_type::RESPONSE).contains(&pdu_type) {
            return Err(DecodeError::Type(pdu_type));
        }
        let flags = b[2];
        let big = flags & flags::NETWORK_BYTE_ORDER != 0;
        let word = |i: usize| {
            let w = [b[i], b[i + 1], b[i + 2], b[i + 3]];
            if big {
                u32::from_be_bytes(w)
            } else {
                u32::from_le_bytes(w)
            }
        };
        let payload_len = word(16);
        if payload_len % 4 != 0 || payload_len > MAX_PAYLOAD {
            return Err(DecodeError::PayloadLength(payload_len));
        }
        Ok(Header {
            pdu_type,
            flags,
            session_id: word(4),
            transaction_id: word(8),
            packet_id: word(12),
            payload_len,
        })
    }
}

/// A search range of Get, GetNext and GetBulk: `start` (included in a
/// GetNext when `include`) up to `end` (excluded; empty = unbounded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchRange {
    pub start: Oid,
    pub include: bool,
    pub end: Oid,
}

/// A varbind's value (RFC 2741 §5.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Integer(i32),
    OctetString(Vec<u8>),
    Null,
    Oid(Oid),
    IpAddress([u8; 4]),
    Counter32(u32),
    Gauge32(u32),
    TimeTicks(u32),
    Opaque(Vec<u8>),
    Counter64(u64),
    NoSuchObject,
    NoSuchInstance,
    EndOfMibView,
}

impl Value {
    fn type_code(&self) -> u16 {
        match self {
            Value::Integer(_) => 2,
            Value::OctetString(_) => 4,
            Value::Null => 5,
            Value::Oid(_) => 6,
            Value::IpAddress(_) => 64,
            Value::Counter32(_) => 65,
            Value::Gauge32(_) => 66,
            Value::TimeTicks(_) => 67,
            Value::Opaque(_) => 68,
            Value::Counter64(_) => 70,
            Value::NoSuchObject => 128,
            Value::NoSuchInstance => 129,
            Value::EndOfMibView => 130,
        }
    }
}

/// A name and its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VarBind {
    pub name: Oid,
    pub value: Value,
}

/// A PDU's payload, by type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    Open {
        timeout: u8,
        id: Oid,
        descr: Vec<u8>,
    },
    Close {
        reason: u8,
    },
    Register {
        timeout: u8,
        priority: u8,
        range_subid: u8,
        subtree: Oid,
        upper_bound: Option<u32>,
    },
    Unregister {
        priority: u8,
        range_subid: u8,
        subtree: Oid,
        upper_bound: Option<u32>,
    },
    Get(Vec<SearchRange>),
    GetNext(Vec<SearchRange>),
    GetBulk {
        non_repeaters: u16,
        max_repetitions: u16,
        ranges: Vec<SearchRange>,
    },
    TestSet(Vec<VarBind>),
    CommitSet,
    UndoSet,
    CleanupSet,
    Notify(Vec<VarBind>),
    Ping,
    IndexAllocate(Vec<VarBind>),
    IndexDeallocate(Vec<VarBind>),
    AddAgentCaps {
        id: Oid,
        descr: Vec<u8>,
    },
    RemoveAgentCaps {
        id: Oid,
    },
    Response {
        sys_up_time: u32,
        error: u16,
        index: u16,
        varbinds: Vec<VarBind>,
    },
}

impl Body {
    /// The `h.type` of this body.
    pub fn pdu_type(&self) -> u8 {
        use pdu_type::*;
        match self {
            Body::Open { .. } => OPEN,
            Body::Close { .. } => CLOSE,
            Body::Register { .. } => REGISTER,
            Body::Unregister { .. } => UNREGISTER,
            Body::Get(_) => GET,
            Body::GetNext(_) => GET_NEXT,
            Body::GetBulk { .. } => GET_BULK,
            Body::TestSet(_) => TEST_SET,
            Body::CommitSet => COMMIT_SET,
            Body::UndoSet => UNDO_SET,
            Body::CleanupSet => CLEANUP_SET,
            Body::Notify(_) => NOTIFY,
            Body::Ping => PING,
            Body::IndexAllocate(_) => INDEX_ALLOCATE,
            Body::IndexDeallocate(_) => INDEX_DEALLOCATE,
            Body::AddAgentCaps { .. } => ADD_AGENT_CAPS,
            Body::RemoveAgentCaps { .. } => REMOVE_AGENT_CAPS,
            Body::Response { .. } => RESPONSE,
        }
    }

    /// Whether a PDU of this type may carry a non-default context.
    fn takes_context(t: u8) -> bool {
        use pdu_type::*;
        !matches!(
            t,
            OPEN | CLOSE | RESPONSE | COMMIT_SET | UNDO_SET | CLEANUP_SET
        )
    }
}

/// One AgentX PDU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pdu {
    pub session_id: u32,
    pub transaction_id: u32,
    pub packet_id: u32,
    /// A Register of one instance (`INSTANCE_REGISTRATION`).
    pub instance_registration: bool,
    /// The non-default context, where the type allows one.
    pub context: Option<Vec<u8>>,
    pub body: Body,
}

impl Pdu {
    /// A PDU in the default context.
    pub fn new(session_id: u32, transaction_id: u32, packet_id: u32, body: Body) -> Pdu {
        Pdu {
            session_id,
            transaction_id,
            packet_id,
            instance_registration: false,
            context: None,
            body,
        }
    }

    /// Encodes in network byte order. A context on a type that takes none
    /// is left out.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(64));
        let t = self.body.pdu_type();
        let context = self.context.as_ref().filter(|_| Body::takes_context(t));
        let mut fl = flags::NETWORK_BYTE_ORDER;
        if context.is_some() {
            fl |= flags::NON_DEFAULT_CONTEXT;
        }
        if self.instance_registration && t == pdu_type::REGISTER {
            fl |= flags::INSTANCE_REGISTRATION;
        }
        w.0.extend_from_slice(&[1, t, fl, 0]);
        w.u32(self.session_id);
        w.u32(self.transaction_id);
        w.u32(self.packet_id);
        w.u32(0); // payload length, patched below
        if let Some(c) = context {
            w.octets(c);
        }
        match &self.body {
            Body::Open { timeout, id, descr } => {
                w.0.extend_from_slice(&[*timeout, 0, 0, 0]);
                w.oid(id, false);
                w.octets(descr);
            }
            Body::Close { reason } => w.0.extend_from_slice(&[*reason, 0, 0, 0]),
            Body::Register {
                timeout,
                priority,
                range_subid,
                subtree,
                upper_bound,
            } => {
                w.0.extend_from_slice(&[*timeout, *priority, *range_subid, 0]);
                w.oid(subtree, false);
                if let Some(u) = upper_bound.filter(|_| *range_subid != 0) {
                    w.u32(u);
                }
            }
            Body::Unregister {
                priority,
                range_subid,
                subtree,
                upper_bound,
            } => {
                w.0.extend_from_slice(&[0, *priority, *range_subid, 0]);
                w.oid(subtree, false);
                if let Some(u) = upper_bound.filter(|_| *range_subid != 0) {
                    w.u32(u);
                }
            }
            Body::Get(r) | Body::GetNext(r) => w.ranges(r),
            Body::GetBulk {
                non_repeaters,
                max_repetitions,
                ranges,
            } => {
                w.u16(*non_repeaters);
                w.u16(*max_repetitions);
                w.ranges(ranges);
            }
            Body::TestSet(v)
            | Body::Notify(v)
            | Body::IndexAllocate(v)
            | Body::IndexDeallocate(v) => w.varbinds(v),
            Body::CommitSet | Body::UndoSet | Body::CleanupSet | Body::Ping => {}
            Body::AddAgentCaps { id, descr } => {
                w.oid(id, false);
                w.octets(descr);
            }
            Body::RemoveAgentCaps { id } => w.oid(id, false),
            Body::Response {
                sys_up_time,
                error,
                index,
                varbinds,
            } => {
                w.u32(*sys_up_time);
                w.u16(*error);
                w.u16(*index);
                w.varbinds(varbinds);
            }
        }
        let len = (w.0.len() - HEADER_LEN) as u32;
        w.0[16..20].copy_from_slice(&len.to_be_bytes());
        w.0
    }

    /// Decodes one whole PDU: `b` is exactly header + payload.
    pub fn decode(b: &[u8]) -> Result<Pdu, DecodeError> {
        let h = Header::decode(b)?;
        let expected = HEADER_LEN + h.payload_len as usize;
        if b.len() != expected {
            return Err(DecodeError::FrameLength {
                expected,
                got: b.len(),
            });
        }
        Pdu::decode_payload(&h, &b[HEADER_LEN..])
    }

    /// Decodes the payload that follows header `h`.
    pub fn decode_payload(h: &Header, payload: &[u8]) -> Result<Pdu, DecodeError> {
        let mut r = Reader {
            b: payload,
            pos: 0,
            big: h.flags & flags::NETWORK_BYTE_ORDER != 0,
        };
        let t = h.pdu_type;
        let context = if h.flags & flags::NON_DEFAULT_CONTEXT != 0 {
            if !Body::takes_context(t) {
                return Err(DecodeError::Invalid("context on a PDU type without one"));
            }
            Some(r.octets()?)
        } else {
            None
        };
        use pdu_type::*;
        let body = match t {
            OPEN => {
                let timeout = r.u8()?;
                r.skip(3)?;
                let (id, _) = r.oid()?;
                Body::Open {
                    timeout,
                    id,
                    descr: r.octets()?,
                }
            }
            CLOSE => {
                let reason = r.u8()?;
                r.skip(3)?;
                Body::Close { reason }
            }
            REGISTER | UNREGISTER => {
                let timeout = r.u8()?;
                let priority = r.u8()?;
                let range_subid = r.u8()?;
                r.skip(1)?;
                let (subtree, _) = r.oid()?;
                if range_subid as usize > subtree.len() {
                    return Err(DecodeError::Invalid("range_subid"));
                }
                let upper_bound = if range_subid != 0 {
                    Some(r.u32()?)
                } else {
                    None
                };
                if t == REGISTER {
                    Body::Register {
                        timeout,
                        priority,
                        range_subid,
                        subtree,
                        upper_bound,
                    }
                } else {
                    Body::Unregister {
                        priority,
                        range_subid,
                        subtree,
                        upper_bound,
                    }
                }
            }
            GET => Body::Get(r.ranges()?),
            GET_NEXT => Body::GetNext(r.ranges()?),
            GET_BULK => {
                let non_repeaters = r.u16()?;
                let max_repetitions = r.u16()?;
                Body::GetBulk {
                    non_repeaters,
                    max_repetitions,
                    ranges: r.ranges()?,
                }
            }
            TEST_SET => Body::TestSet(r.varbinds()?),
            COMMIT_SET => Body::CommitSet,
            UNDO_SET => Body::UndoSet,
            CLEANUP_SET => Body::CleanupSet,
            NOTIFY => Body::Notify(r.varbinds()?),
            PING => Body::Ping,
            INDEX_ALLOCATE => Body::IndexAllocate(r.varbinds()?),
            INDEX_DEALLOCATE => Body::IndexDeallocate(r.varbinds()?),
            ADD_AGENT_CAPS => {
                let (id, _) = r.oid()?;
                Body::AddAgentCaps {
                    id,
                    descr: r.octets()?,
                }
            }
            REMOVE_AGENT_CAPS => Body::RemoveAgentCaps { id: r.oid()?.0 },
            RESPONSE => {
                let sys_up_time = r.u32()?;
                let error = r.u16()?;
                let index = r.u16()?;
                Body::Response {
                    sys_up_time,
                    error,
                    index,
                    varbinds: r.varbinds()?,
                }
            }
            other => return Err(DecodeError::Type(other)),
        };
        if r.pos != payload.len() {
            return Err(DecodeError::Trailing(payload.len() - r.pos));
        }
        Ok(Pdu {
            session_id: h.session_id,
            transaction_id: h.transaction_id,
            packet_id: h.packet_id,
            instance_registration: t == REGISTER && h.flags & flags::INSTANCE_REGISTRATION != 0,
            context,
            body,
        })
    }
}

struct Writer(Vec<u8>);

impl Writer {
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn octets(&mut self, s: &[u8]) {
        self.u32(s.len() as u32);
        self.0.extend_from_slice(s);
        let pad = (4 - s.len() % 4) % 4;
        self.0.resize(self.0.len() + pad, 0);
    }
    /// An OID, compressed when it starts `1.3.6.1.N` with N in 1..=255.
    /// Longer than [`MAX_SUBIDS`] is cut there (never produced here).
    fn oid(&mut self, oid: &[u32], include: bool) {
        let oid = &oid[..oid.len().min(MAX_SUBIDS)];
        let (prefix, rest) = match oid {
            [1, 3, 6, 1, p, rest @ ..] if (1..=255).contains(p) => (*p as u8, rest),
            _ => (0, oid),
        };
        self.0
            .extend_from_slice(&[rest.len() as u8, prefix, include as u8, 0]);
        for s in rest {
            self.u32(*s);
        }
    }
    fn ranges(&mut self, r: &[SearchRange]) {
        for s in r {
            self.oid(&s.start, s.include);
            self.oid(&s.end, false);
        }
    }
    fn varbinds(&mut self, v: &[VarBind]) {
        for vb in v {
            self.u16(vb.value.type_code());
            self.u16(0);
            self.oid(&vb.name, false);
            match &vb.value {
                Value::Integer(i) => self.u32(*i as u32),
                Value::OctetString(s) | Value::Opaque(s) => self.octets(s),
                Value::IpAddress(a) => self.octets(a),
                Value::Oid(o) => self.oid(o, false),
                Value::Counter32(n) | Value::Gauge32(n) | Value::TimeTicks(n) => self.u32(*n),
                Value::Counter64(n) => self.0.extend_from_slice(&n.to_be_bytes()),
                Value::Null | Value::NoSuchObject | Value::NoSuchInstance | Value::EndOfMibView => {
                }
            }
        }
    }
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
    big: bool,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let left = self.b.len() - self.pos;
        if n > left {
            return Err(DecodeError::Truncated {
                at: self.pos,
                need: n - left,
            });
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        self.take(n).map(|_| ())
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        let s = self.take(2)?;
        let w = [s[0], s[1]];
        Ok(if self.big {
            u16::from_be_bytes(w)
        } else {
            u16::from_le_bytes(w)
        })
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        let s = self.take(4)?;
        let w = [s[0], s[1], s[2], s[3]];
        Ok(if self.big {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        })
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        let s = self.take(8)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(s);
        Ok(if self.big {
            u64::from_be_bytes(w)
        } else {
            u64::from_le_bytes(w)
        })
    }
    fn octets(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.u32()? as usize;
        let padded = n
            .checked_add(3)
            .ok_or(DecodeError::Invalid("octet string length"))?
            & !3;
        let s = self.take(padded)?;
        Ok(s[..n].to_vec())
    }
    /// An OID and its include flag.
    fn oid(&mut self) -> Result<(Oid, bool), DecodeError> {
        let n = self.u8()?;
        let prefix = self.u8()?;
        let include = match self.u8()? {
            0 => false,
            1 => true,
            _ => return Err(DecodeError::Invalid("OID include field")),
        };
        self.skip(1)?;
        let total = n as usize + if prefix != 0 { 5 } else { 0 };
        if total > MAX_SUBIDS {
            return Err(DecodeError::OidTooLong(n));
        }
        let mut oid = Vec::with_capacity(total);
        if prefix != 0 {
            oid.extend_from_slice(&[1, 3, 6, 1, prefix as u32]);
        }
        for _ in 0..n {
            oid.push(self.u32()?);
        }
        Ok((oid, include))
    }
    fn ranges(&mut self) -> Result<Vec<SearchRange>, DecodeError> {
        let mut v = Vec::new();
        while self.pos < self.b.len() {
            let (start, include) = self.oid()?;
            let (end, _) = self.oid()?;
            v.push(SearchRange {
                start,
                include,
                end,
            });
        }
        Ok(v)
    }
    fn varbinds(&mut self) -> Result<Vec<VarBind>, DecodeError> {
        let mut v = Vec::new();
        while self.pos < self.b.len() {
            let t = self.u16()?;
            self.skip(2)?;
            let (name, _) = self.oid()?;
            let value = match t {
                2 => Value::Integer(self.u32()? as i32),
                4 => Value::OctetString(self.octets()?),
                5 => Value::Null,
                6 => Value::Oid(self.oid()?.0),
                64 => {
                    let a = self.octets()?;
                    let a: [u8; 4] = a
                        .as_slice()
                        .try_into()
                        .map_err(|_| DecodeError::Invalid("IpAddress length"))?;
                    Value::IpAddress(a)
                }
                65 => Value::Counter32(self.u32()?),
                66 => Value::Gauge32(self.u32()?),
                67 => Value::TimeTicks(self.u32()?),
                68 => Value::Opaque(self.octets()?),
                70 => Value::Counter64(self.u64()?),
                128 => Value::NoSuchObject,
                129 => Value::NoSuchInstance,
                130 => Value::EndOfMibView,
                other => return Err(DecodeError::ValueType(other)),
            };
            v.push(VarBind { name, value });
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(p: &Pdu) {
        let b = p.encode();
        assert_eq!(b.len() % 4, 0);
        assert_eq!(&Pdu::decode(&b).unwrap(), p);
    }

    fn all_values() -> Vec<VarBind> {
        let vals = vec![
            Value::Integer(-5),
            Value::OctetString(b"fe-sa".to_vec()),
            Value::OctetString(vec![]),
            Value::Null,
            Value::Oid(vec![1, 3, 6, 1, 6, 3, 1, 1, 5, 3]),
            Value::Oid(vec![]),
            Value::IpAddress([10, 9, 0, 1]),
            Value::Counter32(u32::MAX),
            Value::Gauge32(1_000_000_000),
            Value::TimeTicks(42),
            Value::Opaque(vec![1, 2, 3]),
            Value::Counter64(u64::MAX - 1),
            Value::NoSuchObject,
            Value::NoSuchInstance,
            Value::EndOfMibView,
        ];
        vals.into_iter()
            .enumerate()
            .map(|(i, value)| VarBind {
                name: vec![1, 3, 6, 1, 2, 1, 2, 2, 1, 10, i as u32],
                value,
            })
            .collect()
    }

    #[test]
    fn every_type_round_trips() {
        let ranges = vec![
            SearchRange {
                start: vec![1, 3, 6, 1, 2, 1, 2, 2],
                include: true,
                end: vec![1, 3, 6, 1, 2, 1, 2, 3],
            },
            SearchRange {
                start: vec![1, 2],
                include: false,
                end: vec![],
            },
        ];
        let bodies = vec![
            Body::Open {
                timeout: 5,
                id: vec![1, 3, 6, 1, 4, 1, 99999],
                descr: b"fulmar".to_vec(),
            },
            Body::Close { reason: 5 },
            Body::Register {
                timeout: 0,
                priority: 127,
                range_subid: 0,
                subtree: vec![1, 3, 6, 1, 2, 1, 2, 2],
                upper_bound: None,
            },
            Body::Register {
                timeout: 0,
                priority: 1,
                range_subid: 8,
                subtree: vec![1, 3, 6, 1, 2, 1, 2, 2, 1, 1],
                upper_bound: Some(22),
            },
            Body::Unregister {
                priority: 127,
                range_subid: 0,
                subtree: vec![1, 3, 6, 1, 2, 1, 17, 1],
                upper_bound: None,
            },
            Body::Get(ranges.clone()),
            Body::GetNext(ranges.clone()),
            Body::GetBulk {
                non_repeaters: 1,
                max_repetitions: 10,
                ranges,
            },
            Body::TestSet(all_values()),
            Body::CommitSet,
            Body::UndoSet,
            Body::CleanupSet,
            Body::Notify(all_values()),
            Body::Ping,
            Body::IndexAllocate(all_values()),
            Body::IndexDeallocate(all_values()),
            Body::AddAgentCaps {
                id: vec![1, 3, 6, 1, 2, 1, 31],
                descr: b"abc".to_vec(),
            },
            Body::RemoveAgentCaps {
                id: vec![1, 3, 6, 1, 2, 1, 31],
            },
            Body::Response {
                sys_up_time: 7,
                error: error::NOT_WRITABLE,
                index: 1,
                varbinds: all_values(),
            },
        ];
        for body in bodies {
            let mut p = Pdu::new(3, 4, 5, body);
            rt(&p);
            if Body::takes_context(p.body.pdu_type()) {
                p.context = Some(b"br0".to_vec());
                rt(&p);
            }
        }
    }

    #[test]
    fn oids_under_internet_are_compressed() {
        let p = Pdu::new(
            0,
            0,
            0,
            Body::RemoveAgentCaps {
                id: vec![1, 3, 6, 1, 2, 1, 2],
            },
        );
        let b = p.encode();
        // n_subid 2, prefix 2, include 0, reserved, then 1 and 2.
        assert_eq!(&b[20..24], &[2, 2, 0, 0]);
        assert_eq!(b.len(), 20 + 4 + 8);
        // 1.3.6.1.0... and 1.3.6.1.256... stay long.
        for id in [vec![1, 3, 6, 1, 0, 5], vec![1, 3, 6, 1, 256], vec![1, 3, 6]] {
            let p = Pdu::new(0, 0, 0, Body::RemoveAgentCaps { id });
            let b = p.encode();
            assert_eq!(b[21], 0);
            rt(&p);
        }
    }

    /// A Get from the master in little-endian order, with a context,
    /// written out by hand from RFC 2741's layout.
    #[test]
    fn little_endian_with_context_decodes() {
        let mut b = vec![1, pdu_type::GET, flags::NON_DEFAULT_CONTEXT, 0];
        for w in [9u32, 8, 7, 8 + 8 + 4] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(b"br1\0");
        // start: prefix 2, 1 sub-id (1) -> 1.3.6.1.2.1; end: null
        b.extend_from_slice(&[1, 2, 0, 0]);
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&[0, 0, 0, 0]);
        let p = Pdu::decode(&b).unwrap();
        assert_eq!((p.session_id, p.transaction_id, p.packet_id), (9, 8, 7));
        assert_eq!(p.context.as_deref(), Some(&b"br1"[..]));
        assert_eq!(
            p.body,
            Body::Get(vec![SearchRange {
                start: vec![1, 3, 6, 1, 2, 1],
                include: false,
                end: vec![],
            }])
        );
        // The Counter64 of a little-endian Response.
        let mut b = vec![1, pdu_type::RESPONSE, 0, 0];
        for w in [0u32, 0, 0, 8 + 4 + 4 + 8] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&70u16.to_le_bytes());
        b.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        b.extend_from_slice(&0x0102_0304_0506_0708u64.to_le_bytes());
        let p = Pdu::decode(&b).unwrap();
        match p.body {
            Body::Response { varbinds, .. } => {
                assert_eq!(varbinds[0].value, Value::Counter64(0x0102_0304_0506_0708))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_truncation_is_an_error() {
        let p = Pdu::new(
            1,
            2,
            3,
            Body::Response {
                sys_up_time: 1,
                error: 0,
                index: 0,
                varbinds: all_values(),
            },
        );
        let b = p.encode();
        for n in 0..b.len() {
            assert!(Pdu::decode(&b[..n]).is_err(), "{n}");
            // The payload alone, cut anywhere: an error, or (cut between
            // two varbinds) fewer varbinds; never a panic.
            if n >= HEADER_LEN && n < b.len() {
                let h = Header::decode(&b).unwrap();
                if let Ok(Pdu {
                    body: Body::Response { varbinds, .. },
                    ..
                }) = Pdu::decode_payload(&h, &b[HEADER_LEN..n])
                {
                    assert!(varbinds.len() < all_values().len());
                }
            }
        }
    }

    #[test]
    fn garbage_is_an_error_never_a_panic() {
        // Bad version, type, payload length.
        let mut h = Pdu::new(0, 0, 0, Body::Ping).encode();
        h[0] = 2;
        assert_eq!(Pdu::decode(&h), Err(DecodeError::Version(2)));
        let mut h = Pdu::new(0, 0, 0, Body::Ping).encode();
        h[1] = 19;
        assert_eq!(Pdu::decode(&h), Err(DecodeError::Type(19)));
        let mut h = Pdu::new(0, 0, 0, Body::Ping).encode();
        h[19] = 3;
        assert_eq!(Pdu::decode(&h), Err(DecodeError::PayloadLength(3)));
        let mut h = Pdu::new(0, 0, 0, Body::Ping).encode();
        h[16] = 0x7f;
        assert!(matches!(
            Pdu::decode(&h),
            Err(DecodeError::PayloadLength(_))
        ));
        // An octet string claiming 4 GiB.
        let mut b = Pdu::new(0, 0, 0, Body::Close { reason: 1 }).encode();
        b[1] = pdu_type::OPEN;
        b.truncate(20);
        b.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
        b[19] = 12;
        assert!(Pdu::decode(&b).is_err());
        // An OID that says 200 sub-ids.
        let mut b = Pdu::new(0, 0, 0, Body::RemoveAgentCaps { id: vec![1] }).encode();
        b[20] = 200;
        assert!(Pdu::decode(&b).is_err());
        // A context on a Response.
        let mut b = Pdu::new(0, 0, 0, Body::Close { reason: 1 }).encode();
        b[2] |= flags::NON_DEFAULT_CONTEXT;
        assert!(Pdu::decode(&b).is_err());
        // Pseudo-random bytes behind a valid header: errors or PDUs, no panic.
        let mut x: u32 = 0x1234_5678;
        for round in 0..2000 {
            let len = 4 * (round % 24);
            let mut b = vec![1, (round % 20) as u8, (round as u8) & 0x1f, 0];
            b.extend_from_slice(&[0; 12]);
            b.extend_from_slice(&(len as u32).to_be_bytes());
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                b.push((x % 7) as u8 * if x & 8 != 0 { 1 } else { 37 });
            }
            if b[2] & flags::NETWORK_BYTE_ORDER == 0 {
                b[16..20].copy_from_slice(&(len as u32).to_le_bytes());
            }
            let _ = Pdu::decode(&b);
        }
    }
}
