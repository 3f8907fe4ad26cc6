//! The model's ports and their `layer1` settings; a name and a port
//! reference as every part of the model reads them.

use crate::json::{Invalid, Obj, invalid};
use serde_json::Value;

/// Most ports one configuration may hold, and receive ports per flow.
pub const PORTS_MAX: usize = 16;
/// A `layer1` entry: settings for some ports' links.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer1 {
    pub name: String,
    pub ports: Vec<String>,
    /// The model's speed name (`speed_1_gbps` …): checked against the
    /// interface, a warning where it differs.
    pub speed: Option<String>,
    /// Whether the client asked for auto-negotiation (`auto_negotiate`):
    /// checked, a warning where it cannot be.
    pub auto_negotiate: Option<bool>,
    /// The MTU to set (the model's default is 1500).
    pub mtu: u32,
    /// Promiscuous reception (the model's default is true).
    pub promiscuous: bool,
    /// Fields given that the agent reports rather than applies
    /// (`media`, `ieee_media_defaults`, `auto_negotiation`).
    pub noted: Vec<String>,
}

/// The model's link speeds, in bits per second.
pub const SPEEDS: &[(&str, u64)] = &[
    ("speed_10_fd_mbps", 10_000_000),
    ("speed_10_hd_mbps", 10_000_000),
    ("speed_100_fd_mbps", 100_000_000),
    ("speed_100_hd_mbps", 100_000_000),
    ("speed_1_gbps", 1_000_000_000),
    ("speed_10_gbps", 10_000_000_000),
    ("speed_25_gbps", 25_000_000_000),
    ("speed_40_gbps", 40_000_000_000),
    ("speed_50_gbps", 50_000_000_000),
    ("speed_100_gbps", 100_000_000_000),
    ("speed_200_gbps", 200_000_000_000),
    ("speed_400_gbps", 400_000_000_000),
    ("speed_800_gbps", 800_000_000_000),
];

/// Largest MTU the agent sets (a jumbo frame of 9216 bytes less its
/// Ethernet header and FCS).
pub const MTU_MAX: u32 = 9198;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    pub name: String,
    /// The interface (or `https://agent:port/iface` on another agent).
    pub location: String,
}

/// Port `i`: the port (when its name could be read, so flows naming it
/// are not refused for it) and its errors.
pub(super) fn port(i: usize, v: &Value, ports: &[Port]) -> (Option<Port>, Vec<Invalid>) {
    let p = match Obj::new(&format!("ports[{i}]"), v) {
        Ok(p) => p,
        Err(e) => return (None, vec![e]),
    };
    let name = match name(&p) {
        Ok(n) => n,
        Err(e) => return (None, vec![e]),
    };
    let mut errs = Vec::new();
    let location = match p.str("location") {
        Ok(Some(l)) => l.to_string(),
        Ok(None) => {
            errs.push(invalid(
                &p.at("location"),
                "required: the interface the port is",
            ));
            String::new()
        }
        Err(e) => {
            errs.push(e);
            String::new()
        }
    };
    if let Err(e) = p.done() {
        errs.push(e);
    }
    if ports.iter().any(|q: &Port| q.name == name) {
        errs.push(invalid(&p.at("name"), format!("'{name}' names two ports")));
        return (None, errs);
    }
    (Some(Port { name, location }), errs)
}

/// The port names of `key` in `o` (each a port of `ports`, none twice).
pub(super) fn port_names(
    o: &Obj,
    key: &'static str,
    ports: &[Port],
) -> Result<Vec<String>, Invalid> {
    let mut out: Vec<String> = Vec::new();
    for (i, n) in o
        .strs(key, PORTS_MAX)?
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let path = format!("{}[{i}]", o.at(key));
        let n = port_ref(&path, n, ports)?;
        if out.contains(&n) {
            return Err(invalid(&path, format!("'{n}' is named twice")));
        }
        out.push(n);
    }
    Ok(out)
}

pub(super) fn layer1(o: &Obj, ports: &[Port]) -> Result<Vec<Layer1>, Invalid> {
    let mut out: Vec<Layer1> = Vec::new();
    for (i, l) in o
        .list("layer1", PORTS_MAX)?
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let l = Obj::new(&format!("layer1[{i}]"), l)?;
        let name = name(&l)?;
        let names = port_names(&l, "port_names", ports)?;
        for n in &names {
            if out.iter().any(|e| e.ports.contains(n)) {
                return Err(invalid(
                    &l.at("port_names"),
                    format!("port '{n}' is in two layer1 entries"),
                ));
            }
        }
        let speed = l.str("speed")?.map(str::to_string);
        if let Some(s) = &speed
            && !SPEEDS.iter().any(|(n, _)| n == s)
        {
            return Err(invalid(
                &l.at("speed"),
                format!("'{s}' is not one of the model's speeds"),
            ));
        }
        let mtu = l.u64("mtu")?.unwrap_or(1500);
        if !(68..=u64::from(MTU_MAX)).contains(&mtu) {
            return Err(invalid(
                &l.at("mtu"),
                format!("{mtu}: an MTU of 68 to {MTU_MAX} bytes"),
            ));
        }
        let promiscuous = l.bool("promiscuous")?.unwrap_or(true);
        let auto_negotiate = l.bool("auto_negotiate")?;
        let mut noted = Vec::new();
        if let Some(m) = l.str("media")? {
            if !["copper", "fiber", "sgmii"].contains(&m) {
                return Err(invalid(&l.at("media"), format!("'{m}' is not a media")));
            }
            noted.push(format!("media '{m}'"));
        }
        if l.bool("ieee_media_defaults")? == Some(true) {
            noted.push("ieee_media_defaults".to_string());
        }
        if l.raw("auto_negotiation").is_some() {
            noted.push("auto_negotiation's settings".to_string());
        }
        if l.raw("flow_control").is_some() {
            return Err(invalid(
                &l.at("flow_control"),
                "not supported by linerate agent (it does not set pause frames)",
            ));
        }
        l.done()?;
        out.push(Layer1 {
            name,
            ports: names,
            speed,
            auto_negotiate,
            mtu: mtu as u32,
            promiscuous,
            noted,
        });
    }
    Ok(out)
}

pub(super) fn name(o: &Obj) -> Result<String, Invalid> {
    let n = o
        .str("name")?
        .ok_or_else(|| invalid(&o.at("name"), "required"))?;
    if n.is_empty() || n.len() > 128 || n.chars().any(char::is_control) {
        return Err(invalid(
            &o.at("name"),
            "a name is 1 to 128 characters, none of them control characters",
        ));
    }
    Ok(n.to_string())
}

pub(super) fn port_ref(path: &str, n: &str, ports: &[Port]) -> Result<String, Invalid> {
    if ports.iter().any(|p| p.name == n) {
        Ok(n.to_string())
    } else {
        Err(invalid(path, format!("no port is named '{n}'")))
    }
}
