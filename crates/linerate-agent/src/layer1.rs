//! A configuration's `layer1`: what the agent applies to its ports'
//! interfaces (MTU, promiscuous reception), what it checks and reports as
//! warnings (speed, auto-negotiation, media), and the interfaces' former
//! settings, put back at the next configuration and when the agent ends.

use crate::json::{Invalid, invalid};
use crate::model::{Config, SPEEDS};
use crate::plan::{Options, PlanPort, speed_bps};
use linerate_backend::iface;
use linerate_packet::BackendKind;

/// An interface's settings before the agent changed them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Former {
    pub iface: String,
    pub mtu: Option<usize>,
    pub promiscuous: Option<bool>,
}

/// Applies `cfg`'s layer1 to `ports` (the plan's, in the model's order):
/// the warnings, and what to put back. On an error, what was already
/// changed is put back before it returns.
pub fn apply(
    cfg: &Config,
    ports: &[PlanPort],
    opts: &Options,
) -> Result<(Vec<String>, Vec<Former>), Invalid> {
    let mut warnings = Vec::new();
    let mut former: Vec<Former> = Vec::new();
    for (i, l) in cfg.layer1.iter().enumerate() {
        let path = format!("layer1[{i}]");
        for name in &l.ports {
            let port = ports
                .iter()
                .find(|p| &p.name == name)
                .expect("checked by the model");
            if port.remote.is_some() {
                warnings.push(format!(
                    "{path}: port '{name}' is on a peer agent: its layer1 is not applied"
                ));
                continue;
            }
            if opts.tx_backend == BackendKind::Loopback {
                // Test ports: no interface to set.
                continue;
            }
            let ifc = port.iface.as_str();
            if let Some(s) = &l.speed {
                let want = SPEEDS.iter().find(|(n, _)| n == s).map(|(_, b)| *b);
                match speed_bps(ifc) {
                    None => warnings.push(format!(
                        "{path}.speed: {ifc} reports no speed (a virtual interface): '{s}' not checked"
                    )),
                    Some(b) if Some(b) != want => warnings.push(format!(
                        "{path}.speed: {ifc} runs at {} Mb/s, not '{s}' (the agent does not set a link's speed)",
                        b / 1_000_000
                    )),
                    Some(_) => {}
                }
            }
            if let Some(a) = l.auto_negotiate {
                match linerate_backend::ethtool::autoneg(ifc) {
                    Ok(now) if now == a => {}
                    Ok(now) => warnings.push(format!(
                        "{path}.auto_negotiate: {ifc} {} (the agent does not set negotiation)",
                        if now { "auto-negotiates" } else { "does not auto-negotiate" }
                    )),
                    Err(e) => warnings.push(format!(
                        "{path}.auto_negotiate: {a} not checked: {ifc}'s link settings cannot be read ({e})"
                    )),
                }
            }
            for n in &l.noted {
                warnings.push(format!("{path}: {n} not applied to {ifc}"));
            }
            let mut was = Former {
                iface: ifc.to_string(),
                mtu: None,
                promiscuous: None,
            };
            let step = set_mtu(ifc, l.mtu as usize, &mut was)
                .and_then(|()| set_promiscuous(ifc, l.promiscuous, &mut was));
            former.push(was);
            if let Err(why) = step {
                restore(&former);
                return Err(invalid(&path, why));
            }
        }
    }
    Ok((warnings, former))
}

fn set_mtu(ifc: &str, mtu: usize, was: &mut Former) -> Result<(), String> {
    let now = iface::mtu(ifc).map_err(|e| format!("{ifc}'s MTU: {e}"))?;
    if now == mtu {
        return Ok(());
    }
    iface::set_mtu(ifc, mtu)
        .map_err(|e| format!("mtu: {ifc} does not take an MTU of {mtu}: {e}"))?;
    was.mtu = Some(now);
    Ok(())
}

fn set_promiscuous(ifc: &str, on: bool, was: &mut Former) -> Result<(), String> {
    let now = iface::promiscuous(ifc).map_err(|e| format!("{ifc}'s flags: {e}"))?;
    if now == on {
        return Ok(());
    }
    iface::set_promiscuous(ifc, on)
        .map_err(|e| format!("promiscuous: {ifc} could not be set to {on}: {e}"))?;
    was.promiscuous = Some(now);
    Ok(())
}

/// Puts the interfaces' former settings back (latest change first); an
/// interface gone meanwhile is passed over.
pub fn restore(former: &[Former]) {
    for f in former.iter().rev() {
        if let Some(m) = f.mtu {
            let _ = iface::set_mtu(&f.iface, m);
        }
        if let Some(p) = f.promiscuous {
            let _ = iface::set_promiscuous(&f.iface, p);
        }
    }
}
