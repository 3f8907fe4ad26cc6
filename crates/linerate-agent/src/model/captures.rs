//! The model's `captures`: the ports whose received frames are kept.

use super::ports::{PORTS_MAX, Port, name, port_names};
use crate::json::{Invalid, Obj, invalid};

/// A `captures` entry: the ports whose received frames are kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Capture {
    pub name: String,
    pub ports: Vec<String>,
    pub pcapng: bool,
    /// Replace the last capture (the model's default); false keeps the
    /// frames of earlier starts too.
    pub overwrite: bool,
    /// Bytes kept of each frame (the model's `packet_size`; none: whole).
    pub packet_size: Option<u32>,
    /// Its `filters`' tests (`crate::capture_filter`): the frames kept
    /// pass them all.
    pub filters: Vec<crate::capture_filter::FieldMatch>,
}

/// Most frames a port's capture keeps.
pub const CAPTURE_FRAMES_MAX: u64 = 100_000;

pub(super) fn captures(o: &Obj, ports: &[Port]) -> Result<Vec<Capture>, Invalid> {
    let mut out: Vec<Capture> = Vec::new();
    for (i, c) in o
        .list("captures", PORTS_MAX)?
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let c = Obj::new(&format!("captures[{i}]"), c)?;
        let name = name(&c)?;
        let names = port_names(&c, "port_names", ports)?;
        for n in &names {
            if out.iter().any(|e| e.ports.contains(n)) {
                return Err(invalid(
                    &c.at("port_names"),
                    format!("port '{n}' is in two captures"),
                ));
            }
        }
        let pcapng = match c.str("format")?.unwrap_or("pcap") {
            "pcap" => false,
            "pcapng" => true,
            f => {
                return Err(invalid(
                    &c.at("format"),
                    format!("'{f}' is not a format (pcap, pcapng)"),
                ));
            }
        };
        let overwrite = c.bool("overwrite")?.unwrap_or(true);
        let packet_size = c.u64("packet_size")?;
        if let Some(p) = packet_size
            && !(1..=65_535).contains(&p)
        {
            return Err(invalid(
                &c.at("packet_size"),
                format!("{p}: 1 to 65535 bytes of each frame"),
            ));
        }
        let filters = crate::capture_filter::read(&c)?;
        c.done()?;
        out.push(Capture {
            name,
            ports: names,
            pcapng,
            overwrite,
            packet_size: packet_size.map(|p| p as u32),
            filters,
        });
    }
    Ok(out)
}
