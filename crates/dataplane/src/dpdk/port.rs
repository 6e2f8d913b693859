//! One DPDK ethdev as a fulmar port: opening (probe, configure, queues,
//! mbuf pool, start), the queue handles, and the burst calls.

use std::collections::HashSet;
use std::ffi::CString;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dpdk_sys as sys;
use packet::buffer::{Lent, LentOwner};

use super::eal;
use crate::port::{
    LinkState, PacketBuf, PortBackend, PortCounters, RxBurst, TxBurst, DEFAULT_HEADROOM,
};

/// Most mbufs moved by one burst call (larger bursts are split).
const MAX_BURST: usize = 256;

/// Mbufs a default pool holds beyond its queues' descriptors: what is in
/// flight between threads and ports.
const DEFAULT_IN_FLIGHT: u32 = 8192;

/// Settings of a DPDK port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DpdkConfig {
    /// What to open: a vdev with its arguments (`net_pcap0,rx_pcap=in.pcap`),
    /// a PCI address (`0000:03:00.0`), or the name of a device the EAL
    /// arguments already created.
    pub devargs: String,
    /// Receive queues, spread over threads; more than one turns RSS on.
    pub rx_queues: u16,
    /// Whether `rx_queues` is a requirement (an error when the device has
    /// fewer) rather than a wish (cut to what the device has).
    pub exact_rx_queues: bool,
    /// Transmit queues: one per thread that sends to the port (cut to
    /// what the device has; threads beyond share a queue under a lock).
    pub tx_queues: u16,
    /// Descriptors per receive queue (the driver may round).
    pub rx_desc: u16,
    /// Descriptors per transmit queue.
    pub tx_desc: u16,
    /// Mbufs in the port's pool; 0: the queues' descriptors plus 8192 in
    /// flight. A `net_pcap` vdev with `infinite_rx=1` keeps its whole
    /// file in mbufs of this pool.
    pub mbufs: u32,
    /// Bytes of each mbuf's data room (headroom included).
    pub data_room: u16,
    /// MTU to set (None: the driver's).
    pub mtu: Option<u16>,
    /// Receive every frame, not just those for the port's MAC address.
    pub promiscuous: bool,
}

impl Default for DpdkConfig {
    fn default() -> Self {
        DpdkConfig {
            devargs: String::new(),
            rx_queues: 1,
            exact_rx_queues: true,
            tx_queues: 1,
            rx_desc: 1024,
            tx_desc: 1024,
            mbufs: 0,
            data_room: sys::RTE_MBUF_DEFAULT_BUF_SIZE as u16,
            mtu: None,
            promiscuous: true,
        }
    }
}

impl DpdkConfig {
    /// The device's name: the devargs up to the first comma.
    pub fn device_name(&self) -> &str {
        self.devargs.split(',').next().unwrap_or("").trim()
    }
}

/// Frees the mbuf whose address is `token` (the [`MBUF`] owner's release).
fn free_mbuf(token: usize) {
    // SAFETY: MBUF regions are only made by `lend`, whose token is the
    // address of an mbuf handed to us by rx_burst or allocated here and
    // owned by that Lent alone; it is released exactly once (Lent's drop).
    unsafe { sys::fulmar_pktmbuf_free(token as *mut sys::rte_mbuf) };
}

/// The owner of every region lent from an mbuf.
pub(crate) static MBUF: LentOwner = LentOwner {
    name: "dpdk mbuf",
    release: free_mbuf,
};

/// The data room of a plain mbuf (one segment, not shared, not external),
/// which a [`PacketBuf`] can use in place; `None` for the others, which
/// [`linearize`] copies out.
#[inline(always)]
fn plain_room(mb: &sys::rte_mbuf) -> Option<NonNull<u8>> {
    let plain = mb.nb_segs == 1
        && mb.refcnt == 1
        && mb.ol_flags & (sys::RTE_MBUF_F_INDIRECT | sys::RTE_MBUF_F_EXTERNAL) == 0;
    NonNull::new(mb.buf_addr.cast::<u8>()).filter(|_| plain)
}

/// Lends an mbuf's data room as a [`PacketBuf`] (or, for a chained or
/// shared mbuf, copies it out and frees it).
///
/// # Safety
///
/// `m` is a valid mbuf the caller owns and hands over.
#[inline(always)]
unsafe fn lend(m: *mut sys::rte_mbuf) -> PacketBuf {
    let mb = &*m;
    match plain_room(mb) {
        Some(base) => {
            // The data room is the mbuf's alone until freed (we own `m`);
            // free_mbuf gives it back from any thread.
            let lent = Lent::new(base, usize::from(mb.buf_len), m as usize, &MBUF);
            PacketBuf::from_frame(lent, usize::from(mb.data_off), usize::from(mb.data_len))
        }
        None => linearize(m),
    }
}

/// A chained, shared or external mbuf as one owned copy; frees the mbuf.
///
/// # Safety
///
/// As [`lend`].
#[cold]
unsafe fn linearize(m: *mut sys::rte_mbuf) -> PacketBuf {
    let mut p = PacketBuf::new(DEFAULT_HEADROOM, (*m).pkt_len as usize);
    p.truncate(0);
    let mut seg = m;
    while let Some(s) = seg.as_ref() {
        if let Some(base) = NonNull::new(s.buf_addr.cast::<u8>()) {
            let data = std::slice::from_raw_parts(
                base.as_ptr().add(usize::from(s.data_off)),
                usize::from(s.data_len),
            );
            p.extend_from_slice(data);
        }
        seg = s.next;
    }
    sys::fulmar_pktmbuf_free(m);
    p
}

/// Port ids opened by fulmar, so one device is not opened twice.
static IN_USE: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// Numbers mempool names.
static POOLS: AtomicU64 = AtomicU64::new(0);

/// The device and what its handles share.
struct Device {
    port_id: u16,
    name: String,
    pool: NonNull<sys::rte_mempool>,
    /// The bytes an mbuf of the pool holds after its headroom.
    tx_room: usize,
    /// Set for devices fulmar probed (removed again on close).
    rte_dev: Option<NonNull<sys::rte_device>>,
    started: bool,
    tx_queues: u16,
    /// Receive and transmit queues no handle holds (lowest first); a
    /// handle gives its queues back when dropped.
    free_rxq: Mutex<Vec<u16>>,
    free_txq: Mutex<Vec<u16>>,
}

// SAFETY: the pool and device pointers are only used through DPDK calls
// that are safe from any thread (mempool get/put are multi-producer and
// multi-consumer; configuration calls happen in open and drop only, which
// have the Device to themselves); queues are claimed by one handle each.
unsafe impl Send for Device {}
// SAFETY: as above; the claim counters are atomic.
unsafe impl Sync for Device {}

impl Device {
    /// Takes the lowest free queue of `free`.
    fn claim(free: &Mutex<Vec<u16>>) -> Option<u16> {
        let mut f = free.lock().unwrap_or_else(|e| e.into_inner());
        let (i, _) = f.iter().enumerate().min_by_key(|(_, q)| **q)?;
        Some(f.swap_remove(i))
    }

    /// Gives queue `q` back to `free`.
    fn give_back(free: &Mutex<Vec<u16>>, q: u16) {
        free.lock().unwrap_or_else(|e| e.into_inner()).push(q);
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: every handle (and so every queue user) is gone: the
        // Device is dropped with its last Arc. Stopping before closing,
        // closing before removing, is the order DPDK asks for.
        unsafe {
            if self.started {
                sys::rte_eth_dev_stop(self.port_id);
            }
            sys::rte_eth_dev_close(self.port_id);
            if let Some(d) = self.rte_dev {
                sys::rte_dev_remove(d.as_ptr());
            }
            // Mbufs still lent out (in another port's queue, a ring, a
            // capture) keep the pool alive: it is freed only when all are
            // home, otherwise left (a few MB) for the process's life.
            if sys::rte_mempool_in_use_count(self.pool.as_ptr()) == 0 {
                sys::rte_mempool_free(self.pool.as_ptr());
            }
        }
        if let Some(set) = IN_USE.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            set.remove(&self.port_id);
        }
    }
}

/// A handle on a DPDK port: reads one receive queue (or none) and sends
/// on one transmit queue, claimed on first use. [`DpdkPort::open`] makes
/// the first; [`PortBackend::split_sender`] and
/// [`PortBackend::split_receivers`] the others.
pub struct DpdkPort {
    dev: Arc<Device>,
    name: String,
    rxq: Option<u16>,
    txq: Option<u16>,
    /// Reports the device-wide drop and error counters (one handle does).
    primary: bool,
    counters: PortCounters,
    /// Scratch for burst calls; empty between calls.
    mbufs: Vec<*mut sys::rte_mbuf>,
}

// SAFETY: `mbufs` holds no pointer between calls (every mbuf is handed to
// the device or wrapped in a PacketBuf before a call returns); the rest is
// plain data or the Sync Device.
unsafe impl Send for DpdkPort {}

fn dpdk_err(what: &str, ret: i32) -> io::Error {
    io::Error::other(format!("{what}: {}", eal::error_text(ret)))
}

impl DpdkPort {
    /// Opens the device `cfg.devargs` names (probing it unless the EAL
    /// already created it), configures its queues and pool and starts it.
    /// The EAL must run ([`super::init`]).
    pub fn open(cfg: &DpdkConfig) -> io::Result<DpdkPort> {
        if !eal::is_running() {
            return Err(io::Error::other(
                "the DPDK EAL is not started (configure [dpdk] eal_args)",
            ));
        }
        eal::ensure_lcore();
        let name = cfg.device_name().to_string();
        if name.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "empty DPDK device",
            ));
        }
        if cfg.rx_queues == 0 || cfg.tx_queues == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a DPDK port needs at least one RX and one TX queue",
            ));
        }
        let cname = CString::new(name.as_str())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in device name"))?;
        let cargs = CString::new(cfg.devargs.as_str())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in devargs"))?;
        let mut port_id = 0u16;
        // SAFETY: cname is a valid C string, port_id a valid out pointer.
        let known = unsafe { sys::rte_eth_dev_get_port_by_name(cname.as_ptr(), &mut port_id) } == 0;
        let mut probed = false;
        if !known {
            // SAFETY: cargs is a valid C string; probing runs on this
            // (control) thread, as DPDK's hotplug asks.
            let r = unsafe { sys::rte_dev_probe(cargs.as_ptr()) };
            if r < 0 {
                return Err(dpdk_err(
                    &format!("cannot probe DPDK device {:?}", cfg.devargs),
                    r,
                ));
            }
            probed = true;
            // SAFETY: as above.
            if unsafe { sys::rte_eth_dev_get_port_by_name(cname.as_ptr(), &mut port_id) } != 0 {
                return Err(io::Error::other(format!(
                    "DPDK device {:?} was probed but has no ethdev named {name:?}",
                    cfg.devargs
                )));
            }
        } else if cfg.devargs.contains(',') {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("DPDK device {name:?} already exists (from the EAL arguments?); give only its name"),
            ));
        }
        {
            let mut used = IN_USE.lock().unwrap_or_else(|e| e.into_inner());
            if !used.get_or_insert_with(HashSet::new).insert(port_id) {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("DPDK device {name:?} is already a port"),
                ));
            }
        }
        let mut info = sys::rte_eth_dev_info::default();
        // SAFETY: port_id is a valid port; info a valid out struct.
        let r = unsafe { sys::rte_eth_dev_info_get(port_id, &mut info) };
        let rte_dev = if probed {
            NonNull::new(info.device)
        } else {
            None
        };
        // Undoes the probe and the claim when opening fails before the
        // Device (whose drop does it afterwards) exists.
        let undo = |e: io::Error| {
            if let Some(d) = rte_dev {
                // SAFETY: the device was probed here and nothing uses it.
                unsafe {
                    sys::rte_eth_dev_close(port_id);
                    sys::rte_dev_remove(d.as_ptr());
                }
            }
            Self::release_id(port_id);
            e
        };
        if r != 0 {
            return Err(undo(dpdk_err(
                &format!("DPDK device {name:?}: no device information"),
                r,
            )));
        }
        if cfg.exact_rx_queues && cfg.rx_queues > info.max_rx_queues {
            return Err(undo(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "DPDK device {name:?} has at most {} RX queues; {} were asked for",
                    info.max_rx_queues, cfg.rx_queues
                ),
            )));
        }
        let mut cfg = cfg.clone();
        cfg.rx_queues = cfg.rx_queues.min(info.max_rx_queues).max(1);
        cfg.tx_queues = cfg.tx_queues.min(info.max_tx_queues).max(1);
        let cfg = &cfg;
        let pool_n = if cfg.mbufs > 0 {
            cfg.mbufs
        } else {
            u32::from(cfg.rx_queues) * u32::from(cfg.rx_desc)
                + u32::from(cfg.tx_queues) * u32::from(cfg.tx_desc)
                + DEFAULT_IN_FLIGHT
        };
        let pool_name = format!("fm{}_{}", port_id, POOLS.fetch_add(1, Ordering::Relaxed));
        let cpool = CString::new(pool_name).unwrap_or_default();
        // SAFETY: port_id is valid.
        let socket = unsafe { sys::rte_eth_dev_socket_id(port_id) };
        let socket = if socket < 0 {
            sys::SOCKET_ID_ANY
        } else {
            socket
        };
        // SAFETY: a valid name; the other arguments are plain numbers.
        let pool = unsafe {
            sys::rte_pktmbuf_pool_create(
                cpool.as_ptr(),
                pool_n,
                256.min(pool_n / 16).min(sys::RTE_MEMPOOL_CACHE_MAX_SIZE),
                0,
                cfg.data_room,
                socket,
            )
        };
        let Some(pool) = NonNull::new(pool) else {
            let e = eal::last_error();
            return Err(undo(io::Error::other(format!(
                "cannot make a pool of {pool_n} mbufs for DPDK device {name:?}: {e}"
            ))));
        };
        // From here on the Device's drop undoes what was done.
        let mut dev = Device {
            port_id,
            name: name.clone(),
            pool,
            tx_room: usize::from(cfg.data_room).saturating_sub(sys::RTE_PKTMBUF_HEADROOM as usize),
            rte_dev,
            started: false,
            tx_queues: cfg.tx_queues,
            // Queue 0 is read by the handle `open` returns.
            free_rxq: Mutex::new((1..cfg.rx_queues).collect()),
            free_txq: Mutex::new((0..cfg.tx_queues).collect()),
        };
        let mut conf = sys::rte_eth_conf::default();
        if cfg.rx_queues > 1 {
            // SAFETY: returns a constant.
            let hf = unsafe { sys::fulmar_rss_hf_ip_tcp_udp() } & info.flow_type_rss_offloads;
            if hf != 0 {
                conf.rxmode.mq_mode = sys::rte_eth_rx_mq_mode_RTE_ETH_MQ_RX_RSS;
                conf.rx_adv_conf.rss_conf.rss_hf = hf;
            }
        }
        let (mut rxd, mut txd) = (cfg.rx_desc, cfg.tx_desc);
        // SAFETY: port_id is valid and stopped; conf, rxd and txd are
        // valid for the calls' reads and writes.
        unsafe {
            let r = sys::rte_eth_dev_configure(port_id, cfg.rx_queues, cfg.tx_queues, &conf);
            if r != 0 {
                return Err(dpdk_err(
                    &format!("cannot configure DPDK device {name:?}"),
                    r,
                ));
            }
            let r = sys::rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &mut rxd, &mut txd);
            if r != 0 {
                return Err(dpdk_err(&format!("DPDK device {name:?}: descriptors"), r));
            }
            if let Some(mtu) = cfg.mtu {
                let r = sys::rte_eth_dev_set_mtu(port_id, mtu);
                if r != 0 {
                    return Err(dpdk_err(&format!("DPDK device {name:?}: MTU {mtu}"), r));
                }
            }
            let socket = socket as u32;
            for q in 0..cfg.rx_queues {
                let r = sys::rte_eth_rx_queue_setup(
                    port_id,
                    q,
                    rxd,
                    socket,
                    std::ptr::null(),
                    pool.as_ptr(),
                );
                if r != 0 {
                    return Err(dpdk_err(&format!("DPDK device {name:?}: RX queue {q}"), r));
                }
            }
            for q in 0..cfg.tx_queues {
                let r = sys::rte_eth_tx_queue_setup(port_id, q, txd, socket, std::ptr::null());
                if r != 0 {
                    return Err(dpdk_err(&format!("DPDK device {name:?}: TX queue {q}"), r));
                }
            }
            let r = sys::rte_eth_dev_start(port_id);
            if r != 0 {
                return Err(dpdk_err(&format!("cannot start DPDK device {name:?}"), r));
            }
            dev.started = true;
            if cfg.promiscuous {
                // Drivers without the notion answer ENOTSUP: harmless.
                sys::rte_eth_promiscuous_enable(port_id);
            }
            sys::rte_eth_stats_reset(port_id);
        }
        Ok(DpdkPort::handle(Arc::new(dev), Some(0), true))
    }

    fn release_id(port_id: u16) {
        if let Some(set) = IN_USE.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            set.remove(&port_id);
        }
    }

    fn handle(dev: Arc<Device>, rxq: Option<u16>, primary: bool) -> DpdkPort {
        DpdkPort {
            name: dev.name.clone(),
            dev,
            rxq,
            txq: None,
            primary,
            counters: PortCounters::default(),
            mbufs: Vec::with_capacity(MAX_BURST),
        }
    }

    /// The ethdev port id.
    pub fn port_id(&self) -> u16 {
        self.dev.port_id
    }

    /// The receive queue this handle reads, if any.
    pub fn rx_queue(&self) -> Option<u16> {
        self.rxq
    }

    /// The transmit queue this handle sends on, once claimed.
    pub fn tx_queue(&self) -> Option<u16> {
        self.txq
    }

    /// Mbufs of the port's pool not in its pool now (lent out, in queues).
    pub fn mbufs_in_use(&self) -> u32 {
        // SAFETY: the pool lives as long as the Device.
        unsafe { sys::rte_mempool_in_use_count(self.dev.pool.as_ptr()) }
    }

    fn tx_queue_or_claim(&mut self) -> io::Result<u16> {
        if let Some(q) = self.txq {
            return Ok(q);
        }
        let q = Device::claim(&self.dev.free_txq).ok_or_else(|| {
            io::Error::other(format!(
                "DPDK device {:?}: all {} TX queues are taken",
                self.dev.name, self.dev.tx_queues
            ))
        })?;
        self.txq = Some(q);
        Ok(q)
    }

    /// An mbuf for `p`: its own when the region is an mbuf, else a copy
    /// into a fresh one. `None`: dropped and counted.
    fn mbuf_for(&mut self, p: PacketBuf) -> Option<*mut sys::rte_mbuf> {
        if p.len() < 14 {
            self.counters.tx_drops.runt += 1;
            return None;
        }
        let (mem, head, len) = match p.into_frame() {
            Ok((mem, head, len)) if mem.is_from(&MBUF) => {
                let m = mem.into_token() as *mut sys::rte_mbuf;
                // SAFETY: an MBUF region's token is a single-segment direct
                // mbuf we own (see `lend`), now taken back from the Lent;
                // head + len <= buf_len <= u16::MAX (PacketBuf's bounds).
                unsafe {
                    (*m).data_off = head as u16;
                    (*m).data_len = len as u16;
                    (*m).pkt_len = len as u32;
                }
                return Some(m);
            }
            Ok((mem, head, len)) => (Some(mem), head, len),
            Err(p) => return self.copy_to_mbuf(p.data()),
        };
        let m = mem
            .as_ref()
            .and_then(|mem| mem.bytes().get(head..head + len));
        let out = m.and_then(|bytes| self.copy_to_mbuf(bytes));
        drop(mem);
        out
    }

    fn copy_to_mbuf(&mut self, bytes: &[u8]) -> Option<*mut sys::rte_mbuf> {
        if bytes.len() > self.dev.tx_room {
            self.counters.tx_drops.oversize += 1;
            return None;
        }
        // SAFETY: the pool lives as long as the Device.
        let m = unsafe { sys::fulmar_pktmbuf_alloc(self.dev.pool.as_ptr()) };
        if m.is_null() {
            // The pool is empty: mbufs are all in queues or in flight.
            self.counters.tx_errors += 1;
            return None;
        }
        // SAFETY: a fresh mbuf from our pool: its data room has tx_room
        // bytes after data_off, and bytes.len() <= tx_room.
        unsafe {
            let mb = &mut *m;
            let dst = mb.buf_addr.cast::<u8>().add(usize::from(mb.data_off));
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len());
            mb.data_len = bytes.len() as u16;
            mb.pkt_len = bytes.len() as u32;
        }
        Some(m)
    }
}

impl std::fmt::Debug for DpdkPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DpdkPort")
            .field("name", &self.name)
            .field("port_id", &self.dev.port_id)
            .field("rxq", &self.rxq)
            .field("txq", &self.txq)
            .finish()
    }
}

impl Drop for DpdkPort {
    fn drop(&mut self) {
        // No mbuf is held between calls; the queues go back for another
        // handle (a thread that shares this port instead, say).
        debug_assert!(self.mbufs.is_empty());
        if let Some(q) = self.rxq {
            Device::give_back(&self.dev.free_rxq, q);
        }
        if let Some(q) = self.txq {
            Device::give_back(&self.dev.free_txq, q);
        }
    }
}

impl PortBackend for DpdkPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, out: &mut RxBurst) -> io::Result<usize> {
        let Some(q) = self.rxq else {
            return Ok(0);
        };
        let want = out.room().min(MAX_BURST);
        if want == 0 {
            return Ok(0);
        }
        eal::ensure_lcore();
        self.mbufs.clear();
        // SAFETY: the vector has capacity for MAX_BURST >= want pointers;
        // queue q of this started port is read by this handle only (each
        // receive queue is handed to one handle).
        let n = unsafe {
            let n = sys::fulmar_rx_burst(self.dev.port_id, q, self.mbufs.as_mut_ptr(), want as u16);
            self.mbufs.set_len(usize::from(n));
            usize::from(n)
        };
        let mut bytes = 0u64;
        for &m in &self.mbufs {
            // SAFETY: rx_burst handed us these n valid mbufs, which we
            // hand over to the burst.
            unsafe {
                let mb = &*m;
                bytes += u64::from(mb.pkt_len);
                match plain_room(mb) {
                    // As `lend`, but the buffer made where it lands in the
                    // burst (`Burst::push_lent_frame` says why); n <= want
                    // <= room: it fits.
                    Some(base) => {
                        let fits = out.push_lent_frame(
                            base,
                            usize::from(mb.buf_len),
                            m as usize,
                            &MBUF,
                            usize::from(mb.data_off),
                            usize::from(mb.data_len),
                        );
                        if !fits {
                            // Not reached (see above); the mbuf goes back.
                            drop(lend(m));
                        }
                    }
                    None => {
                        let _ = out.push(linearize(m));
                    }
                }
            }
        }
        self.mbufs.clear();
        self.counters.rx_packets += n as u64;
        self.counters.rx_bytes += bytes;
        Ok(n)
    }

    fn tx_burst(&mut self, pkts: &mut TxBurst) -> io::Result<usize> {
        if pkts.is_empty() {
            return Ok(0);
        }
        let q = self.tx_queue_or_claim()?;
        eal::ensure_lcore();
        let k = pkts.len().min(MAX_BURST);
        let mut mbufs = std::mem::take(&mut self.mbufs);
        mbufs.clear();
        let mut bytes = 0u64;
        for p in pkts.drain_front(k) {
            if let Some(m) = self.mbuf_for(p) {
                // SAFETY: a valid mbuf we own.
                bytes += u64::from(unsafe { (*m).pkt_len });
                mbufs.push(m);
            }
        }
        let n = mbufs.len();
        // SAFETY: `mbufs` holds n valid mbufs we own; queue q is this
        // handle's alone. The device takes mbufs 0..sent.
        let sent = usize::from(unsafe {
            sys::fulmar_tx_burst(self.dev.port_id, q, mbufs.as_mut_ptr(), n as u16)
        });
        if sent < n {
            // The device queue is full: the rest go back to the caller,
            // in order, still in their mbufs.
            for &m in &mbufs[sent..] {
                // SAFETY: not taken by the device, so still ours.
                bytes -= u64::from(unsafe { (*m).pkt_len });
            }
            // SAFETY: as above; each is handed over once.
            pkts.put_back_front(mbufs[sent..].iter().map(|&m| unsafe { lend(m) }));
        }
        mbufs.clear();
        self.mbufs = mbufs;
        self.counters.tx_packets += sent as u64;
        self.counters.tx_bytes += bytes;
        Ok(k - (n - sent))
    }

    fn link_state(&self) -> LinkState {
        let mut link = sys::rte_eth_link::default();
        // SAFETY: valid port, valid out struct.
        let r = unsafe { sys::rte_eth_link_get_nowait(self.dev.port_id, &mut link) };
        if r != 0 {
            return LinkState::Unknown;
        }
        if u32::from(link.link_status()) == sys::RTE_ETH_LINK_UP {
            LinkState::Up
        } else {
            LinkState::Down
        }
    }

    fn stats(&self) -> PortCounters {
        let mut c = self.counters;
        if self.primary {
            let mut s = sys::rte_eth_stats::default();
            // SAFETY: valid port, valid out struct.
            if unsafe { sys::rte_eth_stats_get(self.dev.port_id, &mut s) } == 0 {
                c.rx_drops.ring_full += s.imissed + s.rx_nombuf;
                c.rx_errors += s.ierrors;
                c.tx_errors += s.oerrors;
            }
        }
        c
    }

    fn split_sender(&self) -> io::Result<Option<Box<dyn PortBackend>>> {
        let mut h = DpdkPort::handle(self.dev.clone(), None, false);
        match Device::claim(&self.dev.free_txq) {
            Some(q) => {
                h.txq = Some(q);
                Ok(Some(Box::new(h)))
            }
            // No queue left: the threads share this handle instead.
            None => Ok(None),
        }
    }

    fn split_receivers(&mut self) -> io::Result<Vec<Box<dyn PortBackend>>> {
        let mut out: Vec<Box<dyn PortBackend>> = Vec::new();
        while let Some(q) = Device::claim(&self.dev.free_rxq) {
            out.push(Box::new(DpdkPort::handle(self.dev.clone(), Some(q), false)));
        }
        Ok(out)
    }
}
