//! The dispatch the list of backends in `port/mod.rs` makes: a backend's
//! name, its variants of the port enums, and a match per call forwarding
//! to its `TxPort`, `RxPort`, `FwdPort` and `Backend` (`contract.rs`).

/// Makes, from the list of backends (`Variant "name" => file::Backend`):
/// [`BackendKind`] (with `auto` and the socket backend's two forced
/// paths), the port enums [`Tx`], [`Rx`], [`Fwd`] with a variant per
/// backend, and their dispatch.
macro_rules! backends {
    ($($V:ident $name:literal => $m:ident :: $B:ident,)*) => {
        /// A backend's name, as every command's `--backend` takes it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum BackendKind {
            /// af_xdp where it opens, else af_packet, else socket.
            Auto,
            $($V,)*
            /// The socket backend forced onto UDP sockets.
            Udp,
            /// The socket backend forced onto raw AF_PACKET frames.
            Raw,
        }

        impl BackendKind {
            /// Every name, in the order help lists them.
            pub const ALL: &[BackendKind] = &[Self::Auto, $(Self::$V,)* Self::Udp, Self::Raw];

            /// The name `--backend` takes.
            pub fn name(self) -> &'static str {
                match self {
                    Self::Auto => "auto",
                    $(Self::$V => $name,)*
                    Self::Udp => "socket:udp",
                    Self::Raw => "socket:raw",
                }
            }

            /// The backend this name opens, over the loopback ports of
            /// `wires` (`None`: `auto` chooses).
            fn named(self, wires: &Wires) -> Option<Named> {
                Some(match self {
                    Self::Auto => return None,
                    $(Self::$V => Named::$V(<$m::$B as Backend>::new(wires)),)*
                    Self::Udp => Named::Socket(socket::Socket::Udp),
                    Self::Raw => Named::Socket(socket::Socket::Raw),
                })
            }
        }

        /// A named backend, ready to open ports.
        #[derive(Debug)]
        enum Named {
            $($V($m::$B),)*
        }

        /// A port's sending side, of whichever backend opened it.
        #[derive(Debug)]
        pub enum Tx {
            $($V(<$m::$B as Backend>::Tx),)*
        }

        /// A port's receiving side.
        #[derive(Debug)]
        pub enum Rx {
            $($V(<$m::$B as Backend>::Rx),)*
        }

        /// A port forwarding in place (see [`FwdPort`]).
        #[derive(Debug)]
        pub enum Fwd {
            $($V(<$m::$B as Backend>::Fwd),)*
        }

        impl Named {
            fn open_tx(
                self,
                iface: &str,
                max_frame: usize,
                queue: u32,
                traffic: &Traffic,
            ) -> Result<(Tx, Option<String>), BackendError> {
                match self {
                    $(Named::$V(b) => b
                        .open_tx(iface, max_frame, queue, traffic)
                        .map(|(t, n)| (Tx::$V(t), n)),)*
                }
            }

            fn open_rx(
                self,
                iface: &str,
                filter: RxFilter,
                hold: RxHold,
            ) -> Result<(Rx, Option<String>), BackendError> {
                match self {
                    $(Named::$V(b) => b.open_rx(iface, filter, hold).map(|(r, n)| (Rx::$V(r), n)),)*
                }
            }

            fn open_fwd(
                self,
                rx_iface: &str,
                tx_iface: &str,
                workers: usize,
                filter: RxFilter,
            ) -> Option<Opened<Fwd>> {
                match self {
                    $(Named::$V(b) => b
                        .open_fwd(rx_iface, tx_iface, workers, filter)
                        .map(|r| r.map(|(f, n)| (f.into_iter().map(Fwd::$V).collect(), n))),)*
                }
            }

            fn own_ports(&self) -> bool {
                match self {
                    $(Named::$V(_) => <$m::$B as Backend>::OWN_PORTS,)*
                }
            }

            fn mtu(&self, iface: &str) -> io::Result<usize> {
                match self {
                    $(Named::$V(b) => b.mtu(iface),)*
                }
            }

            fn mac(&self, iface: &str) -> io::Result<[u8; 6]> {
                match self {
                    $(Named::$V(b) => b.mac(iface),)*
                }
            }

            fn link_up(&self, iface: &str) -> io::Result<bool> {
                match self {
                    $(Named::$V(b) => b.link_up(iface),)*
                }
            }
        }

        impl Tx {
            pub fn name(&self) -> &'static str {
                match self {
                    $(Tx::$V(t) => TxPort::name(t),)*
                }
            }

            /// The kernel builds and addresses this backend's frames (UDP
            /// sockets): a crafted frame beside them would not be addressed
            /// alike.
            pub fn kernel_addressed(&self) -> bool {
                match self {
                    $(Tx::$V(t) => TxPort::kernel_addressed(t),)*
                }
            }

            /// Frames per send call that suit the backend.
            pub fn batch(&self) -> usize {
                match self {
                    $(Tx::$V(t) => TxPort::batch(t),)*
                }
            }

            /// What this backend can do here.
            pub fn capabilities(&self, iface: &str) -> Capabilities {
                let base = Capabilities {
                    batch: self.batch(),
                    max_frame: contract::stack_max(iface),
                    crafted_frames: true,
                    zero_copy: false,
                    per_queue: false,
                    gso: false,
                    qdisc_bypass: false,
                };
                match self {
                    $(Tx::$V(t) => TxPort::capabilities(t, base),)*
                }
            }

            /// Hands frames built elsewhere to the kernel; returns how many
            /// it took (0: full, retry). The backends with buffers of their
            /// own copy them in, each at most [`slot_len`](Self::slot_len).
            pub fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
                match self {
                    $(Tx::$V(t) => TxPort::send(t, frames),)*
                }
            }

            /// Builds up to `n` frames in place and hands them to the
            /// kernel: `fill.build(buffer, slot)` writes a frame into the
            /// buffer and returns its length. The buffer is the backend's
            /// own (a UMEM frame, a TX ring slot, a staging buffer of
            /// sendmmsg), `slot` (below [`slots`](Self::slots)) names it,
            /// and it still holds the last frame built there, so a caller
            /// that remembers what each slot holds writes only what
            /// differs. The UDP path asks `fill.payload` for the datagrams'
            /// payloads instead (the kernel builds the headers). Returns the
            /// frames handed over and their bytes (0 frames: full, try
            /// again).
            #[inline]
            pub fn send_with<F: FrameSource + PayloadSource>(
                &mut self,
                n: usize,
                fill: &mut F,
            ) -> io::Result<(usize, u64)> {
                match self {
                    $(Tx::$V(t) => TxPort::send_with(t, n, fill),)*
                }
            }

            /// The bytes of each buffer [`send_with`](Self::send_with) hands
            /// out (the largest frame it can build, FCS excluded).
            pub fn slot_len(&self) -> usize {
                match self {
                    $(Tx::$V(t) => TxPort::slot_len(t),)*
                }
            }

            /// How many distinct buffers [`send_with`](Self::send_with)
            /// hands out.
            pub fn slots(&self) -> usize {
                match self {
                    $(Tx::$V(t) => TxPort::slots(t),)*
                }
            }

            /// What the backend itself reports (af_xdp: the frames the
            /// kernel completed on the TX ring, invalid descriptors,
            /// zero-copy or not).
            pub fn stats(&self) -> Option<TxStats> {
                match self {
                    $(Tx::$V(t) => TxPort::stats(t),)*
                }
            }

            /// Waits until everything handed over is sent.
            pub fn finish(&mut self) -> io::Result<()> {
                match self {
                    $(Tx::$V(t) => TxPort::finish(t),)*
                }
            }
        }

        impl Rx {
            pub fn name(&self) -> &'static str {
                match self {
                    $(Rx::$V(r) => RxPort::name(r),)*
                }
            }

            /// The receiver is bound to its interface's queues (AF_XDP), so
            /// a sender on the same interface cannot bind them too.
            pub fn holds_queue(&self) -> bool {
                match self {
                    $(Rx::$V(r) => RxPort::holds_queue(r),)*
                }
            }

            /// What this receiving backend can do here.
            pub fn capabilities(&self) -> RxCapabilities {
                match self {
                    $(Rx::$V(r) => RxPort::capabilities(r),)*
                }
            }

            /// [`Rx::recv`], waiting at most `wait` for the first frame (to
            /// the millisecond on the rings; the raw socket's wait is set
            /// per call).
            #[inline]
            pub fn recv_within<F: FrameSink>(
                &mut self,
                wait: Duration,
                f: &mut F,
            ) -> io::Result<usize> {
                match self {
                    $(Rx::$V(r) => RxPort::recv_within(r, wait, f),)*
                }
            }

            /// Frames the kernel dropped before the sink could take them,
            /// so far.
            pub fn drops(&mut self) -> u64 {
                match self {
                    $(Rx::$V(r) => RxPort::drops(r),)*
                }
            }

            /// `workers` receivers sharing this one's frames, this one
            /// first.
            fn share(
                self,
                wires: &Wires,
                iface: &str,
                workers: usize,
            ) -> Result<Vec<Rx>, BackendError> {
                match self {
                    $(Rx::$V(r) => <$m::$B as Backend>::new(wires)
                        .share_rx(r, iface, workers)
                        .map(|v| v.into_iter().map(Rx::$V).collect()),)*
                }
            }
        }

        impl Fwd {
            pub fn name(&self) -> &'static str {
                match self {
                    $(Fwd::$V(f) => FwdPort::name(f),)*
                }
            }

            /// Waits up to `wait` for frames, hands each to `rewrite` to
            /// change in its buffer (false: dropped) and sends the rest back
            /// out; returns (received, sent, dropped by `rewrite` or for
            /// want of room).
            #[inline]
            pub fn forward<F: FnMut(&mut [u8]) -> bool>(
                &mut self,
                wait: Duration,
                rewrite: &mut F,
            ) -> io::Result<(u64, u64, u64)> {
                match self {
                    $(Fwd::$V(f) => FwdPort::forward(f, wait, rewrite),)*
                }
            }

            /// See [`FwdPort::can_forward_untouched`].
            pub fn can_forward_untouched(&self) -> bool {
                match self {
                    $(Fwd::$V(f) => FwdPort::can_forward_untouched(f),)*
                }
            }

            /// See [`FwdPort::forward_untouched`].
            #[inline]
            pub fn forward_untouched(
                &mut self,
                wait: Duration,
                frame_max: usize,
            ) -> io::Result<(u64, u64, u64, u64)> {
                match self {
                    $(Fwd::$V(f) => FwdPort::forward_untouched(f, wait, frame_max),)*
                }
            }

            /// Waits until everything sent is gone.
            pub fn finish(&mut self) -> io::Result<()> {
                match self {
                    $(Fwd::$V(f) => FwdPort::finish(f),)*
                }
            }

            /// Frames dropped before they could be taken, so far.
            pub fn drops(&mut self) -> u64 {
                match self {
                    $(Fwd::$V(f) => FwdPort::drops(f),)*
                }
            }
        }
    };
}
