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
        } else if let (Some(t), true) = (&s.tcp, with_cwnd) {
            format!(
                "{base}  {:3}   {}{omitted}\n",
                t.retransmits,
                units::bytes(t.snd_cwnd as f64)
            )
        } else {
            format!("{base}{omitted}\n")
        }
    }

    pub(super) fn header(&self, samples: &[IntervalSample]) -> String {
        let udp = self.info.params.protocol == Protocol::Udp;
        let any_rx = samples.iter().any(|s| !s.sender);
        let any_tx = samples.iter().any(|s| s.sender);
        match (udp, any_tx, any_rx) {
            (true, true, false) => "[ ID] Interval           Transfer     Bitrate         Total Datagrams\n".into(),
            (true, _, _) => "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n".into(),
            (false, true, _) if samples.iter().any(|s| s.tcp.is_some()) => {
                "[ ID] Interval           Transfer     Bitrate         Retr  Cwnd\n".into()
            }
            _ => "[ ID] Interval           Transfer     Bitrate\n".into(),
        }
    }

    pub(super) fn end_text(&self, finals: &[StreamFinal], peer: Option<&PeerResults>) -> String {
        let udp = self.info.params.protocol == Protocol::Udp;
        let mut out = String::from("- - - - - - - - - - - - - - - - - - - - - - - - -\n");
        out.push_str(if udp {
            "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n"
        } else if finals.iter().any(|f| f.sender && f.tcp.is_some()) {
            "[ ID] Interval           Transfer     Bitrate         Retr\n"
        } else {
            "[ ID] Interval           Transfer     Bitrate\n"
        });
        let line = |tag: String, secs: f64, bytes: u64, tail: String| {
            format!(
                "[{tag}]   0.00-{:<6.2} sec  {}  {}{tail}\n",
                secs,
                self.rate(bytes, secs, false),
                self.rate(bytes, secs, true)
            )
        };
        for f in finals {
            let pr = peer.and_then(|r| r.stream(f.id));
            let tag = format!("{:3}", f.socket);
            let peer_bytes = pr.map(|r| r.bytes);
            let peer_secs = pr.map_or(f.seconds, |r| r.end_time - r.start_time);
            if udp {
                let (lost, packets, jitter) = if f.sender {
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
                let pct = if packets > 0 {
                    100.0 * lost as f64 / packets as f64
                } else {
                    0.0
                };
                let tail = |who: &str| {
                    format!(
                        "  {:5.3} ms  {lost}/{packets} ({pct:.2}%)  {who}",
                        jitter * 1000.0
                    )
                };
                let (sb, ss, rb, rs) = if f.sender {
                    (f.bytes, f.seconds, peer_bytes.unwrap_or(0), peer_secs)
                } else {
                    (peer_bytes.unwrap_or(0), peer_secs, f.bytes, f.seconds)
                };
                out.push_str(&line(
                    tag.clone(),
                    ss,
                    sb,
                    format!("  {:5.3} ms  0/{packets} (0%)  sender", 0.0),
                ));
                out.push_str(&line(tag, rs, rb, tail("receiver")));
            } else {
                let (sb, ss, rb, rs) = if f.sender {
                    (f.bytes, f.seconds, peer_bytes.unwrap_or(0), peer_secs)
                } else {
                    (peer_bytes.unwrap_or(0), peer_secs, f.bytes, f.seconds)
                };
                let retr = if f.sender {
                    f.tcp
                        .map(|t| format!("  {:3}", t.retransmits))
                        .unwrap_or_default()
                } else {
                    pr.and_then(|r| u64::try_from(r.retransmits).ok())
                        .map(|r| format!("  {r:3}"))
                        .unwrap_or_default()
                };
                out.push_str(&line(
                    tag.clone(),
                    ss,
                    sb,
                    format!("{retr}             sender"),
                ));
                if peer.is_some() || !f.sender {
                    out.push_str(&line(tag, rs, rb, "                  receiver".into()));
                }
            }
        }
        if let Some(e) = &self.error {
            let _ = writeln!(out, "linerate: error: {e}");
        }
        out
    }
}
