//! The model's emulated devices (`devices[].ethernets[]` with their IPv4
//! and IPv6 addresses and gateways) and the flows between them
//! (`tx_rx.device`): read field by field, every error with its path.
//!
//! A device flow sends from its transmit address's ethernet: the port is
//! the ethernet's, the source MAC the ethernet's, the IP addresses the two
//! address objects' where the packet leaves them out (or says `auto`),
//! and the destination MAC (`auto`) the next hop's as the port's
//! responder resolved it (`crate::protocols`): the gateway's when the
//! destination is off the transmit address's subnet, the destination's
//! own when it is on it.

use crate::json::{Invalid, Obj, invalid};
use crate::model::ports::Port;
use linerate_wire::MacAddr;
use serde_json::{Value, json};
use std::net::IpAddr;

/// Most devices in a configuration, ethernets a device, addresses of
/// each family an ethernet.
pub const DEVICES_MAX: usize = 64;
pub const ETHERNETS_MAX: usize = 8;
pub const ADDRESSES_MAX: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub name: String,
    pub ethernets: Vec<Ethernet>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ethernet {
    pub name: String,
    /// The port it is on.
    pub port: String,
    pub mac: MacAddr,
    pub mtu: u32,
    /// Its IPv4 addresses, then its IPv6 ones.
    pub addresses: Vec<Address>,
}

/// An `ipv4_addresses` or `ipv6_addresses` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    pub name: String,
    pub ip: IpAddr,
    pub prefix: u8,
    pub gateway: IpAddr,
    /// `gateway_mac.value`: the gateway's MAC given, not resolved.
    pub gateway_mac: Option<MacAddr>,
}

impl Address {
    /// Whether `ip` is on this address's subnet.
    pub fn on_link(&self, ip: IpAddr) -> bool {
        match (self.ip, ip) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                let m = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(a) & m == u32::from(b) & m
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let m = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(a) & m == u128::from(b) & m
            }
            _ => false,
        }
    }
}

/// One end of a device flow: an address object and where it lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub ethernet: String,
    pub port: String,
    pub mac: MacAddr,
    pub address: Address,
}

/// A flow between two devices' addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceFlow {
    pub tx: Endpoint,
    pub rx: Endpoint,
}

impl DeviceFlow {
    /// The IP address whose MAC the frames go to: the destination on the
    /// transmit address's subnet, else its gateway.
    pub fn next_hop(&self) -> IpAddr {
        if self.tx.address.on_link(self.rx.address.ip) {
            self.rx.address.ip
        } else {
            self.tx.address.gateway
        }
    }
}

/// The configuration's `devices`: every device read, the first error of
/// each device's name and of each of its ethernets kept in `errs`.
pub fn devices(o: &Obj, ports: &[Port], errs: &mut Vec<Invalid>) -> Vec<Device> {
    let list = match o.list("devices", DEVICES_MAX) {
        Ok(l) => l.unwrap_or_default(),
        Err(e) => {
            errs.push(e);
            return Vec::new();
        }
    };
    let mut names: Vec<String> = ports.iter().map(|p| p.name.clone()).collect();
    let mut out = Vec::new();
    for (i, v) in list.iter().enumerate() {
        let d = match Obj::new(&format!("devices[{i}]"), v) {
            Ok(d) => d,
            Err(e) => {
                errs.push(e);
                continue;
            }
        };
        if let Some(dev) = device(&d, ports, &mut names, errs) {
            out.push(dev);
        }
    }
    // Two ethernets on one port may not share an address.
    let mut seen: Vec<(&str, IpAddr)> = Vec::new();
    for (i, d) in out.iter().enumerate() {
        for e in &d.ethernets {
            for a in &e.addresses {
                if seen.contains(&(e.port.as_str(), a.ip)) {
                    errs.push(invalid(
                        &format!("devices[{i}]"),
                        format!("{} is on port '{}' twice", a.ip, e.port),
                    ));
                }
                seen.push((e.port.as_str(), a.ip));
            }
        }
    }
    out
}

/// A name not taken yet by a port or another device object.
fn unique(path: &str, n: String, names: &mut Vec<String>) -> Result<String, Invalid> {
    if names.contains(&n) {
        return Err(invalid(
            path,
            format!("'{n}' names two objects (names are unique in a configuration)"),
        ));
    }
    names.push(n.clone());
    Ok(n)
}

fn name(o: &Obj) -> Result<String, Invalid> {
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

fn device(
    d: &Obj,
    ports: &[Port],
    names: &mut Vec<String>,
    errs: &mut Vec<Invalid>,
) -> Option<Device> {
    let n = match name(d).and_then(|n| unique(&d.at("name"), n, names)) {
        Ok(n) => n,
        Err(e) => {
            errs.push(e);
            return None;
        }
    };
    let before = errs.len();
    let list = match d.list("ethernets", ETHERNETS_MAX) {
        Ok(l) => l.unwrap_or_default(),
        Err(e) => {
            errs.push(e);
            &[]
        }
    };
    let mut ethernets = Vec::new();
    for (k, v) in list.iter().enumerate() {
        match Obj::new(&format!("{}[{k}]", d.at("ethernets")), v)
            .and_then(|e| ethernet(&e, ports, names))
        {
            Ok(e) => ethernets.push(e),
            Err(e) => errs.push(e),
        }
    }
    // Loopbacks, routing protocols, DHCP …: not emulated.
    if let Err(e) = d.done() {
        errs.push(invalid(
            &e.path,
            "not supported by linerate agent (devices are ethernets with IPv4 and IPv6 addresses)",
        ));
    }
    if list.is_empty() && errs.len() == before {
        errs.push(invalid(
            &d.at("ethernets"),
            "required: at least one ethernet (the agent emulates ethernets with addresses)",
        ));
    }
    (errs.len() == before).then_some(Device { name: n, ethernets })
}

fn ethernet(e: &Obj, ports: &[Port], names: &mut Vec<String>) -> Result<Ethernet, Invalid> {
    let n = unique(&e.at("name"), name(e)?, names)?;
    let port = ethernet_port(e, ports)?;
    let mac = e
        .str("mac")?
        .ok_or_else(|| invalid(&e.at("mac"), "required"))?;
    let mac = MacAddr::parse(mac)
        .filter(|m| !m.is_multicast() && m.0 != [0; 6])
        .ok_or_else(|| {
            invalid(
                &e.at("mac"),
                format!("'{mac}' is not a unicast MAC address"),
            )
        })?;
    let mtu = e.u64("mtu")?.unwrap_or(1500);
    if !(68..=9198).contains(&mtu) {
        return Err(invalid(&e.at("mtu"), "68 to 9198"));
    }
    for k in ["vlans", "dhcpv4_interfaces", "dhcpv6_interfaces"] {
        if e.list(k, 64)?.is_some_and(|l| !l.is_empty()) {
            return Err(invalid(&e.at(k), "not supported by linerate agent"));
        }
    }
    let mut addresses = Vec::new();
    for (key, v6) in [("ipv4_addresses", false), ("ipv6_addresses", true)] {
        for (i, a) in e
            .list(key, ADDRESSES_MAX)?
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let a = Obj::new(&format!("{}[{i}]", e.at(key)), a)?;
            addresses.push(address(&a, v6, names)?);
        }
    }
    e.done()?;
    Ok(Ethernet {
        name: n,
        port,
        mac,
        mtu: mtu as u32,
        addresses,
    })
}

/// The ethernet's port: `connection.port_name`, or the older `port_name`.
fn ethernet_port(e: &Obj, ports: &[Port]) -> Result<String, Invalid> {
    let (path, n) = match (e.obj("connection")?, e.str("port_name")?) {
        (Some(c), _) => {
            c.choice(&["port_name"], "port_name")?;
            let n = c
                .str("port_name")?
                .ok_or_else(|| invalid(&c.at("port_name"), "required"))?;
            c.done()?;
            (c.at("port_name"), n)
        }
        (None, Some(n)) => (e.at("port_name"), n),
        (None, None) => {
            return Err(invalid(
                &e.at("connection"),
                "required: the port the ethernet is on",
            ));
        }
    };
    if ports.iter().any(|p| p.name == n) {
        Ok(n.to_string())
    } else {
        Err(invalid(&path, format!("no port is named '{n}'")))
    }
}

fn ip_field(a: &Obj, key: &'static str, v6: bool) -> Result<IpAddr, Invalid> {
    let s = a.str(key)?.ok_or_else(|| invalid(&a.at(key), "required"))?;
    let ip: Option<IpAddr> = if v6 {
        s.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::V6)
    } else {
        s.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
    };
    let ip = ip.ok_or_else(|| {
        invalid(
            &a.at(key),
            format!("'{s}' is not an IPv{} address", if v6 { 6 } else { 4 }),
        )
    })?;
    let unicast = match ip {
        IpAddr::V4(x) => !(x.is_unspecified() || x.is_multicast() || x.is_broadcast()),
        IpAddr::V6(x) => !(x.is_unspecified() || x.is_multicast()),
    };
    if !unicast {
        return Err(invalid(
            &a.at(key),
            format!("{ip} is not a unicast address"),
        ));
    }
    Ok(ip)
}

fn address(a: &Obj, v6: bool, names: &mut Vec<String>) -> Result<Address, Invalid> {
    let n = unique(&a.at("name"), name(a)?, names)?;
    let ip = ip_field(a, "address", v6)?;
    let gateway = ip_field(a, "gateway", v6)?;
    let (max, default) = if v6 { (128, 64) } else { (32, 24) };
    let prefix = a.u64("prefix")?.unwrap_or(default);
    if !(1..=max).contains(&prefix) {
        return Err(invalid(&a.at("prefix"), format!("1 to {max}")));
    }
    let mut gateway_mac = None;
    if let Some(g) = a.obj("gateway_mac")? {
        if g.choice(&["auto", "value"], "auto")? == "value" {
            let s = g
                .str("value")?
                .ok_or_else(|| invalid(&g.at("value"), "required by choice value"))?;
            gateway_mac = Some(
                MacAddr::parse(s).ok_or_else(|| invalid(&g.at("value"), "not a MAC address"))?,
            );
        } else {
            // The resolved MAC, as the model's server fills it in.
            g.raw("value");
        }
        g.raw("auto");
        g.done()?;
    }
    a.done()?;
    let addr = Address {
        name: n,
        ip,
        prefix: prefix as u8,
        gateway,
        gateway_mac,
    };
    let link_local = matches!(gateway, IpAddr::V6(g) if g.is_unicast_link_local());
    if gateway == ip || !(addr.on_link(gateway) || link_local) {
        return Err(invalid(
            &a.at("gateway"),
            format!(
                "{gateway} is not another address on {ip}/{prefix}: the agent resolves the gateway on the link"
            ),
        ));
    }
    Ok(addr)
}

/// Address object `n`: where it lives.
fn endpoint(devices: &[Device], n: &str) -> Option<Endpoint> {
    devices.iter().flat_map(|d| &d.ethernets).find_map(|e| {
        let a = e.addresses.iter().find(|a| a.name == n)?;
        Some(Endpoint {
            ethernet: e.name.clone(),
            port: e.port.clone(),
            mac: e.mac,
            address: a.clone(),
        })
    })
}

/// A flow's `tx_rx.device` (object `d`): one transmit and one receive
/// address object of one family, on different ports.
pub fn flow_devices(d: &Obj, devices: &[Device]) -> Result<DeviceFlow, Invalid> {
    let mode = d.str("mode")?.unwrap_or("mesh");
    if !["mesh", "one_to_one"].contains(&mode) {
        return Err(invalid(&d.at("mode"), format!("'{mode}' is not a mode")));
    }
    if d.bool("bidirectional")? == Some(true) {
        return Err(invalid(
            &d.at("bidirectional"),
            "linerate sends a flow one way: configure the way back as a flow of its own",
        ));
    }
    let one = |key: &'static str| -> Result<Endpoint, Invalid> {
        let names = d.strs(key, 16)?.unwrap_or_default();
        let [n] = names[..] else {
            return Err(invalid(
                &d.at(key),
                format!(
                    "{} names: linerate sends a flow from one address object to one (a flow per pair)",
                    names.len()
                ),
            ));
        };
        endpoint(devices, n).ok_or_else(|| {
            let what = if devices
                .iter()
                .any(|x| x.name == n || x.ethernets.iter().any(|e| e.name == n))
            {
                format!("'{n}' is a device or an ethernet: name one of its ipv4 or ipv6 addresses")
            } else {
                format!("no ipv4 or ipv6 address is named '{n}'")
            };
            invalid(&format!("{}[0]", d.at(key)), what)
        })
    };
    let tx = one("tx_names")?;
    let rx = one("rx_names")?;
    d.done()?;
    if tx.address.ip.is_ipv4() != rx.address.ip.is_ipv4() {
        return Err(invalid(
            &d.at("rx_names"),
            "the transmit and receive addresses are of two IP versions",
        ));
    }
    if tx.port == rx.port {
        return Err(invalid(
            &d.at("rx_names"),
            format!(
                "both ends are on port '{}': a port's own frames do not come back to it",
                tx.port
            ),
        ));
    }
    Ok(DeviceFlow { tx, rx })
}

/// The flow's `packet` (`packet`, as sent) with what the devices give
/// filled in where the client left it out or said `auto`: the ethernet
/// source, the IP source and destination. The paths of its fields are
/// unchanged.
pub fn fill_packet(packet: Option<&Value>, d: &DeviceFlow) -> Value {
    let mut p = packet.cloned().unwrap_or_else(|| json!([]));
    let Some(list) = p.as_array_mut() else {
        return p;
    };
    let ip_key = if d.tx.address.ip.is_ipv4() {
        "ipv4"
    } else {
        "ipv6"
    };
    let value = |s: String| json!({"choice": "value", "value": s});
    for h in list.iter_mut() {
        let Some(h) = h.as_object_mut() else { continue };
        let choice = h
            .get("choice")
            .and_then(Value::as_str)
            .unwrap_or("ethernet")
            .to_string();
        let fills: Vec<(&str, String)> = match choice.as_str() {
            "ethernet" => vec![("src", d.tx.mac.to_string())],
            c if c == ip_key => vec![
                ("src", d.tx.address.ip.to_string()),
                ("dst", d.rx.address.ip.to_string()),
            ],
            _ => continue,
        };
        let body = h.entry(choice.clone()).or_insert_with(|| json!({}));
        let Some(body) = body.as_object_mut() else {
            continue;
        };
        for (k, v) in fills {
            let auto = body.get(k).is_none_or(|f| {
                f.is_null() || f.get("choice").and_then(Value::as_str) == Some("auto")
            });
            if auto {
                body.insert(k.to_string(), value(v));
            }
        }
        // Only the first ethernet and IP headers are the devices' (a
        // VXLAN flow's inner ones are not).
        if choice == ip_key {
            break;
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use crate::model::{Field, config_all};
    use serde_json::{Value, json};

    fn doc() -> Value {
        let dev = |n: &str, port: &str, mac: &str, last: u8| {
            json!({"name": n, "ethernets": [{
                "name": format!("{n}.eth"),
                "connection": {"choice": "port_name", "port_name": port},
                "mac": mac,
                "ipv4_addresses": [{"name": format!("{n}.ipv4"), "address": format!("198.18.{last}.2"), "gateway": format!("198.18.{last}.1"), "prefix": 24}],
                "ipv6_addresses": [{"name": format!("{n}.ipv6"), "address": format!("2001:db8:{last}::2"), "gateway": format!("2001:db8:{last}::1")}]
            }]})
        };
        json!({
            "ports": [{"name": "p1", "location": "wire0"}, {"name": "p2", "location": "wire1"}],
            "devices": [dev("d1", "p1", "02:00:00:00:01:02", 1), dev("d2", "p2", "02:00:00:00:02:02", 2)],
            "flows": [{
                "name": "f",
                "tx_rx": {"choice": "device", "device": {"mode": "mesh", "tx_names": ["d1.ipv4"], "rx_names": ["d2.ipv4"], "bidirectional": false}},
                "packet": [
                    {"choice": "ethernet", "ethernet": {}},
                    {"choice": "ipv4", "ipv4": {"src": {"choice": "auto", "auto": {"choice": "dhcp"}}}},
                    {"choice": "udp", "udp": {"dst_port": {"choice": "value", "value": 7}}}
                ]
            }]
        })
    }

    fn set(d: &mut Value, ptr: &str, v: Value) {
        let (parent, key) = ptr.rsplit_once('/').unwrap();
        match d.pointer_mut(parent).unwrap() {
            Value::Object(m) => {
                m.insert(key.into(), v);
            }
            Value::Array(l) => l[key.parse::<usize>().unwrap()] = v,
            _ => panic!("{ptr}"),
        }
    }

    #[test]
    fn a_device_flow_takes_its_ports_macs_and_addresses_from_its_ends() {
        let c = config_all(&doc()).unwrap();
        assert_eq!(c.devices.len(), 2);
        let e = &c.devices[0].ethernets[0];
        assert_eq!((e.port.as_str(), e.mtu, e.addresses.len()), ("p1", 1500, 2));
        assert_eq!(e.addresses[1].prefix, 64, "the model's IPv6 default");
        let f = &c.flows[0];
        assert_eq!(
            (f.tx.as_str(), f.rx.as_slice()),
            ("p1", &["p2".to_string()][..])
        );
        assert_eq!(f.headers.eth_src.first, 0x0200_0000_0102);
        assert_eq!(f.headers.eth_dst, Field::Auto);
        assert_eq!(f.headers.ip_src.first, u128::from(0xc612_0102u32));
        assert_eq!(f.headers.ip_dst.first, u128::from(0xc612_0202u32));
        let d = f.device.as_ref().unwrap();
        assert_eq!(
            d.next_hop(),
            "198.18.1.1".parse::<std::net::IpAddr>().unwrap(),
            "off-link: the gateway"
        );
        // Given values are kept; an on-link destination is its own next hop.
        let mut v = doc();
        set(
            &mut v,
            "/flows/0/packet/1/ipv4/dst",
            json!({"choice": "value", "value": "198.18.1.40"}),
        );
        set(
            &mut v,
            "/devices/1/ethernets/0/ipv4_addresses/0/address",
            json!("198.18.1.3"),
        );
        set(
            &mut v,
            "/devices/1/ethernets/0/ipv4_addresses/0/gateway",
            json!("198.18.1.1"),
        );
        let c = config_all(&v).unwrap();
        assert_eq!(c.flows[0].headers.ip_dst.first, u128::from(0xc612_0128u32));
        assert_eq!(
            c.flows[0].device.as_ref().unwrap().next_hop(),
            "198.18.1.3".parse::<std::net::IpAddr>().unwrap()
        );
    }

    #[test]
    fn every_devices_error_comes_back_with_its_path_in_one_answer() {
        let mut v = doc();
        set(
            &mut v,
            "/devices/0/ethernets/0/mac",
            json!("01:00:5e:00:00:01"),
        );
        set(
            &mut v,
            "/devices/1/ethernets/0/ipv4_addresses/0/gateway",
            json!("198.18.9.1"),
        );
        set(&mut v, "/flows/0/tx_rx/device/tx_names", json!(["d1"]));
        let errs = config_all(&v).unwrap_err();
        let got: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "devices[0].ethernets[0].mac",
                "devices[1].ethernets[0].ipv4_addresses[0].gateway",
                "flows[0].tx_rx.device.tx_names[0]",
            ],
            "{got:?}"
        );
        assert!(
            got[2].contains("no ipv4 or ipv6 address is named 'd1'"),
            "{got:?}"
        );
    }

    #[test]
    fn what_devices_the_agent_does_not_emulate_is_refused_by_path() {
        let cases: Vec<(&str, Value, &str)> = vec![
            (
                "/devices/0/ethernets/0/mac",
                Value::Null,
                "devices[0].ethernets[0].mac: required",
            ),
            (
                "/devices/0/ethernets/0/connection/port_name",
                json!("p9"),
                "no port is named 'p9'",
            ),
            (
                "/devices/0/ethernets/0/vlans",
                json!([{"name": "v", "id": 10}]),
                "devices[0].ethernets[0].vlans: not supported",
            ),
            (
                "/devices/0/ethernets/0/mtu",
                json!(20),
                "devices[0].ethernets[0].mtu: 68 to 9198",
            ),
            (
                "/devices/0/ethernets/0/ipv4_addresses/0/prefix",
                json!(33),
                "ipv4_addresses[0].prefix: 1 to 32",
            ),
            (
                "/devices/0/ethernets/0/ipv4_addresses/0/address",
                json!("224.0.0.1"),
                "not a unicast address",
            ),
            (
                "/devices/0/ethernets/0/ipv6_addresses/0/address",
                json!("198.18.1.2"),
                "not an IPv6 address",
            ),
            (
                "/devices/0/ethernets/0/ipv4_addresses/0/gateway",
                json!("198.18.1.2"),
                "is not another address",
            ),
            (
                "/devices/1/ethernets/0/name",
                json!("d1.eth"),
                "devices[1].ethernets[0].name: 'd1.eth' names two objects",
            ),
            (
                "/devices/1/name",
                json!("p1"),
                "devices[1].name: 'p1' names two objects",
            ),
            (
                "/devices/0/bgp",
                json!({"router_id": "1.1.1.1"}),
                "devices[0].bgp: not supported",
            ),
            (
                "/devices/0/ethernets",
                json!([]),
                "devices[0].ethernets: required",
            ),
            (
                "/flows/0/tx_rx/device/rx_names",
                json!(["d2.ipv4", "d1.ipv4"]),
                "2 names",
            ),
            (
                "/flows/0/tx_rx/device/rx_names",
                json!(["d2.ipv6"]),
                "two IP versions",
            ),
            (
                "/flows/0/tx_rx/device/rx_names",
                json!(["d1.ipv4"]),
                "both ends are on port 'p1'",
            ),
            (
                "/flows/0/tx_rx/device/bidirectional",
                json!(true),
                "tx_rx.device.bidirectional",
            ),
            (
                "/flows/0/tx_rx/device/mode",
                json!("ring"),
                "'ring' is not a mode",
            ),
        ];
        for (ptr, v, want) in cases {
            let mut d = doc();
            set(&mut d, ptr, v);
            let errs = config_all(&d).expect_err(ptr);
            let msg = errs[0].to_string();
            assert!(msg.contains(want), "{ptr}: '{msg}' lacks '{want}'");
        }
    }
}
