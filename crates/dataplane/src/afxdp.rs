//! The AF_XDP backend: a port on one queue of a network interface through an
//! XDP socket, built on raw system calls (no libxdp/libbpf, so no C
//! libraries to install).
//!
//! # Pieces
//!
//! - **UMEM**: one anonymous mapping of `frame_count` frames of
//!   `frame_size` bytes, registered with the socket. The first half of the
//!   frames receive, the second half send.
//! - **Four rings** shared with the kernel, each a power-of-two array with a
//!   producer and a consumer index: *fill* (we give the kernel empty RX
//!   frames), *RX* (it gives back filled ones), *TX* (we give it frames to
//!   send) and *completion* (it gives back sent ones). We are the only
//!   producer of fill/TX and the only consumer of RX/completion; indices are
//!   read with `Acquire` and published with `Release`, descriptors are
//!   written before the producer index that publishes them.
//! - **An XDP program** of five instructions that redirects every frame of
//!   the bound queue to the socket through an `XSKMAP`
//!   (`bpf_redirect_map(map, rx_queue_index, XDP_PASS)`; frames of other
//!   queues pass to the host stack). It is attached with a BPF link, so it is
//!   detached when the port is dropped, also if the process dies.
//!
//! # Receive: frames lent from the UMEM
//!
//! Received frames are lent as [`PacketBuf`]s pointing into the UMEM (no
//! copy). Dropping one sets the frame's bit in a lock-free "returned" bitmap
//! (any thread may drop it); the next `rx_burst` moves returned frames back
//! onto the fill ring. The UMEM is reference counted, so it outlives the
//! port while frames are held. The headroom is whatever the kernel leaves in
//! front of the data (`XDP_PACKET_HEADROOM`, 256 bytes, in copy mode).
//!
//! # Send: one copy into a TX frame
//!
//! Each frame is copied into a free TX frame of the UMEM and its descriptor
//! put on the TX ring; completed frames come back through the completion
//! ring. When no TX frame or TX slot is free the rest of the burst stays with
//! the caller.
//!
//! # Modes
//!
//! Binding tries zero-copy first (the driver must support it) and falls back
//! to copy mode ([`XdpBind::Auto`]); attaching tries native (driver) XDP
//! and falls back to generic (skb) XDP ([`XdpAttach::Auto`]). veth supports
//! native XDP and copy mode. One socket serves one queue: a multi-queue
//! device needs one port per queue (or the queues reduced to one with
//! `ethtool -L`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::port::{
    BufferLender, LinkState, PacketBuf, PortBackend, PortCounters, RxBurst, SharedLender, TxBurst,
};
use crate::sys;

/// How the socket binds to the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpBind {
    /// Zero-copy if the driver allows, else copy.
    Auto,
    /// Copy mode only.
    Copy,
    /// Zero-copy only (fails on drivers without support).
    ZeroCopy,
}

/// How the XDP program attaches to the interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpAttach {
    /// Native if the driver allows, else generic.
    Auto,
    /// Native (driver) XDP only.
    Native,
    /// Generic (skb) XDP only.
    Generic,
}

/// Options for an [`AfXdpPort`].
#[derive(Clone, Debug)]
pub struct AfXdpConfig {
    /// The interface queue to serve (default 0).
    pub queue_id: u32,
    /// Bytes per UMEM frame: a power of two from 2048 to the page size
    /// (default 2048).
    pub frame_size: u32,
    /// UMEM frames, half for RX and half for TX; a power of two (default 4096).
    pub frame_count: u32,
    /// Bind mode (default `Auto`).
    pub bind: XdpBind,
    /// Attach mode (default `Auto`).
    pub attach: XdpAttach,
}

impl Default for AfXdpConfig {
    fn default() -> Self {
        AfXdpConfig {
            queue_id: 0,
            frame_size: 2048,
            frame_count: 4096,
            bind: XdpBind::Auto,
            attach: XdpAttach::Auto,
        }
    }
}

/// The UMEM: frames shared with the kernel, plus the bitmap through which
/// lent RX frames come back.
struct Umem {
    base: NonNull<u8>,
    len: usize,
    frame_size: usize,
    /// Bit `i` set: RX frame `i` was dropped by its holder and can be refilled.
    returned: Box<[AtomicU64]>,
}

// SAFETY: the mapping is plain memory owned by this struct; frames are
// accessed only by the one PacketBuf they are lent to or by the port while
// it owns them, and the bitmap is atomic.
unsafe impl Send for Umem {}
// SAFETY: as above.
unsafe impl Sync for Umem {}

impl BufferLender for Umem {
    fn release(&self, token: usize) {
        if let Some(word) = self.returned.get(token / 64) {
            word.fetch_or(1u64 << (token % 64), Ordering::Release);
        }
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: base/len are what mmap returned; no PacketBuf points into
        // the UMEM any more (each holds an Arc to it).
        unsafe { libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.len) };
    }
}

/// One of the four rings, mapped from the socket.
struct Ring {
    map: NonNull<u8>,
    map_len: usize,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    descs: NonNull<u8>,
    desc_size: usize,
    size: u32,
    cached_prod: u32,
    cached_cons: u32,
}

impl Ring {
    /// Maps ring `off` of socket `fd` at page offset `pgoff`.
    fn map(
        fd: RawFd,
        off: &libc::xdp_ring_offset,
        pgoff: u64,
        size: u32,
        desc_size: usize,
    ) -> io::Result<Ring> {
        let bad = || io::Error::other("XDP ring offsets outside the mapping");
        let desc = usize::try_from(off.desc).map_err(|_| bad())?;
        let map_len = desc
            .checked_add(size as usize * desc_size)
            .ok_or_else(bad)?;
        // Every offset must leave room for its u32 inside the mapping.
        let field = |o: u64| {
            usize::try_from(o)
                .ok()
                .filter(|&o| o.saturating_add(4) <= map_len)
                .ok_or_else(bad)
        };
        let (prod, cons, flags) = (
            field(off.producer)?,
            field(off.consumer)?,
            field(off.flags)?,
        );
        // SAFETY: mapping a ring the kernel allocated for this socket, at a
        // kernel-chosen address, with the length the offsets describe.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff as libc::off_t,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(sys::context(
                io::Error::last_os_error(),
                "mmap of an XDP ring",
            ));
        }
        let map =
            NonNull::new(map as *mut u8).ok_or_else(|| io::Error::other("mmap returned null"))?;
        // SAFETY: every offset was checked to lie inside the mapping.
        let at = |o: usize| unsafe { NonNull::new_unchecked(map.as_ptr().add(o)) };
        let mut ring = Ring {
            map,
            map_len,
            producer: at(prod).cast(),
            consumer: at(cons).cast(),
            flags: at(flags).cast(),
            descs: at(desc),
            desc_size,
            size,
            cached_prod: 0,
            cached_cons: 0,
        };
        ring.cached_prod = ring.producer().load(Ordering::Acquire);
        ring.cached_cons = ring.consumer().load(Ordering::Acquire);
        Ok(ring)
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points inside the live mapping at a 4-byte aligned index
        // the kernel laid out; shared with the kernel, hence atomic.
        unsafe { self.producer.as_ref() }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as in `producer`.
        unsafe { self.consumer.as_ref() }
    }

    fn needs_wakeup(&self) -> bool {
        // SAFETY: as in `producer`.
        unsafe { self.flags.as_ref() }.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// Pointer to descriptor slot `idx` (wrapped).
    fn desc(&self, idx: u32) -> *mut u8 {
        let slot = (idx & (self.size - 1)) as usize;
        // SAFETY: slot < size, and the mapping holds size descriptors after `descs`.
        unsafe { self.descs.as_ptr().add(slot * self.desc_size) }
    }

    /// Producer side: free slots, up to `want`.
    fn free(&mut self, want: u32) -> u32 {
        let mut free = self.size - self.cached_prod.wrapping_sub(self.cached_cons);
        if free < want {
            self.cached_cons = self.consumer().load(Ordering::Acquire);
            free = self.size - self.cached_prod.wrapping_sub(self.cached_cons);
        }
        free.min(want)
    }

    /// Producer side: publishes `n` written slots.
    fn submit(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_add(n);
        self.producer().store(self.cached_prod, Ordering::Release);
    }

    /// Consumer side: filled slots, up to `want`.
    fn available(&mut self, want: u32) -> u32 {
        let mut avail = self.cached_prod.wrapping_sub(self.cached_cons);
        if avail < want {
            self.cached_prod = self.producer().load(Ordering::Acquire);
            avail = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        avail.min(want)
    }

    /// Consumer side: frees `n` read slots.
    fn release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.consumer().store(self.cached_cons, Ordering::Release);
    }

    fn write_addr(&mut self, idx: u32, addr: u64) {
        // SAFETY: `desc` is in the mapping; 8-byte slots of the fill ring,
        // owned by us until submitted.
        unsafe { std::ptr::write_unaligned(self.desc(idx) as *mut u64, addr) }
    }

    fn read_addr(&self, idx: u32) -> u64 {
        // SAFETY: as in `write_addr`; slot published by the kernel.
        unsafe { std::ptr::read_unaligned(self.desc(idx) as *const u64) }
    }

    fn write_desc(&mut self, idx: u32, addr: u64, len: u32) {
        let d = libc::xdp_desc {
            addr,
            len,
            options: 0,
        };
        // SAFETY: as in `write_addr`, 16-byte slots of the TX ring.
        unsafe { std::ptr::write_unaligned(self.desc(idx) as *mut libc::xdp_desc, d) }
    }

    fn read_desc(&self, idx: u32) -> (u64, u32) {
        // SAFETY: as in `read_addr`, 16-byte slots of the RX ring.
        let d = unsafe { std::ptr::read_unaligned(self.desc(idx) as *const libc::xdp_desc) };
        (d.addr, d.len)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: map/map_len are what mmap returned.
        unsafe { libc::munmap(self.map.as_ptr() as *mut libc::c_void, self.map_len) };
    }
}

// SAFETY: the ring pointers refer to a mapping owned by the Ring; the port
// that owns the rings uses them from one thread at a time.
unsafe impl Send for Ring {}

/// The loaded XDP program, its XSKMAP and the link attaching it.
struct XdpProgram {
    _link: OwnedFd,
    _prog: OwnedFd,
    _map: OwnedFd,
    native: bool,
}

mod bpf {
    pub const MAP_CREATE: libc::c_long = 0;
    pub const MAP_UPDATE_ELEM: libc::c_long = 2;
    pub const PROG_LOAD: libc::c_long = 5;
    pub const LINK_CREATE: libc::c_long = 28;
    pub const MAP_TYPE_XSKMAP: u32 = 17;
    pub const PROG_TYPE_XDP: u32 = 6;
    pub const ATTACH_XDP: u32 = 37;
    pub const FLAGS_SKB_MODE: u32 = 1 << 1;
    pub const FLAGS_DRV_MODE: u32 = 1 << 2;
    pub const FUNC_REDIRECT_MAP: i32 = 51;
    pub const XDP_PASS: i32 = 2;
}

/// `union bpf_attr` as a zeroed, 8-byte aligned buffer filled by offset.
#[repr(C, align(8))]
struct BpfAttr([u8; 128]);

impl BpfAttr {
    fn new() -> Self {
        BpfAttr([0; 128])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    /// Runs `bpf(cmd, self)`; a new descriptor for commands that make one.
    fn call(&mut self, cmd: libc::c_long) -> io::Result<libc::c_long> {
        // SAFETY: the bpf syscall reads (and for some commands writes) the
        // attr buffer of the size passed; it lives across the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                cmd,
                self.0.as_mut_ptr(),
                self.0.len() as libc::c_uint,
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(rc)
        }
    }
}

fn owned(fd: libc::c_long) -> io::Result<OwnedFd> {
    let fd = RawFd::try_from(fd).map_err(|_| io::Error::other("bad descriptor"))?;
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One eBPF instruction.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let mut i = [0u8; 8];
    i[0] = code;
    i[1] = (src << 4) | (dst & 0xf);
    i[2..4].copy_from_slice(&off.to_le_bytes());
    i[4..8].copy_from_slice(&imm.to_le_bytes());
    i
}

/// The redirect program: `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);`
fn redirect_program(map_fd: RawFd) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend(insn(0x61, 2, 1, 16, 0)); // r2 = *(u32 *)(r1 + 16): rx_queue_index
    p.extend(insn(0x18, 1, 1, 0, map_fd)); // r1 = map (ld_imm64, BPF_PSEUDO_MAP_FD)
    p.extend(insn(0, 0, 0, 0, 0)); //        (second half of ld_imm64)
    p.extend(insn(0xb7, 3, 0, 0, bpf::XDP_PASS)); // r3 = XDP_PASS (if no socket)
    p.extend(insn(0x85, 0, 0, 0, bpf::FUNC_REDIRECT_MAP)); // call bpf_redirect_map
    p.extend(insn(0x95, 0, 0, 0, 0)); // exit
    p
}

impl XdpProgram {
    fn attach(ifindex: u32, queue_id: u32, xsk: RawFd, mode: XdpAttach) -> io::Result<XdpProgram> {
        let entries = queue_id
            .checked_add(1)
            .ok_or_else(|| io::Error::other("queue id too large"))?;
        let map = owned(
            BpfAttr::new()
                .u32(0, bpf::MAP_TYPE_XSKMAP)
                .u32(4, 4)
                .u32(8, 4)
                .u32(12, entries)
                .call(bpf::MAP_CREATE)
                .map_err(|e| sys::context(e, "create XSKMAP"))?,
        )?;
        let key = queue_id;
        let value = xsk as u32;
        BpfAttr::new()
            .u32(0, map.as_raw_fd() as u32)
            .u64(8, &key as *const u32 as u64)
            .u64(16, &value as *const u32 as u64)
            .call(bpf::MAP_UPDATE_ELEM)
            .map_err(|e| sys::context(e, "put the socket in the XSKMAP"))?;
        let code = redirect_program(map.as_raw_fd());
        let license = b"Apache-2.0\0";
        let prog = owned(
            BpfAttr::new()
                .u32(0, bpf::PROG_TYPE_XDP)
                .u32(4, (code.len() / 8) as u32)
                .u64(8, code.as_ptr() as u64)
                .u64(16, license.as_ptr() as u64)
                .call(bpf::PROG_LOAD)
                .map_err(|e| sys::context(e, "load the XDP redirect program"))?,
        )?;
        let link = |flags: u32| {
            BpfAttr::new()
                .u32(0, prog.as_raw_fd() as u32)
                .u32(4, ifindex)
                .u32(8, bpf::ATTACH_XDP)
                .u32(12, flags)
                .call(bpf::LINK_CREATE)
        };
        let (link, native) = match mode {
            XdpAttach::Native => (link(bpf::FLAGS_DRV_MODE)?, true),
            XdpAttach::Generic => (link(bpf::FLAGS_SKB_MODE)?, false),
            XdpAttach::Auto => match link(bpf::FLAGS_DRV_MODE) {
                Ok(l) => (l, true),
                Err(_) => (link(bpf::FLAGS_SKB_MODE)?, false),
            },
        };
        Ok(XdpProgram {
            _link: owned(link).map_err(|e| sys::context(e, "attach the XDP program"))?,
            _prog: prog,
            _map: map,
            native,
        })
    }
}

/// A port on one queue of an interface through AF_XDP.
pub struct AfXdpPort {
    name: String,
    // Field order is drop order: detach the program, then unmap the rings,
    // then close the socket; the UMEM goes when the last lent frame does.
    prog: XdpProgram,
    fill: Ring,
    comp: Ring,
    rx: Ring,
    tx: Ring,
    fd: OwnedFd,
    umem: Arc<Umem>,
    /// The UMEM as the lender of the frames it lends ([`SharedLender`]).
    lender: SharedLender,
    rx_frames: u32,
    tx_free: Vec<u64>,
    zero_copy: bool,
    counters: PortCounters,
}

impl AfXdpPort {
    /// Opens queue 0 of `ifname` with the default configuration.
    pub fn open(ifname: &str) -> io::Result<Self> {
        Self::open_with(ifname, &AfXdpConfig::default())
    }

    /// Opens queue `cfg.queue_id` of `ifname` (in the calling thread's
    /// network namespace). A missing interface is a `NotFound` error naming it.
    pub fn open_with(ifname: &str, cfg: &AfXdpConfig) -> io::Result<Self> {
        let ifindex = sys::if_index(ifname)?;
        Self::open_index(ifname, ifindex, cfg)
            .map_err(|e| sys::context(e, format!("AF_XDP port {ifname:?} queue {}", cfg.queue_id)))
    }

    fn open_index(ifname: &str, ifindex: u32, cfg: &AfXdpConfig) -> io::Result<Self> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let fs = cfg.frame_size as usize;
        if !cfg.frame_size.is_power_of_two()
            || fs < 2048
            || fs > page
            || !cfg.frame_count.is_power_of_two()
            || cfg.frame_count < 4
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "bad UMEM geometry: frame_size {} must be a power of two from 2048 to {page}, frame_count {} a power of two >= 4",
                    cfg.frame_size, cfg.frame_count
                ),
            ));
        }
        let fd = sys::socket(libc::AF_XDP, libc::SOCK_RAW, 0)
            .map_err(|e| sys::context(e, "AF_XDP socket"))?;
        let len = fs * cfg.frame_count as usize;
        // SAFETY: a fresh private anonymous mapping; no existing memory involved.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(sys::context(io::Error::last_os_error(), "mmap of the UMEM"));
        }
        let umem = Arc::new(Umem {
            base: NonNull::new(base as *mut u8)
                .ok_or_else(|| io::Error::other("mmap returned null"))?,
            len,
            frame_size: fs,
            returned: (0..(cfg.frame_count as usize).div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
        });
        let reg = libc::xdp_umem_reg {
            addr: base as u64,
            len: len as u64,
            chunk_size: cfg.frame_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        sys::setsockopt(&fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg)
            .map_err(|e| sys::context(e, "XDP_UMEM_REG"))?;
        let half = cfg.frame_count / 2;
        for (opt, what) in [
            (libc::XDP_UMEM_FILL_RING, "fill ring"),
            (libc::XDP_UMEM_COMPLETION_RING, "completion ring"),
            (libc::XDP_RX_RING, "RX ring"),
            (libc::XDP_TX_RING, "TX ring"),
        ] {
            sys::setsockopt(&fd, libc::SOL_XDP, opt, &half).map_err(|e| sys::context(e, what))?;
        }
        // SAFETY: xdp_mmap_offsets is plain data; all-zero is valid.
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let mut optlen = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: `off` is writable for `optlen` bytes.
        sys::cvt(unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_MMAP_OFFSETS,
                &mut off as *mut libc::xdp_mmap_offsets as *mut libc::c_void,
                &mut optlen,
            )
        })
        .map_err(|e| sys::context(e, "XDP_MMAP_OFFSETS"))?;
        let raw = fd.as_raw_fd();
        let desc = std::mem::size_of::<libc::xdp_desc>();
        let mut fill = Ring::map(raw, &off.fr, libc::XDP_UMEM_PGOFF_FILL_RING, half, 8)?;
        let comp = Ring::map(raw, &off.cr, libc::XDP_UMEM_PGOFF_COMPLETION_RING, half, 8)?;
        let rx = Ring::map(raw, &off.rx, libc::XDP_PGOFF_RX_RING as u64, half, desc)?;
        let tx = Ring::map(
            raw,
            &off.tx,
            libc::XDP_PGOFF_TX_RING as u32 as u64,
            half,
            desc,
        )?;
        // Every RX frame starts on the fill ring.
        let n = fill.free(half);
        for i in 0..n {
            let idx = fill.cached_prod.wrapping_add(i);
            fill.write_addr(idx, u64::from(i) * fs as u64);
        }
        fill.submit(n);
        let tx_free = (half..cfg.frame_count)
            .map(|i| u64::from(i) * fs as u64)
            .collect();

        let bind = |flags: u16| -> io::Result<()> {
            // SAFETY: sockaddr_xdp is plain data; all-zero is valid.
            let mut sa: libc::sockaddr_xdp = unsafe { std::mem::zeroed() };
            sa.sxdp_family = libc::AF_XDP as u16;
            sa.sxdp_flags = flags | libc::XDP_USE_NEED_WAKEUP;
            sa.sxdp_ifindex = ifindex;
            sa.sxdp_queue_id = cfg.queue_id;
            // SAFETY: `sa` is a valid sockaddr_xdp of the size passed.
            sys::cvt(unsafe {
                libc::bind(
                    raw,
                    &sa as *const libc::sockaddr_xdp as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            })
            .map(|_| ())
            .map_err(|e| sys::context(e, format!("bind to queue {} of {ifname:?}", cfg.queue_id)))
        };
        let zero_copy = match cfg.bind {
            XdpBind::ZeroCopy => bind(libc::XDP_ZEROCOPY).map(|_| true)?,
            XdpBind::Copy => bind(libc::XDP_COPY).map(|_| false)?,
            XdpBind::Auto => match bind(libc::XDP_ZEROCOPY) {
                Ok(()) => true,
                Err(_) => bind(libc::XDP_COPY).map(|_| false)?,
            },
        };
        let prog = XdpProgram::attach(ifindex, cfg.queue_id, raw, cfg.attach)?;
        Ok(AfXdpPort {
            name: ifname.to_string(),
            prog,
            fill,
            comp,
            rx,
            tx,
            fd,
            lender: SharedLender::new(umem.clone()),
            umem,
            rx_frames: half,
            tx_free,
            zero_copy,
            counters: PortCounters::default(),
        })
    }

    /// True when bound in zero-copy mode.
    pub fn is_zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// True when the XDP program runs in the driver (native), not generic.
    pub fn is_native_xdp(&self) -> bool {
        self.prog.native
    }

    /// Moves RX frames whose buffers were dropped back onto the fill ring.
    fn refill(&mut self) {
        for (w, word) in self.umem.returned.iter().enumerate() {
            if word.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let mut bits = word.swap(0, Ordering::Acquire);
            let want = bits.count_ones();
            // The fill ring holds every RX frame, so there is always room.
            let room = self.fill.free(want);
            let mut written = 0;
            while bits != 0 && written < room {
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                let frame = (w * 64) as u64 + u64::from(b);
                let idx = self.fill.cached_prod.wrapping_add(written);
                self.fill
                    .write_addr(idx, frame * self.umem.frame_size as u64);
                written += 1;
            }
            self.fill.submit(written);
            if bits != 0 {
                word.fetch_or(bits, Ordering::Release); // try again next time
            }
        }
    }

    fn kick(&self, flags: libc::c_int) {
        // SAFETY: a zero-length send/recv on our socket, only to wake the
        // kernel; no buffers involved.
        unsafe {
            if flags == 0 {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                );
            } else {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                );
            }
        }
    }

    /// Takes sent frames back from the completion ring.
    fn reap_completions(&mut self) {
        let n = self.comp.available(self.comp.size);
        for i in 0..n {
            let addr = self.comp.read_addr(self.comp.cached_cons.wrapping_add(i));
            self.tx_free.push(addr);
        }
        if n > 0 {
            self.comp.release(n);
        }
    }
}

impl PortBackend for AfXdpPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, out: &mut RxBurst) -> io::Result<usize> {
        self.refill();
        if self.fill.needs_wakeup() {
            self.kick(1);
        }
        let room = u32::try_from(out.room()).unwrap_or(u32::MAX);
        let n = self.rx.available(room);
        let fs = self.umem.frame_size as u64;
        let mut got = 0;
        for i in 0..n {
            let (addr, len) = self.rx.read_desc(self.rx.cached_cons.wrapping_add(i));
            let frame = addr / fs;
            let head = (addr % fs) as usize;
            let len = len as usize;
            if frame >= u64::from(self.rx_frames) || head + len > fs as usize {
                // Not a frame we gave the kernel: never lend it.
                self.counters.rx_drops.malformed += 1;
                continue;
            }
            let lender = self.lender.clone();
            // SAFETY: frame < rx_frames, so [frame*fs, frame*fs + fs) is inside
            // the UMEM; the kernel handed it to us on the RX ring and will not
            // touch it until we put it back on the fill ring, which happens
            // only after this buffer's release; head + len <= fs checked above.
            let pkt = unsafe {
                let start =
                    NonNull::new_unchecked(self.umem.base.as_ptr().add((frame * fs) as usize));
                PacketBuf::from_slot(start, fs as usize, head, len, lender, frame as usize)
            };
            self.counters.rx_packets += 1;
            self.counters.rx_bytes += len as u64;
            let _ = out.push(pkt);
            got += 1;
        }
        if n > 0 {
            self.rx.release(n);
        }
        Ok(got)
    }

    fn tx_burst(&mut self, pkts: &mut TxBurst) -> io::Result<usize> {
        self.reap_completions();
        let fs = self.umem.frame_size;
        let mut taken = 0;
        let mut queued = 0u32;
        while let Some(p) = pkts.pkts().first() {
            if p.len() < 14 {
                self.counters.tx_drops.runt += 1;
            } else if p.len() > fs {
                self.counters.tx_drops.oversize += 1;
            } else {
                if self.tx.free(queued + 1) <= queued {
                    break;
                }
                let Some(addr) = self.tx_free.pop() else {
                    break;
                };
                let data = p.data();
                // SAFETY: `addr` is the start of a TX frame we own (from the
                // free list), frames are fs bytes and data.len() <= fs.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        data.as_ptr(),
                        self.umem.base.as_ptr().add(addr as usize),
                        data.len(),
                    );
                }
                let idx = self.tx.cached_prod.wrapping_add(queued);
                self.tx.write_desc(idx, addr, data.len() as u32);
                queued += 1;
                self.counters.count_tx(data.len());
            }
            pkts.drain_front(1);
            taken += 1;
        }
        if queued > 0 {
            self.tx.submit(queued);
            if self.tx.needs_wakeup() || !self.zero_copy {
                self.kick(0);
            }
        }
        Ok(taken)
    }

    fn link_state(&self) -> LinkState {
        match sys::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) {
            Ok(s) => sys::link_state_of(s.as_raw_fd(), &self.name),
            Err(_) => LinkState::Unknown,
        }
    }

    fn stats(&self) -> PortCounters {
        let mut c = self.counters;
        // SAFETY: xdp_statistics is plain data; all-zero is valid.
        let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: `st` is writable for `len` bytes.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                &mut st as *mut libc::xdp_statistics as *mut libc::c_void,
                &mut len,
            )
        };
        if rc == 0 {
            // rx_dropped counts frames lost for want of a fill-ring frame
            // (copy mode), rx_ring_full frames lost for a full RX ring;
            // rx_fill_ring_empty_descs counts empty polls, not frames.
            c.rx_drops.ring_full = st.rx_dropped + st.rx_ring_full;
            c.rx_drops.malformed += st.rx_invalid_descs;
            c.tx_errors += st.tx_invalid_descs;
        }
        c
    }

    fn rx_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::Burst;
    use crate::testnet::{
        eventually, in_single_queue_veth_ns, rx_test_frames, test_frame, RawSocket, TEST_ETHERTYPE,
    };
    use std::time::{Duration, Instant};

    #[test]
    fn redirect_program_encodes_as_expected() {
        let p = redirect_program(7);
        assert_eq!(p.len(), 6 * 8);
        assert_eq!(&p[0..8], &[0x61, 0x12, 16, 0, 0, 0, 0, 0]);
        assert_eq!(&p[8..16], &[0x18, 0x11, 0, 0, 7, 0, 0, 0]);
        assert_eq!(&p[32..40], &[0x85, 0, 0, 0, 51, 0, 0, 0]);
        assert_eq!(&p[40..48], &[0x95, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn missing_interface_is_a_clear_error() {
        let err = AfXdpPort::open("nosuch-xdp0").err().expect("must fail");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(err.to_string().contains("nosuch-xdp0"), "{err}");
    }

    #[test]
    fn xdp_port_exchanges_frames_with_veth_peer_as_root() {
        in_single_queue_veth_ns("xdp", "xda", "xdb", || {
            let cfg = AfXdpConfig {
                frame_count: 64,
                ..AfXdpConfig::default()
            };
            let mut port = AfXdpPort::open_with("xda", &cfg).unwrap();
            assert!(!port.is_zero_copy(), "veth has no zero-copy AF_XDP");
            // A veth's carrier comes up a moment after both ends are set
            // up (longer on a loaded machine): wait for it, within reason.
            let up_by = Instant::now() + Duration::from_secs(5);
            while port.link_state() != LinkState::Up && Instant::now() < up_by {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert_eq!(port.link_state(), LinkState::Up);
            let peer = RawSocket::bind("xdb");
            // Port -> peer, more frames than TX frames, so completions recycle.
            let mut b = Burst::with_limit(100);
            for seq in 0..100 {
                b.push(PacketBuf::from_slice(&test_frame(
                    9,
                    seq,
                    60 + seq as usize,
                )))
                .unwrap();
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            while !b.is_empty() && Instant::now() < deadline {
                if port.tx_burst(&mut b).unwrap() == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            assert!(b.is_empty(), "{} frames never sent", b.len());
            let got = peer.recv_matching(TEST_ETHERTYPE, 100, Duration::from_secs(5));
            assert_eq!(got.len(), 100);
            for (seq, f) in got.iter().enumerate() {
                assert_eq!(f, &test_frame(9, seq as u32, 60 + seq));
            }
            // Peer -> port: more frames than RX frames, so returned frames refill.
            let mut received = Vec::new();
            for seq in 0..100u32 {
                peer.send(&test_frame(10, seq, 70));
                if seq % 16 == 15 {
                    let frames = rx_test_frames(&mut port, 16, Duration::from_secs(5));
                    for p in &frames {
                        assert!(p.is_lent());
                    }
                    received.extend(frames.iter().map(|p| p.data().to_vec()));
                }
            }
            received.extend(
                rx_test_frames(&mut port, 4, Duration::from_secs(5))
                    .iter()
                    .map(|p| p.data().to_vec()),
            );
            assert_eq!(
                received,
                (0..100).map(|s| test_frame(10, s, 70)).collect::<Vec<_>>()
            );
            let c = port.stats();
            assert_eq!(c.tx_packets, 100);
            assert_eq!(c.rx_packets, 100);
            assert_eq!(c.rx_dropped(), 0, "{c:?}");
            let show = || {
                let out = std::process::Command::new("ip")
                    .args(["link", "show", "xda"])
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&out.stdout).into_owned()
            };
            assert!(port.is_native_xdp(), "veth supports native XDP");
            assert!(show().contains("xdp"), "program attached: {}", show());
            drop(port);
            // The kernel may release the BPF link from a work queue after
            // the last descriptor closes, so give it a bounded moment.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while show().contains("xdp") && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            assert!(
                !show().contains("xdp"),
                "program detached on drop: {}",
                show()
            );
        });
    }

    #[test]
    fn xdp_frames_outlive_the_port_on_another_thread_as_root() {
        in_single_queue_veth_ns("xdp-xthr", "xoa", "xob", || {
            let mut port = AfXdpPort::open("xoa").unwrap();
            let peer = RawSocket::bind("xob");
            for seq in 0..5 {
                peer.send(&test_frame(16, seq, 90));
            }
            let got = rx_test_frames(&mut port, 5, Duration::from_secs(5));
            assert_eq!(got.len(), 5);
            drop(port);
            let frames = std::thread::spawn(move || {
                got.iter().map(|p| p.data().to_vec()).collect::<Vec<_>>()
            })
            .join()
            .unwrap();
            assert_eq!(
                frames,
                (0..5).map(|s| test_frame(16, s, 90)).collect::<Vec<_>>()
            );
        });
    }

    #[test]
    fn held_frames_starve_the_fill_ring_and_drops_are_counted_as_root() {
        in_single_queue_veth_ns("xdp-hold", "xha", "xhb", || {
            let cfg = AfXdpConfig {
                frame_count: 16, // 8 RX frames
                ..AfXdpConfig::default()
            };
            let mut port = AfXdpPort::open_with("xha", &cfg).unwrap();
            let peer = RawSocket::bind("xhb");
            let mut held = Vec::new();
            for seq in 0..8 {
                peer.send(&test_frame(11, seq, 64));
                held.extend(rx_test_frames(&mut port, 1, Duration::from_secs(5)));
            }
            assert_eq!(held.len(), 8);
            for seq in 8..20 {
                peer.send(&test_frame(11, seq, 64));
            }
            // Waited for, not slept on: a loaded machine may defer the
            // delivery (softirq) past a fixed 20 ms.
            eventually(Duration::from_secs(5), || {
                port.stats().rx_drops.ring_full >= 12
            });
            assert!(rx_test_frames(&mut port, 1, Duration::from_millis(50)).is_empty());
            assert_eq!(port.stats().rx_drops.ring_full, 12, "{:?}", port.stats());
            held.clear();
            // Dropped frames go back to the kernel at the next rx_burst.
            let mut b = Burst::new();
            assert_eq!(port.rx_burst(&mut b).unwrap(), 0);
            peer.send(&test_frame(11, 99, 64));
            let got = rx_test_frames(&mut port, 1, Duration::from_secs(5));
            assert_eq!(got.len(), 1, "RX resumes once frames are returned");
            assert_eq!(got[0].data(), &test_frame(11, 99, 64)[..]);
        });
    }
}
