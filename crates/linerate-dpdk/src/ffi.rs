//! The shim's functions, the EAL, the ports and their queues.

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int, c_uint};
use std::io;
use std::ops::Range;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

#[repr(C)]
struct RteMempool {
    _opaque: [u8; 0],
}

#[repr(C)]
struct RteMbuf {
    _opaque: [u8; 0],
}

unsafe extern "C" {
    fn lr_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;
    fn lr_strerror(e: c_int) -> *const c_char;
    fn lr_port_by_name(name: *const c_char, port: *mut u16) -> c_int;
    fn lr_port_valid(port: u16) -> c_int;
    fn lr_port_name(port: u16, name: *mut c_char, len: usize) -> c_int;
    fn lr_port_mac(port: u16, mac: *mut u8) -> c_int;
    fn lr_port_mtu(port: u16, mtu: *mut u16) -> c_int;
    fn lr_port_link(port: u16) -> c_int;
    fn lr_port_info(
        port: u16,
        max_queues: *mut u16,
        driver: *mut c_char,
        len: usize,
        socket: *mut c_int,
    ) -> c_int;
    fn lr_pool_create(
        name: *const c_char,
        n: c_uint,
        data_room: u16,
        socket: c_int,
        packed: c_int,
        err: *mut c_int,
    ) -> *mut RteMempool;
    fn lr_port_start(port: u16, nq: u16, nb_desc: u16, rx_pools: *const *mut RteMempool) -> c_int;
    fn lr_alloc(
        mp: *mut RteMempool,
        m: *mut *mut RteMbuf,
        n: c_uint,
        data: *mut *mut u8,
        slot: *mut u32,
        room: *mut u16,
    ) -> c_int;
    fn lr_set_lens(m: *const *mut RteMbuf, lens: *const u16, n: c_uint);
    fn lr_tx(port: u16, queue: u16, m: *mut *mut RteMbuf, n: u16) -> u16;
    fn lr_rx(
        port: u16,
        queue: u16,
        m: *mut *mut RteMbuf,
        n: u16,
        data: *mut *const u8,
        lens: *mut u16,
        mark: c_int,
    ) -> u16;
    fn lr_free(m: *const *mut RteMbuf, n: c_uint);
    fn lr_port_stats(port: u16, out: *mut u64) -> c_int;
}

/// Frames per burst (TX and RX), as testpmd's default.
pub const BURST: usize = 64;
/// Queues a port is set up with at most (one per worker).
pub const QUEUES_MAX: u16 = 4;
/// Bytes of frame an mbuf holds (no scattered frames: jumbo frames are not
/// carried yet).
pub const DATA_ROOM: usize = 2048;
/// Descriptors per queue asked for (the driver adjusts them).
const DESCRIPTORS: u16 = 1024;
/// mbufs per RX queue's pool and per TX queue's pool.
const RX_MBUFS: u32 = 4095;
const TX_MBUFS: u32 = 4095;
/// mbufs per RX queue's pool on net_af_xdp, whose UMEM that pool is: a
/// TX queue builds its frames in the same pool (the PMD sends an mbuf of
/// its UMEM without a copy; one of another pool it copies into a new
/// UMEM mbuf), mbufs given back only when half the completion ring has
/// come back, while the RX fill ring holds its share: with 4095 the port
/// found it empty and took a few frames per burst.
const RX_MBUFS_AF_XDP: u32 = 16383;
/// The bit of an mbuf's slot word the shim sets when a frame was received
/// into it (`LR_RECEIVED` in shim.c).
const RECEIVED: u32 = 0x8000_0000;

/// DPDK's text for error `e` (an errno or one of DPDK's own).
fn strerror(e: c_int) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or thread-local
    // NUL-terminated string, valid until the next call on this thread.
    unsafe { CStr::from_ptr(lr_strerror(e.abs())) }
        .to_string_lossy()
        .into_owned()
}

fn err(what: &str, e: c_int) -> io::Error {
    let kind = match e.abs() {
        // ENOENT, ENODEV
        2 | 19 => io::ErrorKind::NotFound,
        // EINVAL
        22 => io::ErrorKind::InvalidInput,
        // ENOTSUP
        95 => io::ErrorKind::Unsupported,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, format!("{what}: {}", strerror(e)))
}

fn check(what: &str, r: c_int) -> io::Result<()> {
    if r < 0 { Err(err(what, r)) } else { Ok(()) }
}

static EAL_ARGS: OnceLock<Vec<String>> = OnceLock::new();
static EAL: OnceLock<Result<(), String>> = OnceLock::new();

/// The EAL's arguments for this process (split as words: `--no-huge -m 256
/// --vdev net_null0`). The EAL is set up once: arguments given after that,
/// or different ones given twice, are refused.
pub fn set_eal_args(args: &[String]) -> io::Result<()> {
    let mine = EAL_ARGS.get_or_init(|| args.to_vec());
    if mine != args {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "the DPDK EAL is set up once per process, with {mine:?}: not again with {args:?}"
            ),
        ));
    }
    Ok(())
}

/// The words the EAL is set up with: the program's name, a quieter log
/// and no telemetry socket first, the given ones, then a file prefix of this process's own unless
/// one was given (two linerate processes never share one).
pub fn eal_argv(args: &[String]) -> Vec<String> {
    let mut v = vec![
        "linerate".to_string(),
        "--log-level=5".to_string(),
        "--no-telemetry".to_string(),
    ];
    v.extend(args.iter().cloned());
    if !args.iter().any(|a| a.starts_with("--file-prefix")) {
        v.push(format!("--file-prefix=linerate-{}", std::process::id()));
    }
    v
}

/// Sets up the EAL (once per process) if it is not yet.
pub fn eal() -> io::Result<()> {
    EAL.get_or_init(|| {
        let args = eal_argv(EAL_ARGS.get().map_or(&[][..], Vec::as_slice));
        // On a thread of its own: rte_eal_init pins the calling thread to
        // the main lcore's CPU, which threads spawned from it would inherit.
        std::thread::spawn(move || {
            let owned: Vec<CString> = args
                .iter()
                .map(|a| CString::new(a.as_str()).map_err(|_| format!("EAL argument {a:?}")))
                .collect::<Result<_, _>>()?;
            let mut argv: Vec<*mut c_char> = owned.iter().map(|c| c.as_ptr().cast_mut()).collect();
            argv.push(std::ptr::null_mut());
            // SAFETY: argv holds argc NUL-terminated strings (and a final
            // NULL) that outlive the call; the EAL may permute the pointers
            // but only reads the strings. rte_eal_init runs once (OnceLock).
            let r = unsafe { lr_eal_init(owned.len() as c_int, argv.as_mut_ptr()) };
            if r < 0 {
                Err(format!(
                    "DPDK EAL set-up with {:?} failed: {}",
                    &args[1..],
                    strerror(r)
                ))
            } else {
                Ok(())
            }
        })
        .join()
        .unwrap_or_else(|_| Err("DPDK EAL set-up panicked".into()))
    })
    .clone()
    .map_err(io::Error::other)
}

/// The port id of `name`: an ethdev's name (a vdev, `net_af_packet0`; a
/// PCI address) or a port id.
pub fn port_id(name: &str) -> io::Result<u16> {
    eal()?;
    let c = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a port name without NUL"))?;
    let mut id = 0u16;
    // SAFETY: c is a valid NUL-terminated string; id is a valid out pointer.
    if unsafe { lr_port_by_name(c.as_ptr(), &mut id) } == 0 {
        return Ok(id);
    }
    if let Ok(id) = name.parse::<u16>() {
        // SAFETY: lr_port_valid only reads the port table.
        if unsafe { lr_port_valid(id) } == 1 {
            return Ok(id);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "no DPDK port named {name} (give the EAL its device: --eal \"--vdev {name},…\", or a port id)"
        ),
    ))
}

/// The ethdev name of port `id`.
pub fn port_name(id: u16) -> io::Result<String> {
    let mut buf = [0 as c_char; 64];
    // SAFETY: buf has room for the name and its NUL (snprintf bounds it).
    check("port name", unsafe {
        lr_port_name(id, buf.as_mut_ptr(), buf.len())
    })?;
    // SAFETY: lr_port_name wrote a NUL-terminated string into buf.
    Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned())
}

pub fn mac(name: &str) -> io::Result<[u8; 6]> {
    let id = port_id(name)?;
    let mut m = [0u8; 6];
    // SAFETY: m has the 6 bytes the shim copies.
    check("MAC address", unsafe { lr_port_mac(id, m.as_mut_ptr()) })?;
    Ok(m)
}

pub fn mtu(name: &str) -> io::Result<usize> {
    let id = port_id(name)?;
    let mut m = 0u16;
    // SAFETY: m is a valid out pointer.
    check("MTU", unsafe { lr_port_mtu(id, &mut m) })?;
    Ok(usize::from(m))
}

/// Whether the port's link is up (as its driver says without waiting).
pub fn link_up(name: &str) -> io::Result<bool> {
    let id = port_id(name)?;
    // SAFETY: reads the port's link status.
    let r = unsafe { lr_port_link(id) };
    check("link status", r)?;
    Ok(r == 1)
}

/// A port's counters (since it started).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames the port had no room for in its RX ring.
    pub imissed: u64,
    /// Frames it had no mbuf for.
    pub rx_nombuf: u64,
    pub ierrors: u64,
    pub ipackets: u64,
    pub opackets: u64,
    pub oerrors: u64,
}

pub fn stats(id: u16) -> io::Result<PortStats> {
    let mut o = [0u64; 6];
    // SAFETY: o has the six counters the shim writes.
    check("port statistics", unsafe {
        lr_port_stats(id, o.as_mut_ptr())
    })?;
    Ok(PortStats {
        imissed: o[0],
        rx_nombuf: o[1],
        ierrors: o[2],
        ipackets: o[3],
        opackets: o[4],
        oerrors: o[5],
    })
}

/// A pool's pointer, kept in the port table (pools live as long as the
/// process).
#[derive(Debug, Clone, Copy)]
struct Pool(*mut RteMempool);
// SAFETY: a mempool is made for use from any thread (ring_mp_mc, no cache).
unsafe impl Send for Pool {}

#[derive(Debug)]
struct PortState {
    queues: u16,
    driver: String,
    socket: c_int,
    rx_taken: Vec<bool>,
    tx_taken: Vec<bool>,
    /// Each TX queue's pool, made when the queue is first opened (its
    /// mbufs' slots are the queue's own: a frame builder remembers what
    /// it built in each); on net_af_xdp the RX queue's pool, its UMEM.
    tx_pools: Vec<Option<(Pool, u32)>>,
    /// Whether TX queue q builds in RX queue q's pool (net_af_xdp): the
    /// RX queue then marks the mbufs it receives into.
    shared_pools: bool,
}

fn ports() -> MutexGuard<'static, HashMap<u16, PortState>> {
    static PORTS: OnceLock<Mutex<HashMap<u16, PortState>>> = OnceLock::new();
    PORTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// An mbuf pool of `n`; `packed`: its objects end to end where DPDK has
/// no hugepages (what net_af_xdp registers as its UMEM must be; see
/// `pool_packed` in shim.c).
fn pool(name: &str, n: u32, socket: c_int, packed: bool) -> io::Result<Pool> {
    let c = CString::new(name).expect("pool names have no NUL");
    let mut e = 0;
    // SAFETY: c is NUL-terminated; e is a valid out pointer.
    let p = unsafe {
        lr_pool_create(
            c.as_ptr(),
            n,
            DATA_ROOM as u16,
            socket,
            c_int::from(packed),
            &mut e,
        )
    };
    if p.is_null() {
        return Err(err(&format!("mbuf pool {name} ({n} mbufs)"), e));
    }
    Ok(Pool(p))
}

/// The port table with `id` configured and started (done the first time).
fn started(id: u16) -> io::Result<MutexGuard<'static, HashMap<u16, PortState>>> {
    let mut table = ports();
    if table.contains_key(&id) {
        return Ok(table);
    }
    let (mut maxq, mut socket) = (0u16, 0 as c_int);
    let mut drv = [0 as c_char; 64];
    // SAFETY: every out pointer is valid; drv has room (snprintf bounds it).
    check("device information", unsafe {
        lr_port_info(id, &mut maxq, drv.as_mut_ptr(), drv.len(), &mut socket)
    })?;
    // SAFETY: lr_port_info wrote a NUL-terminated string into drv.
    let driver = unsafe { CStr::from_ptr(drv.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let queues = maxq
        .min(QUEUES_MAX)
        .min(u16::try_from(cpus).unwrap_or(u16::MAX))
        .max(1);
    let rx_mbufs = if driver == "net_af_xdp" {
        RX_MBUFS_AF_XDP
    } else {
        RX_MBUFS
    };
    let shared_pools = driver == "net_af_xdp";
    let rx_pools = (0..queues)
        .map(|q| pool(&format!("lr_rx{id}_{q}"), rx_mbufs, socket, shared_pools))
        .collect::<io::Result<Vec<_>>>()?;
    let ptrs: Vec<*mut RteMempool> = rx_pools.iter().map(|p| p.0).collect();
    // SAFETY: ptrs holds `queues` valid pools; the port is not started yet
    // (the table, held locked, has no entry for it).
    check(&format!("starting DPDK port {id} ({driver})"), unsafe {
        lr_port_start(id, queues, DESCRIPTORS, ptrs.as_ptr())
    })?;
    table.insert(
        id,
        PortState {
            queues,
            driver,
            socket,
            rx_taken: vec![false; usize::from(queues)],
            tx_taken: vec![false; usize::from(queues)],
            tx_pools: if shared_pools {
                rx_pools.iter().map(|&p| Some((p, rx_mbufs))).collect()
            } else {
                vec![None; usize::from(queues)]
            },
            shared_pools,
        },
    );
    Ok(table)
}

/// Takes queue `queue` of port `id` (RX or TX) for one user at a time.
fn take(
    table: &mut HashMap<u16, PortState>,
    id: u16,
    queue: u16,
    tx: bool,
    name: &str,
) -> io::Result<()> {
    let st = table.get_mut(&id).expect("started");
    let (n, taken) = (
        st.queues,
        if tx {
            &mut st.tx_taken
        } else {
            &mut st.rx_taken
        },
    );
    let what = if tx { "TX" } else { "RX" };
    let slot = taken.get_mut(usize::from(queue)).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("DPDK port {name} has {n} {what} queue(s): no queue {queue} (fewer workers)"),
        )
    })?;
    if *slot {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("{what} queue {queue} of DPDK port {name} is in use"),
        ));
    }
    *slot = true;
    Ok(())
}

fn release(id: u16, queue: u16, tx: bool) {
    if let Some(st) = ports().get_mut(&id) {
        let taken = if tx {
            &mut st.tx_taken
        } else {
            &mut st.rx_taken
        };
        if let Some(s) = taken.get_mut(usize::from(queue)) {
            *s = false;
        }
    }
}

/// The driver of a started port and its queue count.
pub fn port_info(id: u16) -> Option<(String, u16)> {
    ports().get(&id).map(|s| (s.driver.clone(), s.queues))
}

/// One TX queue of a port, frames built in its own mbufs.
#[derive(Debug)]
pub struct TxQueue {
    port: u16,
    queue: u16,
    pool: Pool,
    /// The pool's mbufs (the slots frames are built in).
    pool_mbufs: u32,
    mbufs: Vec<*mut RteMbuf>,
    data: Vec<*mut u8>,
    slots: Vec<u32>,
    lens: Vec<u16>,
    /// Built but not yet taken by the port: sent first next time.
    pending: Range<usize>,
}

// SAFETY: the queue is taken by this handle alone (`take`); its mbufs are
// this handle's until sent or freed; DPDK queues may be used from any one
// thread at a time.
unsafe impl Send for TxQueue {}

impl TxQueue {
    /// Takes TX queue `queue` of port `name` (starting the port the first
    /// time).
    pub fn open(name: &str, queue: u16) -> io::Result<TxQueue> {
        let id = port_id(name)?;
        let mut table = started(id)?;
        take(&mut table, id, queue, true, name)?;
        let st = table.get_mut(&id).expect("started");
        let (pool, mbufs) = match st.tx_pools[usize::from(queue)] {
            Some(p) => p,
            None => match pool(&format!("lr_tx{id}_{queue}"), TX_MBUFS, st.socket, false) {
                Ok(p) => *st.tx_pools[usize::from(queue)].insert((p, TX_MBUFS)),
                Err(e) => {
                    st.tx_taken[usize::from(queue)] = false;
                    return Err(e);
                }
            },
        };
        Ok(TxQueue {
            port: id,
            queue,
            pool,
            pool_mbufs: mbufs,
            mbufs: vec![std::ptr::null_mut(); BURST],
            data: vec![std::ptr::null_mut(); BURST],
            slots: vec![0; BURST],
            lens: vec![0; BURST],
            pending: 0..0,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn queue(&self) -> u16 {
        self.queue
    }

    /// Distinct mbufs (slots) frames are built in.
    pub fn slots(&self) -> usize {
        self.pool_mbufs as usize
    }

    /// Bytes of frame an mbuf holds.
    pub fn slot_len(&self) -> usize {
        DATA_ROOM
    }

    /// Takes `n` mbufs (all or none) into `self.mbufs[..n]`.
    fn alloc(&mut self, n: usize) -> Option<usize> {
        let mut room = 0u16;
        // SAFETY: the arrays have BURST >= n entries; the pool is valid for
        // the process's life.
        let r = unsafe {
            lr_alloc(
                self.pool.0,
                self.mbufs.as_mut_ptr(),
                n as c_uint,
                self.data.as_mut_ptr(),
                self.slots.as_mut_ptr(),
                &mut room,
            )
        };
        (r == 0).then_some(usize::from(room))
    }

    /// Sends `self.mbufs[pending]` (lengths set): what the port took.
    fn push(&mut self) -> (usize, u64) {
        let r = self.pending.clone();
        // SAFETY: mbufs[r] are this handle's built mbufs; the queue is ours.
        let sent = usize::from(unsafe {
            lr_tx(
                self.port,
                self.queue,
                self.mbufs.as_mut_ptr().add(r.start),
                r.len() as u16,
            )
        });
        let bytes = self.lens[r.start..r.start + sent]
            .iter()
            .map(|&l| u64::from(l))
            .sum();
        self.pending = r.start + sent..r.end;
        (sent, bytes)
    }

    /// Builds up to `n` frames (at most [`BURST`]) in mbufs and sends them:
    /// `build(buf, slot, received)` writes a frame into the mbuf's data
    /// room and returns its length; `slot` names the mbuf, which still
    /// holds what was last built in it by this queue unless `received`
    /// (a frame was received into it since: net_af_xdp, where the RX
    /// queue shares the pool). Returns the frames the port took
    /// and their bytes (0: full, try again); frames built but not taken are
    /// sent before anything more is built.
    #[inline]
    pub fn send_with(
        &mut self,
        n: usize,
        mut build: impl FnMut(&mut [u8], usize, bool) -> usize,
    ) -> io::Result<(usize, u64)> {
        if self.pending.is_empty() {
            let n = n.min(BURST);
            if n == 0 {
                return Ok((0, 0));
            }
            // No mbuf free: the port still holds them; try again.
            let Some(room) = self.alloc(n) else {
                return Ok((0, 0));
            };
            for i in 0..n {
                // SAFETY: data[i] points to mbuf i's data room of `room`
                // bytes, this handle's alone until it is sent.
                let buf = unsafe { std::slice::from_raw_parts_mut(self.data[i], room) };
                let s = self.slots[i];
                self.lens[i] =
                    build(buf, (s & !RECEIVED) as usize, s & RECEIVED != 0).min(room) as u16;
            }
            // SAFETY: mbufs[..n] and lens[..n] are set.
            unsafe { lr_set_lens(self.mbufs.as_ptr(), self.lens.as_ptr(), n as c_uint) };
            self.pending = 0..n;
        }
        Ok(self.push())
    }

    /// Sends frames built elsewhere (copied into mbufs); returns how many
    /// the port took (0: full). What it did not take is not kept.
    pub fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        if !self.pending.is_empty() {
            let (sent, _) = self.push();
            if !self.pending.is_empty() || sent == 0 {
                return Ok(0);
            }
        }
        let n = frames.len().min(BURST);
        if n == 0 {
            return Ok(0);
        }
        let Some(room) = self.alloc(n) else {
            return Ok(0);
        };
        for (i, f) in frames[..n].iter().enumerate() {
            let len = f.len().min(room);
            // SAFETY: data[i] points to `room` writable bytes of mbuf i.
            unsafe { std::ptr::copy_nonoverlapping(f.as_ptr(), self.data[i], len) };
            self.lens[i] = len as u16;
        }
        // SAFETY: mbufs[..n] and lens[..n] are set.
        unsafe { lr_set_lens(self.mbufs.as_ptr(), self.lens.as_ptr(), n as c_uint) };
        self.pending = 0..n;
        let (sent, _) = self.push();
        self.drop_pending();
        Ok(sent)
    }

    fn drop_pending(&mut self) {
        let r = std::mem::replace(&mut self.pending, 0..0);
        if !r.is_empty() {
            // SAFETY: mbufs[r] are this handle's, not handed to the port.
            unsafe { lr_free(self.mbufs.as_ptr().add(r.start), r.len() as c_uint) };
        }
    }
}

impl Drop for TxQueue {
    fn drop(&mut self) {
        self.drop_pending();
        release(self.port, self.queue, true);
    }
}

/// One RX queue of a port.
#[derive(Debug)]
pub struct RxQueue {
    port: u16,
    queue: u16,
    mbufs: Vec<*mut RteMbuf>,
    data: Vec<*const u8>,
    lens: Vec<u16>,
    /// Marks the mbufs frames are received into (its pool is a TX queue's
    /// too).
    mark: bool,
    /// The port's counters when this queue was opened.
    base: PortStats,
}

// SAFETY: as TxQueue: the queue is this handle's alone.
unsafe impl Send for RxQueue {}

impl RxQueue {
    /// Takes RX queue `queue` of port `name` (starting the port the first
    /// time); frames left in it from before are thrown away.
    pub fn open(name: &str, queue: u16) -> io::Result<RxQueue> {
        let id = port_id(name)?;
        let mut table = started(id)?;
        take(&mut table, id, queue, false, name)?;
        let mark = table.get(&id).is_some_and(|st| st.shared_pools);
        drop(table);
        let mut q = RxQueue {
            port: id,
            queue,
            mark,
            mbufs: vec![std::ptr::null_mut(); BURST],
            data: vec![std::ptr::null(); BURST],
            lens: vec![0; BURST],
            base: PortStats::default(),
        };
        let until = Instant::now() + Duration::from_millis(100);
        while q.poll() == BURST && Instant::now() < until {}
        q.base = stats(id).unwrap_or_default();
        Ok(q)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn queue(&self) -> u16 {
        self.queue
    }

    /// One burst in and freed at once (nothing handed over).
    fn poll(&mut self) -> usize {
        let n = self.burst();
        self.free(n);
        n
    }

    fn burst(&mut self) -> usize {
        // SAFETY: the arrays have BURST entries; the queue is ours.
        usize::from(unsafe {
            lr_rx(
                self.port,
                self.queue,
                self.mbufs.as_mut_ptr(),
                BURST as u16,
                self.data.as_mut_ptr(),
                self.lens.as_mut_ptr(),
                c_int::from(self.mark),
            )
        })
    }

    /// A burst, polling up to `wait` for one.
    #[inline]
    fn burst_within(&mut self, wait: Duration) -> usize {
        let mut n = self.burst();
        if n == 0 {
            let until = Instant::now() + wait;
            loop {
                for _ in 0..64 {
                    n = self.burst();
                    if n > 0 {
                        return n;
                    }
                    std::hint::spin_loop();
                }
                if Instant::now() >= until {
                    break;
                }
            }
        }
        n
    }

    /// Forwards a burst in place (polling up to `wait` for it): `each`
    /// rewrites every received frame in its mbuf (false: not sent), the
    /// frames kept go out of `tx` as they are, no copy, a few tries
    /// while its ring is full; what it does not take is freed. Returns
    /// (received, sent, not taken by `tx`).
    #[inline]
    pub fn forward(
        &mut self,
        wait: Duration,
        tx: &mut TxQueue,
        mut each: impl FnMut(&mut [u8]) -> bool,
    ) -> (usize, usize, usize) {
        let n = self.burst_within(wait);
        let mut kept = 0;
        for i in 0..n {
            // SAFETY: data[i] points to lens[i] bytes of received mbuf i,
            // this queue's alone until sent or freed.
            let frame = unsafe {
                std::slice::from_raw_parts_mut(self.data[i].cast_mut(), usize::from(self.lens[i]))
            };
            if each(frame) {
                self.mbufs[kept] = self.mbufs[i];
                kept += 1;
            } else {
                // SAFETY: mbuf i is ours and not kept.
                unsafe { lr_free(self.mbufs.as_ptr().add(i), 1) };
            }
        }
        let mut sent = 0;
        for _ in 0..4 {
            if sent == kept {
                break;
            }
            // SAFETY: mbufs[sent..kept] are received mbufs still ours; the
            // TX queue is `tx`'s alone (borrowed mutably).
            sent += usize::from(unsafe {
                lr_tx(
                    tx.port,
                    tx.queue,
                    self.mbufs.as_mut_ptr().add(sent),
                    (kept - sent) as u16,
                )
            });
        }
        if kept > sent {
            // SAFETY: mbufs[sent..kept] were not taken by the port.
            unsafe { lr_free(self.mbufs.as_ptr().add(sent), (kept - sent) as c_uint) };
        }
        (n, sent, kept - sent)
    }

    fn free(&mut self, n: usize) {
        if n > 0 {
            // SAFETY: mbufs[..n] came from the last burst and are ours.
            unsafe { lr_free(self.mbufs.as_ptr(), n as c_uint) };
        }
    }

    /// Polls for up to `wait` until frames arrive; then calls `each` with
    /// every frame of the burst (at most [`BURST`]) and its index in it,
    /// and gives the mbufs back. Returns the frames handed over.
    #[inline]
    pub fn recv(&mut self, wait: Duration, mut each: impl FnMut(usize, &[u8])) -> usize {
        let n = self.burst_within(wait);
        for i in 0..n {
            // SAFETY: data[i] points to lens[i] bytes of received mbuf i,
            // ours until freed below.
            each(i, unsafe {
                std::slice::from_raw_parts(self.data[i], usize::from(self.lens[i]))
            });
        }
        self.free(n);
        n
    }

    /// Frames the port dropped before this queue could take them (no room
    /// in its ring, no mbuf), since it was opened (port-wide).
    pub fn drops(&self) -> u64 {
        stats(self.port).map_or(0, |s| {
            (s.imissed + s.rx_nombuf).saturating_sub(self.base.imissed + self.base.rx_nombuf)
        })
    }
}

impl Drop for RxQueue {
    fn drop(&mut self) {
        release(self.port, self.queue, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eal_gets_a_file_prefix_of_its_own_unless_given_one() {
        let v = eal_argv(&["--no-huge".into()]);
        assert_eq!(v[0], "linerate");
        assert!(v.last().unwrap().starts_with("--file-prefix=linerate-"));
        let v = eal_argv(&["--file-prefix=x".into()]);
        assert_eq!(
            v.iter().filter(|a| a.starts_with("--file-prefix")).count(),
            1
        );
    }
}
