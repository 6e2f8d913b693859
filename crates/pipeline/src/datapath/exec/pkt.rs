//! The packet record: one packet on its way through the pipeline, its
//! buffer, its match fields (parsed again only when an action changed the
//! bytes and something reads them) and where its processing came from.

use packet::buffer::PacketBuf;
use packet::flow_key::FlowKey;

/// Where a packet's current processing came from, for packet-ins.
#[derive(Clone, Copy, Debug)]
pub(in crate::datapath) struct Origin {
    pub table_id: u8,
    pub cookie: u64,
    /// The entry is a table-miss entry (priority 0, empty match).
    pub miss: bool,
}

/// Cookie reported by packet-ins not caused by a flow entry (packet-out).
pub(in crate::datapath) const NO_COOKIE: u64 = u64::MAX;

/// One packet on its way through the pipeline.
#[derive(Clone, Debug)]
pub(in crate::datapath) struct Pkt {
    pub buf: PacketBuf,
    /// The parsed fields; out of date while `stale` (read them with
    /// [`Pkt::key`]).
    pub(super) key: FlowKey,
    /// An action changed the bytes since `key` was parsed.
    pub(super) stale: bool,
    pub in_port: u32,
    pub in_phy_port: u32,
    pub metadata: u64,
    pub tunnel_id: u64,
    pub queue_id: u32,
    pub origin: Origin,
    /// Processing actions of a PACKET_OUT (OFPP_TABLE allowed).
    pub packet_out: bool,
}

impl Pkt {
    pub fn new(buf: PacketBuf, in_port: u32) -> Pkt {
        let mut p = Pkt {
            buf,
            key: FlowKey::default(),
            stale: false,
            in_port,
            in_phy_port: in_port,
            metadata: 0,
            tunnel_id: 0,
            queue_id: 0,
            origin: Origin {
                table_id: 0,
                cookie: NO_COOKIE,
                miss: false,
            },
            packet_out: false,
        };
        p.reparse();
        p
    }

    /// Makes this record describe a new packet `buf` received on
    /// `in_port` (as [`Pkt::new`], reusing the record's storage).
    pub fn reset(&mut self, buf: PacketBuf, in_port: u32) {
        self.buf = buf;
        self.in_port = in_port;
        self.in_phy_port = in_port;
        self.metadata = 0;
        self.tunnel_id = 0;
        self.queue_id = 0;
        self.origin = Origin {
            table_id: 0,
            cookie: NO_COOKIE,
            miss: false,
        };
        self.packet_out = false;
        self.reparse();
    }

    /// Sets the packet's `tunnel_id` as it was received (a tunnel port's
    /// key), in the parsed key too.
    pub fn set_tunnel_id(&mut self, tunnel_id: u64) {
        self.tunnel_id = tunnel_id;
        self.key.tunnel_id = tunnel_id;
    }

    /// Drops the packet's buffer (keeping the record).
    pub fn release(&mut self) {
        self.buf = PacketBuf::from_vec(Vec::new());
    }

    /// Moves the packet out, leaving one with an empty buffer.
    pub fn take(&mut self) -> Pkt {
        let empty = Pkt {
            buf: PacketBuf::from_vec(Vec::new()),
            key: FlowKey::default(),
            stale: false,
            in_port: self.in_port,
            in_phy_port: self.in_phy_port,
            metadata: 0,
            tunnel_id: 0,
            queue_id: 0,
            origin: self.origin,
            packet_out: false,
        };
        std::mem::replace(self, empty)
    }

    /// Parses the headers again (after an action changed them) and sets
    /// the pipeline fields.
    #[inline]
    pub fn reparse(&mut self) {
        self.key.parse_into(self.buf.as_slice());
        self.key.set_metadata_fields(
            self.in_port,
            self.in_phy_port,
            self.metadata,
            self.tunnel_id,
        );
        self.stale = false;
    }

    /// The packet's fields as they are now (parsed again if an action
    /// changed the bytes since the last parse: parsing is lazy, so a run
    /// of header rewrites costs one parse, when something reads the key).
    #[inline]
    pub fn key(&mut self) -> &FlowKey {
        if self.stale {
            self.reparse();
        }
        &self.key
    }

    /// The buffer and the up-to-date key, borrowed together.
    #[inline]
    pub fn buf_and_key(&mut self) -> (&mut PacketBuf, &FlowKey) {
        if self.stale {
            self.reparse();
        }
        (&mut self.buf, &self.key)
    }

    /// The key of a packet no action has changed since it was made (what
    /// the burst lookup reads, right after parsing).
    pub fn parsed_key(&self) -> &FlowKey {
        &self.key
    }
}
