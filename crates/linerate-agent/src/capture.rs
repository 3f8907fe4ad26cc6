//! A configuration's `captures`: what arrived on a port from its
//! capture's start to its stop, kept in files of the agent's own
//! directory by the sinks' capture writer
//! (`linerate_traffic::pcap::CaptureWriter`), and handed back by
//! `/monitor/capture` as one pcap or pcapng file in arrival order.
//!
//! A port with an interface captures on a receive path of its own
//! (`crate::port_capture`, from the capture's start to its stop, whether
//! a flow receives there or not); then no flow's sink writes for it, so a
//! frame is kept once. A loopback port (no interface) is captured by the
//! sink of the flow receiving there while it runs (one at a time).
//! Either way a port's frames are every frame that arrived there (a
//! flow's or not), whole, with the kernel's receive time.
//! Interfaces hand frames up without their FCS; the capture writes each
//! frame with the FCS the wire carried (its CRC-32, computed), so a
//! frame's captured length is the model's frame size. Bounds: at most
//! [`FRAMES_MAX`] frames and [`BYTES_MAX`] bytes a port; where a bound cut
//! a capture, the capture's stop says so.

use crate::json::{Invalid, invalid};
use crate::model::Capture;
use linerate_traffic::pcap::CaptureWriter;
use std::path::{Path, PathBuf};

/// Most frames a port's capture keeps.
pub const FRAMES_MAX: u64 = 100_000;
/// Most bytes of frames a port's capture keeps (its answer's size).
pub const BYTES_MAX: u64 = 16 << 20;

/// The captures of a configuration: one slot per port of the plan.
#[derive(Debug)]
pub struct Captures {
    dir: PathBuf,
    next_file: u64,
    pub ports: Vec<PortCapture>,
}

#[derive(Debug, Default)]
pub struct PortCapture {
    /// The port's name.
    pub name: String,
    /// The configuration's capture of this port, if any.
    pub capture: Option<Capture>,
    pub started: bool,
    /// The flow whose sink captures for this port (one at a time, so a
    /// frame is kept once).
    pub writer_flow: Option<usize>,
    /// The files the sinks wrote, with the frames each could take.
    files: Vec<(PathBuf, u64)>,
    /// The port's interface when the port captures on a receive path of
    /// its own (`crate::port_capture`; not on loopback ports, whose
    /// flows' sinks write the capture).
    pub iface: Option<String>,
    /// That path, while the capture runs.
    own: Option<crate::port_capture::OwnCapture>,
}

/// A capture file a sink is to write.
#[derive(Debug, Clone)]
pub struct FileSpec {
    pub path: PathBuf,
    pub snaplen: u32,
    pub max_frames: u64,
}

impl Captures {
    /// An empty set in a new private directory.
    pub fn new(ports: usize) -> std::io::Result<Self> {
        let mut b = [0u8; 8];
        rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut b);
        let tag: String = b.iter().map(|x| format!("{x:02x}")).collect();
        let dir = std::env::temp_dir().join(format!("linerate-agent-{}-{tag}", std::process::id()));
        use std::os::unix::fs::DirBuilderExt;
        // Not there before (a name of our own), readable by us only.
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        Ok(Self {
            dir,
            next_file: 0,
            ports: (0..ports).map(|_| PortCapture::default()).collect(),
        })
    }

    /// Takes the configuration's captures (`names[i]` is port i's name).
    pub fn configure(&mut self, captures: &[Capture], names: &[String]) {
        self.clear_files();
        for (slot, name) in self.ports.iter_mut().zip(names) {
            *slot = PortCapture {
                name: name.clone(),
                capture: captures.iter().find(|c| c.ports.contains(name)).cloned(),
                ..PortCapture::default()
            };
        }
    }

    /// The ports' interfaces (`None`: a port without one, its flows'
    /// sinks capture): each capturing port then captures on a receive
    /// path of its own from its start to its stop.
    pub fn use_interfaces(&mut self, ifaces: Vec<Option<String>>) {
        for (slot, i) in self.ports.iter_mut().zip(ifaces) {
            slot.iface = i;
        }
    }

    fn clear_files(&mut self) {
        for p in &mut self.ports {
            // Its own path ended (and its file flushed) first.
            if let Some(o) = p.own.take() {
                let _ = o.stop();
            }
            for (f, _) in p.files.drain(..) {
                let _ = std::fs::remove_file(f);
            }
        }
    }

    /// Starts (or stops) the capture of `ports` (every capture port when
    /// empty); an overwriting capture drops what it held. A port with a
    /// receive path of its own has it started (or stopped) here; what went
    /// wrong on one that stopped comes back as warnings.
    pub fn set(&mut self, ports: &[usize], start: bool) -> Result<Vec<String>, Invalid> {
        let which: Vec<usize> = if ports.is_empty() {
            (0..self.ports.len())
                .filter(|&p| self.ports[p].capture.is_some())
                .collect()
        } else {
            ports.to_vec()
        };
        if let Some(&p) = which.iter().find(|&&p| self.ports[p].capture.is_none()) {
            return Err(invalid(
                "port.capture.port_names",
                format!(
                    "port '{}' has no capture in the configuration",
                    self.ports[p].name
                ),
            ));
        }
        let mut warnings = Vec::new();
        for &p in &which {
            let slot = &mut self.ports[p];
            let Some(c) = &slot.capture else { continue };
            let begins = start && !slot.started;
            if begins && c.overwrite {
                for (f, _) in slot.files.drain(..) {
                    let _ = std::fs::remove_file(f);
                }
            }
            if begins && let Some(iface) = slot.iface.clone() {
                self.start_own(p, &iface)?;
            }
            let slot = &mut self.ports[p];
            if !start
                && let Some(o) = slot.own.take()
                && let Some(e) = o.stop()
            {
                warnings.push(format!("capture of port '{}': {e}", slot.name));
            }
            slot.started = start;
            if !start {
                slot.writer_flow = None;
            }
        }
        Ok(warnings)
    }

    /// Port `p`'s own receive path on `iface`, started into a new file.
    fn start_own(&mut self, p: usize, iface: &str) -> Result<(), Invalid> {
        let mtu = linerate_backend::iface::mtu(iface).unwrap_or(1500);
        let Some(f) = self.next_file(p, mtu) else {
            return Ok(());
        };
        let name = self.ports[p].name.clone();
        let fail = |e: String| {
            invalid(
                "port.capture.port_names",
                format!("port '{name}' ({iface}): the capture: {e}"),
            )
        };
        let w = CaptureWriter::create(&f.path, f.snaplen, f.max_frames, false)
            .map_err(|e| fail(e.to_string()))?;
        let own =
            crate::port_capture::OwnCapture::start(iface, w).map_err(|e| fail(e.to_string()))?;
        self.ports[p].own = Some(own);
        Ok(())
    }

    /// The file flow `flow`'s sink on port `p` (MTU `mtu`) writes, if the
    /// port captures and no other running flow's sink writes for it
    /// (`running(f)`).
    pub fn file_for(
        &mut self,
        p: usize,
        flow: usize,
        mtu: usize,
        running: &dyn Fn(usize) -> bool,
    ) -> Option<FileSpec> {
        let slot = self.ports.get_mut(p)?;
        // A port capturing on its own path: it keeps every frame once.
        if slot.capture.is_none() || slot.iface.is_some() {
            return None;
        }
        if !slot.started || slot.writer_flow.is_some_and(|f| f != flow && running(f)) {
            return None;
        }
        let f = self.next_file(p, mtu)?;
        self.ports[p].writer_flow = Some(flow);
        Some(f)
    }

    /// A new file for port `p`'s capture (MTU `mtu`), bounded by what its
    /// earlier files hold; `None` once they hold the port's bound.
    fn next_file(&mut self, p: usize, mtu: usize) -> Option<FileSpec> {
        let slot = self.ports.get_mut(p)?;
        let c = slot.capture.as_ref()?;
        // Whole frames: the interface's largest (a VLAN tag included).
        let snaplen = c.packet_size.unwrap_or((mtu + 18) as u32).max(64);
        // What the port's earlier files hold counts against its bounds.
        let kept: u64 = slot
            .files
            .iter()
            .map(|(f, _)| read_file(f).map_or(0, |v| v.len() as u64))
            .sum();
        let max_frames = FRAMES_MAX
            .min(BYTES_MAX / u64::from(snaplen))
            .saturating_sub(kept);
        if max_frames == 0 {
            return None;
        }
        let path = self.dir.join(format!("port{p}-{}.pcap", self.next_file));
        self.next_file += 1;
        slot.files.push((path.clone(), max_frames));
        Some(FileSpec {
            path,
            snaplen,
            max_frames,
        })
    }

    /// Port `p`'s capture as one file (the configuration's format), and
    /// whether a bound cut it.
    pub fn read(&self, p: usize) -> Result<(Vec<u8>, bool), String> {
        let slot = &self.ports[p];
        let c = slot
            .capture
            .as_ref()
            .ok_or_else(|| "the port has no capture in the configuration".to_string())?;
        let mut frames: Vec<(u64, u32, Vec<u8>)> = Vec::new();
        let mut cut = false;
        for (f, max) in &slot.files {
            let got = read_file(f)?;
            cut |= got.len() as u64 >= *max;
            frames.extend(got);
        }
        frames.sort_by_key(|f| f.0);
        // The configuration's filters: what the port received that they
        // do not keep is left out (before the port's bounds).
        frames.retain(|f| crate::capture_filter::matches(&c.filters, &f.2));
        // The port's bounds over all its files.
        let mut bytes = 0u64;
        let keep = frames
            .iter()
            .take(FRAMES_MAX as usize)
            .take_while(|f| {
                bytes += f.2.len() as u64 + 4;
                bytes <= BYTES_MAX
            })
            .count();
        if keep < frames.len() {
            frames.truncate(keep);
            cut = true;
        }
        let snap = c.packet_size.map(|s| s as usize);
        Ok((write(&frames, c.pcapng, snap), cut))
    }

    /// Whether a bound cut port `p`'s capture.
    pub fn was_cut(&self, p: usize) -> bool {
        self.read(p).is_ok_and(|(_, cut)| cut)
    }
}

impl Drop for Captures {
    fn drop(&mut self) {
        self.clear_files();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A sink's capture file: (nanoseconds, original length, bytes) per frame.
/// A file not written (the flow failed first) is empty.
fn read_file(path: &Path) -> Result<Vec<(u64, u32, Vec<u8>)>, String> {
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut r = pcap_file::pcap::PcapReader::new(std::io::BufReader::new(f))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let res = r.header().ts_resolution;
    let mut out = Vec::new();
    while let Some(p) = r.next_raw_packet() {
        // A record cut short (the flow still writing): the frames before.
        let Ok(p) = p else { break };
        let Ok(p) = p.try_into_pcap_packet(res, u32::MAX) else {
            break;
        };
        out.push((
            p.timestamp.as_nanos() as u64,
            p.orig_len,
            p.data.into_owned(),
        ));
    }
    Ok(out)
}

/// The frames as a pcap (microseconds, the classic form every reader
/// takes) or pcapng file, each with its FCS appended when it was kept
/// whole, cut to `snap` bytes.
fn write(frames: &[(u64, u32, Vec<u8>)], pcapng: bool, snap: Option<usize>) -> Vec<u8> {
    let snaplen = snap.unwrap_or(65_535);
    let mut out = Vec::new();
    let with_fcs = |len: u32, data: &[u8]| -> (u32, Vec<u8>) {
        let mut v = data.to_vec();
        let mut orig = len;
        if data.len() == len as usize {
            v.extend_from_slice(&crc32fast::hash(data).to_le_bytes());
            orig += 4;
        }
        v.truncate(snaplen);
        (orig, v)
    };
    if pcapng {
        let mut w = pcap_file::pcapng::PcapNgWriter::new(&mut out).expect("writing to memory");
        let idb = pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock {
            linktype: pcap_file::DataLink::ETHERNET,
            snaplen: snaplen as u32,
            options: vec![],
        };
        w.write_pcapng_block(idb).expect("writing to memory");
        for (ns, len, data) in frames {
            let (orig, v) = with_fcs(*len, data);
            let epb = pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock {
                interface_id: 0,
                timestamp: std::time::Duration::from_nanos(*ns),
                original_len: orig,
                data: v.into(),
                options: vec![],
            };
            w.write_pcapng_block(epb).expect("writing to memory");
        }
    } else {
        let header = pcap_file::pcap::PcapHeader {
            snaplen: snaplen as u32,
            datalink: pcap_file::DataLink::ETHERNET,
            ts_resolution: pcap_file::TsResolution::MicroSecond,
            endianness: pcap_file::Endianness::Little,
            ..Default::default()
        };
        let mut w =
            pcap_file::pcap::PcapWriter::with_header(&mut out, header).expect("writing to memory");
        for (ns, len, data) in frames {
            let (orig, v) = with_fcs(*len, data);
            let p =
                pcap_file::pcap::PcapPacket::new(std::time::Duration::from_nanos(*ns), orig, &v);
            w.write_packet(&p).expect("writing to memory");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(pcapng: bool, packet_size: Option<u32>) -> Capture {
        Capture {
            name: "c".into(),
            ports: vec!["rx".into()],
            pcapng,
            overwrite: true,
            packet_size,
            filters: Vec::new(),
        }
    }

    /// Frames written by the sinks' writer come back in arrival order
    /// across files, each with its FCS, in both formats; a new start
    /// drops them (overwrite); a full file says it was cut.
    #[test]
    fn a_ports_frames_come_back_whole_in_order() {
        let mut c = Captures::new(2).unwrap();
        c.configure(&[cap(false, None)], &["tx".into(), "rx".into()]);
        assert!(c.file_for(1, 0, 1500, &|_| false).is_none(), "not started");
        c.set(&[], true).unwrap();
        assert!(c.file_for(0, 0, 1500, &|_| false).is_none(), "no capture");
        let a = c.file_for(1, 0, 1500, &|_| false).unwrap();
        assert!(
            c.file_for(1, 1, 1500, &|f| f == 0).is_none(),
            "flow 0 writes the port's frames"
        );
        let b = c.file_for(1, 1, 1500, &|_| false).unwrap();
        assert_eq!(a.snaplen, 1518);
        let frame = |n: u8| vec![n; 60 + usize::from(n)];
        let mut wa =
            linerate_traffic::pcap::CaptureWriter::create(&a.path, a.snaplen, 2, false).unwrap();
        wa.write(3_000, &frame(3));
        wa.write(1_000, &frame(1));
        wa.write(5_000, &frame(5));
        assert_eq!(wa.finish(), None);
        let mut wb =
            linerate_traffic::pcap::CaptureWriter::create(&b.path, b.snaplen, 9, false).unwrap();
        wb.write(2_000, &frame(2));
        assert_eq!(wb.finish(), None);
        // The file of two frames' bound (written by hand here) is full.
        c.ports[1].files[0].1 = 2;
        let (bytes, cut) = c.read(1).unwrap();
        assert!(cut, "file a reached its bound");
        let mut r = pcap_file::pcap::PcapReader::new(&bytes[..]).unwrap();
        let mut got = Vec::new();
        while let Some(p) = r.next_packet() {
            let p = p.unwrap();
            got.push((p.timestamp.as_micros(), p.data.len(), p.orig_len));
            let body = &p.data[..p.data.len() - 4];
            assert_eq!(
                &p.data[p.data.len() - 4..],
                crc32fast::hash(body).to_le_bytes()
            );
        }
        assert_eq!(got, [(1, 65, 65), (2, 66, 66), (3, 67, 67)]);
        c.ports[1].capture = Some(cap(true, Some(10)));
        let (ng, _) = c.read(1).unwrap();
        let mut r = pcap_file::pcapng::PcapNgReader::new(&ng[..]).unwrap();
        let mut n = 0;
        while let Some(b) = r.next_block() {
            if let pcap_file::pcapng::Block::EnhancedPacket(p) = b.unwrap() {
                assert_eq!(p.data.len(), 10, "packet_size cuts");
                n += 1;
            }
        }
        assert_eq!(n, 3);
        c.ports[1].capture = Some(cap(false, None));
        c.set(&[1], false).unwrap();
        c.set(&[1], true).unwrap();
        assert_eq!(c.read(1).unwrap().0.len(), 24, "overwritten: a header only");
        let dir = c.dir.clone();
        drop(c);
        assert!(!dir.exists(), "the directory goes with the captures");
    }
}
