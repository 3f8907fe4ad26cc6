//! A port's TX and RX queues: frames built in and read from the queue's
//! own mbufs, bursts handed to and taken from the PMD.

use super::*;

/// One TX queue of a port, frames built in its own mbufs.
#[derive(Debug)]
pub struct TxQueue {
    port: u16,
    queue: u16,
    pool: Pool,
    /// The pool's mbufs (the slots frames are built in).
    pool_mbufs: u32,
    mbufs: Vec<*mut RteMbuf>,
    lens: Vec<u16>,
    /// Built but not yet taken by the port: sent first next time.
    pending: Range<usize>,
    /// The pool is the port's RX queue's too (net_af_xdp): its mbufs are
    /// reset whole when taken.
    shared: bool,
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
        let shared = st.shared_pools;
        let (pool, mbufs) = match st.tx_pools[usize::from(queue)] {
            Some(p) => p,
            None => match pool(&format!("lr_tx{id}_{queue}"), TX_MBUFS, st.socket) {
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
            lens: vec![0; BURST],
            pending: 0..0,
            shared,
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

    /// The queue's pool's mbufs that no one holds now (in its ring or an
    /// lcore's cache; neither built in nor handed to the port).
    pub fn free_mbufs(&self) -> usize {
        // SAFETY: the pool is valid for the process's life.
        unsafe { lr_pool_avail(self.pool.0) as usize }
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
                &mut room,
                c_int::from(self.shared),
            )
        };
        (r == 0).then_some(usize::from(room))
    }

    /// The first `n` mbufs (just taken, `room` bytes each) handed out to
    /// a frame builder.
    fn burst(&mut self, n: usize, room: usize) -> TxBurst<'_> {
        TxBurst {
            mbufs: &self.mbufs[..n],
            lens: &mut self.lens[..n],
            room,
            next: 0,
            shared: self.shared,
        }
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
    /// `build` is handed the burst's mbufs ([`TxBurst`]) and builds a
    /// frame in each one it takes, in order; an mbuf still holds what was
    /// last built in it by this queue unless its slot is among
    /// [`TxBurst::received`] (a frame was received into it since:
    /// net_af_xdp, where the RX queue shares the pool). Returns the frames
    /// the port took and their bytes (0: full, try again); frames built
    /// but not taken are sent before anything more is built.
    #[inline]
    pub fn send_burst(
        &mut self,
        n: usize,
        build: impl FnOnce(&mut TxBurst<'_>),
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
            let mut burst = self.burst(n, room);
            build(&mut burst);
            let built = burst.next;
            if built < n {
                // SAFETY: mbufs[built..n] are this handle's, nothing built.
                unsafe { lr_free(self.mbufs.as_ptr().add(built), (n - built) as c_uint) };
            }
            self.pending = 0..built;
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
        let mut burst = self.burst(n, room);
        for f in &frames[..n] {
            let Some((buf, _)) = burst.next_mbuf() else {
                break;
            };
            let len = f.len().min(buf.len());
            buf[..len].copy_from_slice(&f[..len]);
            burst.built(len);
        }
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

/// One burst's mbufs, handed out in order to a frame builder (see
/// [`TxQueue::send_burst`]): each one's data offset, lengths and slot
/// word are read and set as it is built, one pass over the burst (the
/// shim only takes them from the pool).
#[derive(Debug)]
pub struct TxBurst<'a> {
    mbufs: &'a [*mut RteMbuf],
    lens: &'a mut [u16],
    /// Bytes a frame may take in each mbuf.
    room: usize,
    /// The next mbuf to hand out.
    next: usize,
    /// The pool is an RX queue's too: slot words carry [`RECEIVED`].
    shared: bool,
}

impl TxBurst<'_> {
    /// The next mbuf's data room and its slot; `None` when the burst is
    /// full. [`built`](Self::built) follows each. (Whether a frame was
    /// received into it since this queue last built there is told by
    /// [`take_received`](Self::take_received), before.)
    #[inline(always)]
    pub fn next_mbuf(&mut self) -> Option<(&mut [u8], usize)> {
        let i = self.next;
        let &m = self.mbufs.get(i)?;
        self.next = i + 1;
        let m = m.cast::<u8>();
        // SAFETY: m is an mbuf of this burst, this queue's alone until
        // sent (taken from its pool, each handed out once); the offsets
        // are rte_mbuf's (MBUF_*, held by the shim's static asserts); its
        // private area holds the slot word (every linerate pool has one).
        let (buf, s) = unsafe {
            let base = m.add(MBUF_BUF_ADDR).cast::<*mut u8>().read();
            m.add(MBUF_DATA_OFF).cast::<u16>().write(HEADROOM);
            let s = m.add(MBUF_PRIV).cast::<u32>().read();
            let buf = std::slice::from_raw_parts_mut(base.add(usize::from(HEADROOM)), self.room);
            (buf, s)
        };
        Some((buf, (s & !RECEIVED) as usize))
    }

    /// The frame built in the last mbuf handed out is `len` bytes (cut to
    /// the mbuf's room): its lengths are set.
    #[inline(always)]
    pub fn built(&mut self, len: usize) {
        let Some(i) = self.next.checked_sub(1) else {
            return;
        };
        let (Some(&m), Some(l)) = (self.mbufs.get(i), self.lens.get_mut(i)) else {
            return;
        };
        let len = len.min(self.room) as u16;
        *l = len;
        let m = m.cast::<u8>();
        // SAFETY: as in next_mbuf: mbuf i is this burst's, the offsets
        // rte_mbuf's; one segment, so its data length is the frame's.
        unsafe {
            m.add(MBUF_DATA_LEN).cast::<u16>().write(len);
            m.add(MBUF_PKT_LEN).cast::<u32>().write(u32::from(len));
        }
    }

    /// Calls `f` with each slot of this burst's mbufs that a frame was
    /// received into since this queue last built there, and clears the
    /// mark (none but on a pool an RX queue shares: a pass before the
    /// burst is built, not a test per frame as it is handed out).
    pub fn take_received(&mut self, mut f: impl FnMut(usize)) {
        let mbufs = if self.shared { self.mbufs } else { &[] };
        for &m in mbufs {
            // SAFETY: as in next_mbuf: the slot word after the struct, of
            // an mbuf this burst holds.
            unsafe {
                let word = m.cast::<u8>().add(MBUF_PRIV).cast::<u32>();
                let s = word.read();
                if s & RECEIVED != 0 {
                    word.write(s & !RECEIVED);
                    f((s & !RECEIVED) as usize);
                }
            }
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
        self.poll_within(wait, Self::burst)
    }

    /// Calls `burst` until it returns more than 0 or `wait` has passed
    /// since its first 65 tries came back empty (the clock read once every
    /// 64 tries, the first time only after those: a forwarder whose next
    /// burst comes within them, the common case under load, reads no
    /// clock); its last result.
    #[inline]
    fn poll_within(&mut self, wait: Duration, mut burst: impl FnMut(&mut Self) -> usize) -> usize {
        let mut until = None;
        loop {
            for _ in 0..65 {
                let n = burst(self);
                if n > 0 {
                    return n;
                }
                std::hint::spin_loop();
            }
            let now = Instant::now();
            if now >= *until.get_or_insert(now + wait) {
                return 0;
            }
        }
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
        let sent = self.send_out(tx, kept);
        (n, sent, kept - sent)
    }

    /// Forwards a burst out of `tx` as it arrived, no frame read but for
    /// its length (polling up to `wait` for it), as
    /// [`forward`](Self::forward) does with a rewrite that keeps every
    /// frame up to `frame_max` bytes; longer ones are freed. Returns
    /// (received, sent, too long).
    #[inline]
    pub fn forward_untouched(
        &mut self,
        wait: Duration,
        tx: &mut TxQueue,
        frame_max: usize,
    ) -> (usize, usize, usize) {
        let max = u16::try_from(frame_max).unwrap_or(u16::MAX);
        // (kept, too long) of the burst that came
        let mut got = (0, 0);
        self.poll_within(wait, |q| {
            got = q.burst_mbufs(max);
            got.0 + got.1
        });
        let (n, too_long) = got;
        (n + too_long, self.send_out(tx, n), too_long)
    }

    /// A burst's mbufs alone, but those of frames over `max` bytes, freed:
    /// (the ones kept, the ones too long).
    fn burst_mbufs(&mut self, max: u16) -> (usize, usize) {
        let mut over: u16 = 0;
        // SAFETY: the array has BURST entries; the queue is ours; `over`
        // is a valid out pointer.
        let kept = usize::from(unsafe {
            lr_rx_mbufs(
                self.port,
                self.queue,
                self.mbufs.as_mut_ptr(),
                BURST as u16,
                c_int::from(self.mark),
                max,
                &mut over,
            )
        });
        (kept, usize::from(over))
    }

    /// Sends `mbufs[..kept]` (received, ours) out of `tx`, a few tries
    /// while its ring is full; frees what it did not take. Returns the
    /// frames sent.
    #[inline]
    fn send_out(&mut self, tx: &mut TxQueue, kept: usize) -> usize {
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
        sent
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
