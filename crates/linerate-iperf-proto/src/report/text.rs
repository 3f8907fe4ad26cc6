//! iperf3's human layout: interval lines, headers and the summary.

use super::*;

impl Report {
    pub(super) fn rate(&self, bytes: u64, secs: f64, per_sec: bool) -> String {
        let v = if per_sec {
            if secs > 0.0 { bytes as f64 / secs } else { 0.0 }
        } else {
            bytes as f64
        };
        units::with_format(v, per_sec, self.mode.format)
    }

    pub(super) fn interval_line(&self, tag: &str, s: &IntervalSample, with_cwnd: bool) -> String {
        let secs = s.end - s.start;
        let base = format!(
            "[{tag}] {:6.2}-{:<6.2} sec  {}  {}",
            s.start,
            s.end,
            self.rate(s.bytes, secs, false),
            self.rate(s.bytes, secs, true)
        );
        let omitted = if s.omitted { "  (omitted)" } else { "" };
        if let Some(rx) = &s.udp_rx {
            let pct = if rx.packets > 0 {
                100.0 * rx.lost as f64 / rx.packets as f64
            } else {
                0.0
            };
            format!(
                "{base}  {:5.3} ms  {}/{} ({:.2}%){omitted}\n",
                rx.jitter_ms, rx.lost, rx.packets, pct
            )
        } else if let Some(n) = s.udp_tx_packets {
            format!("{base}  {n}{omitted}\n")
        } else if let Some(t) = &s.tcp {
            if with_cwnd {
                format!(
                    "{base}  {:3}   {}{omitted}\n",
                    t.retransmits,
                    units::bytes(t.snd_cwnd as f64)
                )
            } else {
                // iperf3's [SUM] line: retransmits, no window.
                format!("{base}  {:3}{omitted}\n", t.retransmits)
            }
        } else {
            format!("{base}{omitted}\n")
        }
    }

    pub(super) fn header(&self, samples: &[IntervalSample]) -> String {
        let h = self.header_plain(samples);
        if self.info.params.mode == TestMode::Bidir {
            h.replacen("[ ID] Interval", "[ ID][Role] Interval", 1)
        } else {
            h
        }
    }

    fn header_plain(&self, samples: &[IntervalSample]) -> String {
        let udp = self.info.params.protocol == Protocol::Udp;
        let any_rx = samples.iter().any(|s| !s.sender);
        let any_tx = samples.iter().any(|s| s.sender);
        match (udp, any_tx, any_rx) {
            (true, true, false) => "[ ID] Interval           Transfer     Bitrate         Total Datagrams\n".into(),
            (true, _, _) => "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n".into(),
            // iperf3's client always has the TCP columns (blank when it
            // receives); its server only when it sends.
            (false, _, _) if self.info.role == Role::Client => {
                "[ ID] Interval           Transfer     Bitrate         Retr  Cwnd\n".into()
            }
            (false, true, _) if samples.iter().any(|s| s.tcp.is_some()) => {
                "[ ID] Interval           Transfer     Bitrate         Retr  Cwnd\n".into()
            }
            _ => "[ ID] Interval           Transfer     Bitrate\n".into(),
        }
    }

    pub(super) fn end_text(
        &self,
        finals: &[StreamFinal],
        peer: Option<&PeerResults>,
        cpu: Cpu,
    ) -> String {
        let udp = self.info.params.protocol == Protocol::Udp;
        // With -P > 1 (or --bidir) the last interval already ended with the
        // separator; iperf3 prints it once.
        let mut out = if self.separator_last {
            String::new()
        } else {
            String::from("- - - - - - - - - - - - - - - - - - - - - - - - -\n")
        };
        if self.mode.verbose {
            out.push_str("Test Complete. Summary Results:\n");
        }
        out.push_str(if udp {
            "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n"
        } else if self.info.role == Role::Client
            || finals.iter().any(|f| f.sender && f.tcp.is_some())
        {
            "[ ID] Interval           Transfer     Bitrate         Retr\n"
        } else {
            "[ ID] Interval           Transfer     Bitrate\n"
        });
        let bidir = self.info.params.mode == TestMode::Bidir;
        if bidir {
            let at = out.rfind("[ ID] Interval").unwrap_or(0);
            out.replace_range(at..at + "[ ID] Interval".len(), "[ ID][Role] Interval");
        }
        let rows: Vec<EndRow> = finals.iter().map(|f| self.end_row(f, peer)).collect();
        if bidir {
            // Each direction's streams, then its [SUM], tagged by role.
            // In stream order: the client's first streams send, the
            // server's first streams receive.
            let first = rows.first().is_none_or(|r| r.sender);
            for sending in [first, !first] {
                let group: Vec<&EndRow> = rows.iter().filter(|r| r.sender == sending).collect();
                for r in &group {
                    let tag = format!("{:3}]{}", r.socket, self.role_tag(sending));
                    out.push_str(&self.with_diskfile_line(self.end_lines(&tag, r, udp), r));
                }
                if group.len() > 1 {
                    let tag = format!("SUM]{}", self.role_tag(sending));
                    out.push_str(&self.end_lines(&tag, &EndRow::sum(&group), udp));
                }
            }
        } else {
            for r in &rows {
                let lines = self.end_lines(&format!("{:3}", r.socket), r, udp);
                out.push_str(&self.with_diskfile_line(lines, r));
            }
            if rows.len() > 1 {
                let all: Vec<&EndRow> = rows.iter().collect();
                out.push_str(&self.end_lines("SUM", &EndRow::sum(&all), udp));
            }
        }
        if self.mode.verbose {
            out.push_str(&self.verbose_end(finals, peer, cpu));
        }
        if let Some(e) = &self.error {
            let _ = writeln!(out, "linerate: error: {e}");
        }
        out
    }

    /// `-V` after the summary, as iperf3 3.21: the CPU line from a side
    /// that sends (two with --bidir), then (TCP) the sender's and the
    /// receiver's congestion control algorithm where known.
    fn verbose_end(&self, finals: &[StreamFinal], peer: Option<&PeerResults>, cpu: Cpu) -> String {
        let mut out = String::new();
        let bidir = self.info.params.mode == TestMode::Bidir;
        let sends = match self.info.role {
            Role::Client => self.info.params.mode != TestMode::Reverse,
            Role::Server => self.info.params.mode != TestMode::Forward,
        };
        let remote = peer.map_or(Cpu::default(), |p| Cpu {
            total: p.cpu_util_total,
            user: p.cpu_util_user,
            system: p.cpu_util_system,
        });
        let line = |mine: &str, theirs: &str| {
            format!(
                "CPU Utilization: local/{mine} {:.1}% ({:.1}%u/{:.1}%s), remote/{theirs} {:.1}% ({:.1}%u/{:.1}%s)\n",
                cpu.total, cpu.user, cpu.system, remote.total, remote.user, remote.system
            )
        };
        if sends {
            out.push_str(&line("sender", "receiver"));
            if bidir {
                out.push_str(&line("receiver", "sender"));
            }
        }
        if self.info.params.protocol == Protocol::Tcp {
            let local = finals.iter().find_map(|f| f.congestion.clone());
            let theirs = peer.and_then(|p| p.congestion_used.clone());
            let (snd, rcv) = if sends {
                (local, theirs)
            } else {
                (theirs, local)
            };
            if let Some(c) = snd {
                let _ = writeln!(out, "snd_tcp_congestion {c}");
            }
            if let Some(c) = rcv {
                let _ = writeln!(out, "rcv_tcp_congestion {c}");
            }
        }
        out
    }
}

/// One stream's summary figures, both sides of it.
#[derive(Debug, Clone, Default)]
pub(super) struct EndRow {
    socket: i32,
    sender: bool,
    /// The sending side's bytes and seconds; the receiving side's.
    sent: (u64, f64),
    received: (u64, f64),
    /// Whether each side's figures are known (the peer's arrive with its
    /// results; a server prints before them).
    sent_known: bool,
    received_known: bool,
    retransmits: Option<u64>,
    /// UDP: sender's datagrams, lost, jitter (s).
    packets: u64,
    lost: u64,
    jitter_s: f64,
}

impl EndRow {
    fn sum(rows: &[&EndRow]) -> EndRow {
        let mut s = EndRow {
            sender: rows[0].sender,
            sent_known: rows.iter().all(|r| r.sent_known),
            received_known: rows.iter().all(|r| r.received_known),
            ..Default::default()
        };
        for r in rows {
            s.sent.0 += r.sent.0;
            s.sent.1 = s.sent.1.max(r.sent.1);
            s.received.0 += r.received.0;
            s.received.1 = s.received.1.max(r.received.1);
            if let Some(x) = r.retransmits {
                *s.retransmits.get_or_insert(0) += x;
            }
            s.packets += r.packets;
            s.lost += r.lost;
            s.jitter_s += r.jitter_s / rows.len() as f64;
        }
        s
    }
}

impl Report {
    /// A stream's figures for the summary: its own and the peer's.
    fn end_row(&self, f: &StreamFinal, peer: Option<&PeerResults>) -> EndRow {
        let udp = self.info.params.protocol == Protocol::Udp;
        let pr = peer.and_then(|r| r.stream(f.id));
        let peer_fig = pr.map(|r| (r.bytes, r.end_time - r.start_time));
        let own = (f.bytes, f.seconds);
        let (sent, received, sent_known, received_known) = if f.sender {
            (
                own,
                peer_fig.unwrap_or((0, f.seconds)),
                true,
                peer_fig.is_some(),
            )
        } else {
            (
                peer_fig.unwrap_or((0, f.seconds)),
                own,
                peer_fig.is_some(),
                true,
            )
        };
        let retransmits = if f.sender {
            f.tcp.map(|t| t.retransmits)
        } else {
            pr.and_then(|r| u64::try_from(r.retransmits).ok())
        };
        let (lost, packets, jitter_s) = if !udp {
            (0, 0, 0.0)
        } else if f.sender {
            let r = pr.cloned().unwrap_or_default();
            (
                r.errors.saturating_sub(r.omitted_errors),
                f.packets - f.omitted_packets,
                r.jitter_s,
            )
        } else {
            let pk = pr.map_or(f.packets - f.omitted_packets, |r| {
                r.packets.saturating_sub(r.omitted_packets)
            });
            (f.errors.saturating_sub(f.omitted_errors), pk, f.jitter_s)
        };
        EndRow {
            socket: f.socket,
            sender: f.sender,
            sent,
            received,
            sent_known,
            received_known,
            retransmits,
            packets,
            lost,
            jitter_s,
        }
    }

    /// A stream's (or a [SUM]'s) sender and receiver lines, each printed
    /// when that side's figures are known.
    /// `-F`: iperf3's line under a stream's first summary row: what this
    /// side moved of the file (sent, or received), units without the
    /// plural s as iperf3 prints them.
    fn with_diskfile_line(&self, mut lines: String, r: &EndRow) -> String {
        let Some((name, size)) = &self.diskfile else {
            return lines;
        };
        let moved = if r.sender { r.sent.0 } else { r.received.0 };
        let unit = |n: u64| {
            let b = crate::units::bytes(n as f64);
            b.strip_suffix('s').map_or(b.clone(), str::to_string)
        };
        let line = format!(
            "        Sent {} / {} ({}%) of {name}\n",
            unit(moved),
            unit(*size),
            diskfile_percent(moved, *size)
        );
        let at = lines.find('\n').map_or(lines.len(), |i| i + 1);
        lines.insert_str(at, &line);
        lines
    }

    fn end_lines(&self, tag: &str, r: &EndRow, udp: bool) -> String {
        let line = |secs: f64, bytes: u64, tail: String| {
            format!(
                "[{tag}]   0.00-{:<6.2} sec  {}  {}{tail}\n",
                secs,
                self.rate(bytes, secs, false),
                self.rate(bytes, secs, true)
            )
        };
        let mut out = String::new();
        if udp {
            let pct = if r.packets > 0 {
                100.0 * r.lost as f64 / r.packets as f64
            } else {
                0.0
            };
            if r.sent_known {
                out.push_str(&line(
                    r.sent.1,
                    r.sent.0,
                    format!("  {:5.3} ms  0/{} (0%)  sender", 0.0, r.packets),
                ));
            }
            if r.received_known {
                out.push_str(&line(
                    r.received.1,
                    r.received.0,
                    format!(
                        "  {:5.3} ms  {}/{} ({pct:.2}%)  receiver",
                        r.jitter_s * 1000.0,
                        r.lost,
                        r.packets
                    ),
                ));
            }
        } else {
            if r.sent_known {
                let retr = r
                    .retransmits
                    .map(|x| format!("  {x:3}"))
                    .unwrap_or_default();
                out.push_str(&line(
                    r.sent.1,
                    r.sent.0,
                    format!("{retr}             sender"),
                ));
            }
            if r.received_known {
                out.push_str(&line(
                    r.received.1,
                    r.received.0,
                    "                  receiver".into(),
                ));
            }
        }
        out
    }
}
