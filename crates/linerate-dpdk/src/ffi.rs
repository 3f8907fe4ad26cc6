//! The shim's functions, the EAL, the ports and their queues.

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int, c_uint};
use std::io;
use std::ops::Range;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

mod queue;
pub use queue::{RxQueue, TxBurst, TxQueue};

#[repr(C)]
pub(crate) struct RteMempool {
    _opaque: [u8; 0],
}

#[repr(C)]
pub(crate) struct RteMbuf {
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
        err: *mut c_int,
    ) -> *mut RteMempool;
    fn lr_port_start(port: u16, nq: u16, nb_desc: u16, rx_pools: *const *mut RteMempool) -> c_int;
    fn lr_alloc(
        mp: *mut RteMempool,
        m: *mut *mut RteMbuf,
        n: c_uint,
        room: *mut u16,
        shared: c_int,
    ) -> c_int;
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
    fn lr_rx_mbufs(
        port: u16,
        queue: u16,
        m: *mut *mut RteMbuf,
        n: u16,
        mark: c_int,
        max: u16,
        over: *mut u16,
    ) -> u16;
    fn lr_free(m: *const *mut RteMbuf, n: c_uint);
    fn lr_pool_avail(mp: *mut RteMempool) -> c_uint;
    fn lr_thread_lcore() -> c_int;
    fn lr_port_stats(port: u16, out: *mut u64) -> c_int;
}

/// How DPDK was linked into this build: `"static"` (its `librte_*.a` and
/// drivers in the binary, the default) or `"dynamic"` (its shared
/// libraries; `LINERATE_DPDK_LINK=dynamic` at build time).
pub const LINKED: &str = env!("LINERATE_DPDK_LINKED");

/// Frames per burst (TX and RX).
pub const BURST: usize = 64;
/// Queues a port is set up with at most (one per worker).
pub const QUEUES_MAX: u16 = 4;
/// Bytes of frame an mbuf holds (no scattered frames: jumbo frames are not
/// carried yet).
pub const DATA_ROOM: usize = 2048;
/// Descriptors per queue asked for (the driver adjusts them).
pub(crate) const DESCRIPTORS: u16 = 1024;
/// mbufs per RX queue's pool and per TX queue's pool.
pub(crate) const RX_MBUFS: u32 = 4095;
pub(crate) const TX_MBUFS: u32 = 4095;
/// mbufs per RX queue's pool on net_af_xdp, whose UMEM that pool is: a
/// TX queue builds its frames in the same pool (the PMD sends an mbuf of
/// its UMEM without a copy; one of another pool it copies into a new
/// UMEM mbuf), mbufs given back only when half the completion ring has
/// come back, while the RX fill ring holds its share: with 4095 the port
/// found it empty and took a few frames per burst.
pub(crate) const RX_MBUFS_AF_XDP: u32 = 16383;
/// Where the fields the frame builder sets itself lie in an `rte_mbuf`
/// (DPDK 22.11's layout; shim.c's static asserts fail the build on a
/// DPDK where they differ): the buffer's address, the data's offset in
/// it, the frame's length and its first segment's, and the private area
/// (the slot word) after the struct.
pub(crate) const MBUF_BUF_ADDR: usize = 0;
pub(crate) const MBUF_DATA_OFF: usize = 16;
pub(crate) const MBUF_PKT_LEN: usize = 36;
pub(crate) const MBUF_DATA_LEN: usize = 40;
pub(crate) const MBUF_PRIV: usize = 128;
/// `RTE_PKTMBUF_HEADROOM`: where a frame starts in an mbuf's buffer.
pub(crate) const HEADROOM: u16 = 128;
/// The bit of an mbuf's slot word the shim sets when a frame was received
/// into it (`LR_RECEIVED` in shim.c).
pub(crate) const RECEIVED: u32 = 0x8000_0000;

/// DPDK's text for error `e` (an errno or one of DPDK's own).
pub(crate) fn strerror(e: c_int) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or thread-local
    // NUL-terminated string, valid until the next call on this thread.
    unsafe { CStr::from_ptr(lr_strerror(e.abs())) }
        .to_string_lossy()
        .into_owned()
}

pub(crate) fn err(what: &str, e: c_int) -> io::Error {
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

pub(crate) fn check(what: &str, r: c_int) -> io::Result<()> {
    if r < 0 { Err(err(what, r)) } else { Ok(()) }
}

pub(crate) static EAL_ARGS: OnceLock<Vec<String>> = OnceLock::new();
pub(crate) static EAL: OnceLock<Result<(), String>> = OnceLock::new();

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

/// The EAL lcore this thread moves its bursts as, registering it first
/// (`rte_thread_register`): its mempool caches are this lcore's. `None`
/// where DPDK has no lcore id left (the thread then works without a
/// cache). A thread that registered gives its caches' mbufs back to
/// their pools and its lcore id back when it ends.
pub fn thread_lcore() -> Option<u32> {
    // SAFETY: no arguments; registers the calling thread at most once.
    u32::try_from(unsafe { lr_thread_lcore() }).ok()
}

/// A pool's pointer, kept in the port table (pools live as long as the
/// process).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pool(*mut RteMempool);
// SAFETY: a mempool is made for use from any thread (ring_mp_mc; each
// lcore's cache is used by that lcore's thread alone).
unsafe impl Send for Pool {}

#[derive(Debug)]
pub(crate) struct PortState {
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

pub(crate) fn ports() -> MutexGuard<'static, HashMap<u16, PortState>> {
    static PORTS: OnceLock<Mutex<HashMap<u16, PortState>>> = OnceLock::new();
    PORTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// An mbuf pool of `n`, its objects end to end where DPDK has no
/// hugepages (what net_af_xdp registers as its UMEM must be, and what
/// keeps a burst's mbufs from evicting each other from the L1 cache; see
/// `pool_packed` in shim.c).
pub(crate) fn pool(name: &str, n: u32, socket: c_int) -> io::Result<Pool> {
    let c = CString::new(name).expect("pool names have no NUL");
    let mut e = 0;
    // SAFETY: c is NUL-terminated; e is a valid out pointer.
    let p = unsafe { lr_pool_create(c.as_ptr(), n, DATA_ROOM as u16, socket, &mut e) };
    if p.is_null() {
        return Err(err(&format!("mbuf pool {name} ({n} mbufs)"), e));
    }
    Ok(Pool(p))
}

/// The port table with `id` configured and started (done the first time).
pub(crate) fn started(id: u16) -> io::Result<MutexGuard<'static, HashMap<u16, PortState>>> {
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
        .map(|q| pool(&format!("lr_rx{id}_{q}"), rx_mbufs, socket))
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
pub(crate) fn take(
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

pub(crate) fn release(id: u16, queue: u16, tx: bool) {
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
