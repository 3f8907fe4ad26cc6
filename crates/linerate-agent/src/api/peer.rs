//! The routes a peer agent calls (`/linerate/port`, `/linerate/rx/*`:
//! `crate::peer`).

use super::{Agent, Reply};
use crate::json::{Invalid, Obj, invalid};
use serde_json::Value;

impl Agent {
    /// The routes a peer agent calls (`crate::peer`).
    pub(super) fn peer_route(&self, path: &str, body: &[u8]) -> Reply {
        let doc: Value = match crate::json::parse(body) {
            Ok(v) => v,
            Err(e) => return Reply::error(400, format!("the body is not JSON as taken: {e}")),
        };
        let o = match Obj::new("", &doc) {
            Ok(o) => o,
            Err(e) => return Reply::invalid(e),
        };
        let r = match path {
            "/linerate/port" => self.port_facts(&o).map(|f| Reply::typed(&f)),
            "/linerate/rx/start" => self
                .receivers
                .start(
                    &o,
                    &self.opts.allow,
                    (self.opts.rx_backend, &self.opts.wires),
                    self.opts.run_max,
                )
                .map(|id| Reply::typed(&id)),
            "/linerate/rx/counts" => self.receivers.counts(&o).map(|c| Reply::typed(&c)),
            _ => self.receivers.stop(&o).map(|c| Reply::typed(&c)),
        };
        r.unwrap_or_else(Reply::invalid)
    }

    /// `/linerate/port`: an allowed interface's MAC and link.
    fn port_facts(&self, o: &Obj) -> Result<crate::peer::PortFacts, Invalid> {
        let iface = o.str("iface")?.unwrap_or("").to_string();
        o.done()?;
        if !self.opts.allow.contains(&iface) {
            return Err(invalid(
                "iface",
                format!("'{iface}' is not an interface this agent may use"),
            ));
        }
        let mac = linerate_backend::iface::mac(&iface)
            .map_err(|e| invalid("iface", format!("{iface}: {e}")))?;
        Ok(crate::peer::PortFacts {
            mac: linerate_backend::iface::format_mac(mac),
            up: linerate_backend::iface::is_up(&iface).unwrap_or(false),
        })
    }
}
