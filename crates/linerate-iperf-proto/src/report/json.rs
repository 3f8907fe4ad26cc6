//! iperf3's `-J` document: interval and end objects with iperf3's keys,
//! types and units.

use super::*;

impl Report {
    pub(super) fn interval_json(s: &IntervalSample, with_socket: bool) -> Value {
        let secs = s.end - s.start;
        let mut m = Map::new();
        if with_socket {
            m.insert("socket".into(), json!(s.socket));
        }
        m.insert("start".into(), json!(round6(s.start)));
        m.insert("end".into(), json!(round6(s.end)));
        m.insert("seconds".into(), json!(round6(secs)));
        m.insert("bytes".into(), json!(s.bytes));
        m.insert(
            "bits_per_second".into(),
            json!(if secs > 0.0 {
                s.bytes as f64 * 8.0 / secs
            } else {
                0.0
            }),
        );
        if let Some(t) = &s.tcp {
            m.insert("retransmits".into(), json!(t.retransmits));
            if with_socket {
                m.insert("snd_cwnd".into(), json!(t.snd_cwnd));
                m.insert("snd_wnd".into(), json!(t.snd_wnd));
                m.insert("rtt".into(), json!(t.rtt_us));
                m.insert("rttvar".into(), json!(t.rttvar_us));
                m.insert("pmtu".into(), json!(t.pmtu));
                m.insert("reorder".into(), json!(t.reorder));
            }
        }
        if let Some(n) = s.udp_tx_packets {
            m.insert("packets".into(), json!(n));
        }
        if let Some(rx) = &s.udp_rx {
            m.insert("jitter_ms".into(), json!(rx.jitter_ms));
            m.insert("lost_packets".into(), json!(rx.lost));
            m.insert("packets".into(), json!(rx.packets));
            let pct = if rx.packets > 0 {
                100.0 * rx.lost as f64 / rx.packets as f64
            } else {
                0.0
            };
            m.insert("lost_percent".into(), json!(pct));
        }
        m.insert("omitted".into(), json!(s.omitted));
        m.insert("sender".into(), json!(s.sender));
        Value::Object(m)
    }

    /// Sums streams of one direction (times from the first stream).
    pub(super) fn sum(streams: &[&IntervalSample]) -> Option<IntervalSample> {
        let first = streams.first()?;
        let mut s = IntervalSample {
            id: 0,
            socket: 0,
            sender: first.sender,
            start: first.start,
            end: first.end,
            omitted: first.omitted,
            ..Default::default()
        };
        for x in streams {
            s.bytes += x.bytes;
            if let Some(t) = &x.tcp {
                s.tcp.get_or_insert_with(TcpSample::default).retransmits += t.retransmits;
            }
            if let Some(n) = x.udp_tx_packets {
                *s.udp_tx_packets.get_or_insert(0) += n;
            }
            if let Some(rx) = &x.udp_rx {
                let acc = s.udp_rx.get_or_insert_with(UdpRxSample::default);
                acc.lost += rx.lost;
                acc.packets += rx.packets;
                acc.jitter_ms += rx.jitter_ms / streams.len() as f64;
            }
        }
        Some(s)
    }

    pub(super) fn end_json(
        &self,
        finals: &[StreamFinal],
        cpu: Cpu,
        peer: Option<&PeerResults>,
    ) -> (Value, f64) {
        let p = &self.info.params;
        let udp = p.protocol == Protocol::Udp;
        let mut streams = Vec::new();
        let mut fwd = Acc::default();
        let mut rev = Acc::default();
        for f in finals {
            let acc = if self.forward_dir(f.sender) {
                &mut fwd
            } else {
                &mut rev
            };
            let mut v = stream_end(f, peer.and_then(|r| r.stream(f.id)), acc, udp);
            if let Some((name, size)) = &self.diskfile {
                let bytes = |side: &str| v[side]["bytes"].as_u64().unwrap_or(0);
                let (sent, received) = (bytes("sender"), bytes("receiver"));
                v["diskfile"] = json!({
                    "sent": sent, "received": received, "size": size,
                    "percent_sent": Self::diskfile_percent(sent, *size),
                    "percent_received": Self::diskfile_percent(received, *size),
                    "filename": name,
                });
            }
            streams.push(v);
        }
        let mut end = Map::new();
        end.insert("streams".into(), json!(streams));
        let this_sends_fwd = self.info.role == Role::Client;
        // The receiver's rate (both directions with --bidir): what a
        // repetition measures, as `sum_received` (+ `_bidir_reverse`) say.
        let received_bps = match (rev.n > 0, p.mode == TestMode::Bidir) {
            (true, true) => bps(fwd.recv, fwd.recv_s) + bps(rev.recv, rev.recv_s),
            (true, false) => bps(rev.recv, rev.recv_s),
            (false, _) => bps(fwd.recv, fwd.recv_s),
        };
        if fwd.n > 0 || rev.n == 0 {
            let (s, r, l) = sums_json(&fwd, this_sends_fwd, udp);
            if udp {
                end.insert("sum".into(), l);
            }
            end.insert("sum_sent".into(), s);
            end.insert("sum_received".into(), r);
        }
        if rev.n > 0 {
            let (s, r, l) = sums_json(&rev, !this_sends_fwd, udp);
            let suffix = if p.mode == TestMode::Bidir {
                "_bidir_reverse"
            } else {
                ""
            };
            if udp {
                end.insert(format!("sum{suffix}"), l);
            }
            end.insert(format!("sum_sent{suffix}"), s);
            end.insert(format!("sum_received{suffix}"), r);
        }
        let remote = peer.map_or(Cpu::default(), |r| Cpu {
            total: r.cpu_util_total,
            user: r.cpu_util_user,
            system: r.cpu_util_system,
        });
        end.insert(
            "cpu_utilization_percent".into(),
            json!({"host_total": cpu.total, "host_user": cpu.user, "host_system": cpu.system,
                   "remote_total": remote.total, "remote_user": remote.user, "remote_system": remote.system}),
        );
        if !udp {
            congestion_json(&mut end, finals, peer);
        }
        (Value::Object(end), received_bps)
    }
}

/// One direction's figures summed over its streams.
#[derive(Default, Clone, Copy)]
struct Acc {
    sent: u64,
    recv: u64,
    sent_s: f64,
    recv_s: f64,
    retrans: Option<u64>,
    packets: u64,
    lost: u64,
    jitter: f64,
    n: usize,
    ooo: u64,
}

fn bps(b: u64, s: f64) -> f64 {
    if s > 0.0 { b as f64 * 8.0 / s } else { 0.0 }
}

/// One stream's `end.streams[]` object, from this side's figures and the
/// peer's; its figures are added to `acc`.
fn stream_end(f: &StreamFinal, pr: Option<&StreamResult>, acc: &mut Acc, udp: bool) -> Value {
    // The peer's duration, or this side's where the peer's is not known:
    // iperf3's fallback (its server writes its document before the
    // client's results arrive, so its peer half has the server's own
    // seconds, never 0).
    let peer_s = pr
        .map(|r| r.end_time - r.start_time)
        .filter(|&s| s > 0.0)
        .unwrap_or(f.seconds);
    let (sent, sent_s, recv, recv_s) = if f.sender {
        (f.bytes, f.seconds, pr.map_or(0, |r| r.bytes), peer_s)
    } else {
        (pr.map_or(0, |r| r.bytes), peer_s, f.bytes, f.seconds)
    };
    acc.sent += sent;
    acc.recv += recv;
    acc.sent_s = acc.sent_s.max(sent_s);
    acc.recv_s = acc.recv_s.max(recv_s);
    acc.n += 1;
    if udp {
        udp_stream_end(f, pr, acc, (sent, sent_s))
    } else {
        tcp_stream_end(f, pr, acc, (sent, sent_s), (recv, recv_s))
    }
}

fn udp_stream_end(
    f: &StreamFinal,
    pr: Option<&StreamResult>,
    acc: &mut Acc,
    (sent, sent_s): (u64, f64),
) -> Value {
    let omitted = |x: u64, o: u64| x.saturating_sub(o);
    // Sender's count of datagrams if known, receiver's loss/jitter.
    let (packets, o_packets, lost, jitter_s, ooo) = if f.sender {
        let r = pr.cloned().unwrap_or_default();
        (
            f.packets,
            f.omitted_packets,
            omitted(r.errors, r.omitted_errors),
            r.jitter_s,
            0,
        )
    } else {
        let (pk, opk) = pr.map_or((f.packets, f.omitted_packets), |r| {
            (r.packets, r.omitted_packets)
        });
        (
            pk,
            opk,
            omitted(f.errors, f.omitted_errors),
            f.jitter_s,
            f.out_of_order,
        )
    };
    let packets = omitted(packets, o_packets);
    acc.packets += packets;
    acc.lost += lost;
    acc.jitter += jitter_s * 1000.0;
    acc.ooo += ooo;
    let pct = if packets > 0 {
        100.0 * lost as f64 / packets as f64
    } else {
        0.0
    };
    json!({"udp": {
        "socket": f.socket, "start": 0, "end": round6(sent_s), "seconds": round6(sent_s),
        "bytes": sent, "bits_per_second": bps(sent, sent_s), "jitter_ms": jitter_s * 1000.0,
        "lost_packets": lost, "packets": packets, "lost_percent": pct,
        "out_of_order": ooo, "sender": f.sender,
    }})
}

fn tcp_stream_end(
    f: &StreamFinal,
    pr: Option<&StreamResult>,
    acc: &mut Acc,
    (sent, sent_s): (u64, f64),
    (recv, recv_s): (u64, f64),
) -> Value {
    let mut sender = json!({"socket": f.socket, "start": 0, "end": round6(sent_s),
        "seconds": round6(sent_s), "bytes": sent, "bits_per_second": bps(sent, sent_s)});
    let retrans = if f.sender {
        f.tcp.map(|t| t.retransmits)
    } else {
        pr.and_then(|r| u64::try_from(r.retransmits).ok())
    };
    // iperf3 3.21 writes the TCP_INFO figures with `retransmits`, when
    // the sending side's retransmits are known: always for this side's
    // senders, for the peer's once its results came (a client's document),
    // never on a server for what the client sent (its document is written
    // before the client's results arrive). Where the sender is the peer
    // they are zeros (its TCP_INFO stays there).
    if let Some(r) = retrans {
        sender["retransmits"] = json!(r);
        *acc.retrans.get_or_insert(0) += r;
        let t = if f.sender {
            f.tcp.unwrap_or_default()
        } else {
            TcpFinal::default()
        };
        sender["reorder"] = json!(t.reorder);
        sender["max_snd_cwnd"] = json!(t.max_snd_cwnd);
        sender["max_snd_wnd"] = json!(t.max_snd_wnd);
        sender["max_rtt"] = json!(t.max_rtt);
        sender["min_rtt"] = json!(t.min_rtt);
        sender["mean_rtt"] = json!(t.mean_rtt);
    }
    sender["sender"] = json!(f.sender);
    json!({
        "sender": sender,
        "receiver": {"socket": f.socket, "start": 0, "end": round6(recv_s), "seconds": round6(f.seconds),
                     "bytes": recv, "bits_per_second": bps(recv, recv_s), "sender": f.sender},
    })
}

/// A direction's `sum_sent`, `sum_received` and (UDP) legacy `sum`.
fn sums_json(a: &Acc, sends: bool, udp: bool) -> (Value, Value, Value) {
    let mut sent = json!({"start": 0, "end": round6(a.sent_s), "seconds": round6(a.sent_s),
                          "bytes": a.sent, "bits_per_second": bps(a.sent, a.sent_s)});
    let mut recv = json!({"start": 0, "end": round6(a.recv_s), "seconds": round6(a.recv_s),
                          "bytes": a.recv, "bits_per_second": bps(a.recv, a.recv_s)});
    let jitter = if a.n > 0 { a.jitter / a.n as f64 } else { 0.0 };
    let pct = if a.packets > 0 {
        100.0 * a.lost as f64 / a.packets as f64
    } else {
        0.0
    };
    let mut legacy = sent.clone();
    if udp {
        for (v, j, l, pc) in [
            (&mut sent, 0.0, 0, 0.0),
            (&mut recv, jitter, a.lost, pct),
            (&mut legacy, jitter, a.lost, pct),
        ] {
            v["jitter_ms"] = json!(j);
            v["lost_packets"] = json!(l);
            v["packets"] = json!(a.packets);
            v["lost_percent"] = json!(pc);
        }
        sent["sender"] = json!(true);
        recv["sender"] = json!(false);
        legacy["sender"] = json!(sends);
    } else {
        if let Some(r) = a.retrans {
            sent["retransmits"] = json!(r);
        }
        sent["sender"] = json!(sends);
        recv["sender"] = json!(sends);
    }
    (sent, recv, legacy)
}

/// `sender_tcp_congestion` / `receiver_tcp_congestion`.
fn congestion_json(
    end: &mut Map<String, Value>,
    finals: &[StreamFinal],
    peer: Option<&PeerResults>,
) {
    let local = finals.iter().find_map(|f| f.congestion.clone());
    let remote = peer.and_then(|r| r.congestion_used.clone());
    let (snd, rcv) = if finals.iter().any(|f| f.sender) {
        (local, remote)
    } else {
        (remote, local)
    };
    if let Some(c) = snd {
        end.insert("sender_tcp_congestion".into(), json!(c));
    }
    if let Some(c) = rcv {
        end.insert("receiver_tcp_congestion".into(), json!(c));
    }
}

/// RFC 1123 date in GMT, as iperf3 prints `start.timestamp.time`.
pub fn http_date(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs / 86400;
    let rem = secs % 86400;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A -J report of one test whose streams have these senders, ended
    /// with `peer`'s results (None: a server's document, written before
    /// the client's results arrive).
    fn end_of(
        role: Role,
        protocol: Protocol,
        mode: TestMode,
        finals: &[StreamFinal],
        peer: Option<&PeerResults>,
    ) -> Value {
        let addr: SocketAddr = "127.0.0.1:5201".parse().unwrap();
        let info = StartInfo {
            role,
            params: Params {
                protocol,
                mode,
                time_s: 2,
                parallel: 1,
                ..Params::default()
            },
            cookie: "c".repeat(36),
            system_info: String::new(),
            timestamp_secs: 0,
            peer_host: "127.0.0.1".into(),
            peer_port: 40000,
            tcp_mss_default: 0,
            sndbuf_actual: 0,
            rcvbuf_actual: 0,
            interval_s: 1.0,
            gso: false,
            gro: false,
            streams: finals
                .iter()
                .map(|f| StreamDesc {
                    id: f.id,
                    socket: f.socket,
                    sender: f.sender,
                    local: addr,
                    remote: addr,
                })
                .collect(),
            host: linerate_run::Host::here(),
        };
        let mode = OutputMode {
            json: true,
            ..OutputMode::default()
        };
        let mut r = Report::new(info, mode);
        let doc: Value =
            serde_json::from_str(&r.finish(finals, Cpu::default(), peer, &[])).unwrap();
        doc["end"].clone()
    }

    fn tcp_final(id: u32, socket: i32, sender: bool) -> StreamFinal {
        StreamFinal {
            id,
            socket,
            sender,
            bytes: 1_000_000,
            seconds: 2.0001,
            tcp: sender.then(|| TcpFinal {
                retransmits: 3,
                max_rtt: 90,
                min_rtt: 50,
                mean_rtt: 70,
                ..TcpFinal::default()
            }),
            ..StreamFinal::default()
        }
    }

    const TCP_INFO_KEYS: [&str; 7] = [
        "retransmits",
        "reorder",
        "max_snd_cwnd",
        "max_snd_wnd",
        "max_rtt",
        "min_rtt",
        "mean_rtt",
    ];

    /// An object's keys, sorted (the documents keep iperf3's order; these
    /// tests check which keys there are).
    fn keys(v: &Value) -> Vec<&str> {
        let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        k.sort_unstable();
        k
    }

    /// A server's document (no results from the client yet): the peer's
    /// half has this side's seconds (iperf3's fallback), not 0, and the
    /// client's sending streams carry no TCP_INFO keys (3.21 writes them
    /// only with known retransmits).
    #[test]
    fn server_end_has_its_own_seconds_and_no_peer_tcp_info() {
        let fin = [tcp_final(1, 5, false), tcp_final(3, 6, true)];
        let end = end_of(Role::Server, Protocol::Tcp, TestMode::Bidir, &fin, None);
        let (rx, tx) = (&end["streams"][0], &end["streams"][1]);
        for k in TCP_INFO_KEYS {
            assert!(rx["sender"].get(k).is_none(), "{k} in {}", rx["sender"]);
            assert!(
                tx["sender"].get(k).is_some(),
                "{k} missing in {}",
                tx["sender"]
            );
        }
        assert_eq!(tx["sender"]["max_rtt"], 90);
        for v in [
            &rx["sender"],
            &rx["receiver"],
            &tx["sender"],
            &tx["receiver"],
            &end["sum_sent"],
            &end["sum_received"],
            &end["sum_sent_bidir_reverse"],
            &end["sum_received_bidir_reverse"],
        ] {
            assert_eq!(v["seconds"], 2.0001, "{v}");
            assert_eq!(v["end"], 2.0001, "{v}");
        }
        assert_eq!(rx["sender"]["bytes"], 0);
        assert_eq!(tx["receiver"]["bytes"], 0);
        assert!(end["sum_sent"].get("retransmits").is_none());
        assert_eq!(end["sum_sent_bidir_reverse"]["retransmits"], 3);
    }

    /// UDP on a server: the sender's half (the client's) has the server's
    /// own seconds.
    #[test]
    fn udp_server_end_has_its_own_seconds() {
        let fin = [StreamFinal {
            id: 1,
            socket: 5,
            bytes: 1000,
            seconds: 2.01,
            packets: 10,
            ..StreamFinal::default()
        }];
        let end = end_of(Role::Server, Protocol::Udp, TestMode::Forward, &fin, None);
        for v in [
            &end["streams"][0]["udp"],
            &end["sum"],
            &end["sum_sent"],
            &end["sum_received"],
        ] {
            assert_eq!(v["seconds"], 2.01, "{v}");
        }
    }

    /// A client's document is as it was: the peer's seconds from its
    /// results, and the TCP_INFO keys (zeros) for the server's senders.
    #[test]
    fn client_end_takes_the_peer_figures() {
        let fin = [tcp_final(1, 5, false)];
        let peer = PeerResults {
            sender_has_retransmits: 1,
            streams: vec![StreamResult {
                id: 1,
                bytes: 1_200_000,
                retransmits: 7,
                end_time: 1.9,
                ..StreamResult::default()
            }],
            ..PeerResults::default()
        };
        let end = end_of(
            Role::Client,
            Protocol::Tcp,
            TestMode::Reverse,
            &fin,
            Some(&peer),
        );
        let s = &end["streams"][0]["sender"];
        assert_eq!(
            keys(s),
            [
                "bits_per_second",
                "bytes",
                "end",
                "max_rtt",
                "max_snd_cwnd",
                "max_snd_wnd",
                "mean_rtt",
                "min_rtt",
                "reorder",
                "retransmits",
                "seconds",
                "sender",
                "socket",
                "start"
            ]
        );
        assert_eq!(s["retransmits"], 7);
        assert_eq!(s["seconds"], 1.9);
        assert_eq!(s["max_rtt"], 0);
        assert_eq!(end["streams"][0]["receiver"]["seconds"], 2.0001);
    }

    #[test]
    fn dates() {
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(1_795_310_454), "Sun, 22 Nov 2026 01:20:54 GMT");
    }
}
