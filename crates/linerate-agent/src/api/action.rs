//! `POST /control/action`: the devices' pings (`protocol.ipv4.ping`,
//! `protocol.ipv6.ping`), each request answered `succeeded` when its echo
//! reply came back within [`PING_WITHIN`], `failed` otherwise. Every
//! other action (BGP, IS-IS, a port's reboot) is refused by path.

use super::{Agent, Reply};
use crate::campaign::lock;
use crate::json::{Invalid, Obj, invalid};
use crate::neighbors::{PING_WITHIN, PingRequest};
use serde_json::{Value, json};
use std::net::IpAddr;

/// Most pings in one action.
pub const PINGS_MAX: usize = 256;

impl Agent {
    pub(super) fn control_action(&self, doc: &Value) -> Result<Reply, Reply> {
        let (v6, asked) = requests(doc).map_err(Reply::invalid_all)?;
        let devices = lock(&self.state).devices.clone();
        let family = if v6 { "ipv6" } else { "ipv4" };
        let errs: Vec<Invalid> = asked
            .iter()
            .enumerate()
            .filter(|(_, (r, _))| {
                devices
                    .as_ref()
                    .and_then(|d| d.address(&r.src_name, v6))
                    .is_none()
            })
            .map(|(i, (r, _))| {
                invalid(
                    &format!("protocol.{family}.ping.requests[{i}].src_name"),
                    format!(
                        "no {} address of a device is named '{}'",
                        if v6 { "IPv6" } else { "IPv4" },
                        r.src_name
                    ),
                )
            })
            .collect();
        if !errs.is_empty() {
            return Err(Reply::invalid_all(errs));
        }
        let reqs: Vec<PingRequest> = asked.iter().map(|(r, _)| r.clone()).collect();
        let got = match &devices {
            Some(d) if !reqs.is_empty() => d.ping(&reqs, std::time::Instant::now() + PING_WITHIN),
            _ => Vec::new(),
        };
        let responses: Vec<Value> = asked
            .iter()
            .zip(&got)
            .map(|((r, given), ok)| {
                json!({
                    "src_name": r.src_name,
                    "dst_ip": given,
                    "result": if *ok { "succeeded" } else { "failed" },
                })
            })
            .collect();
        Ok(Reply::ok(json!({
            "warnings": [],
            "response": {"choice": "protocol", "protocol": {
                "choice": family,
                family: {"choice": "ping", "ping": {"responses": responses}},
            }},
        })))
    }
}

/// A `ControlAction` read: the family (IPv6 or not) and each request
/// with its `dst_ip` as given; every error of the document at once.
/// A ping request and its `dst_ip` as given.
type Asked = (PingRequest, String);

fn requests(doc: &Value) -> Result<(bool, Vec<Asked>), Vec<Invalid>> {
    let one = |e: Invalid| vec![e];
    let o = Obj::new("", doc).map_err(one)?;
    let c = o.str("choice").map_err(one)?.unwrap_or("");
    if c != "protocol" {
        return Err(one(invalid(
            "choice",
            format!(
                "'{c}': not supported by linerate agent (it takes protocol: the devices' ipv4 and ipv6 ping)"
            ),
        )));
    }
    let p = required(&o, "protocol")?;
    let fam = p.str("choice").map_err(one)?.unwrap_or("");
    if fam != "ipv4" && fam != "ipv6" {
        return Err(one(invalid(
            "protocol.choice",
            format!(
                "'{fam}': not supported by linerate agent (it takes ipv4 and ipv6: ping from the devices' addresses)"
            ),
        )));
    }
    let v6 = fam == "ipv6";
    let f = required(&p, if v6 { "ipv6" } else { "ipv4" })?;
    let a = f.str("choice").map_err(one)?.unwrap_or("");
    if a != "ping" {
        return Err(one(invalid(
            &f.at("choice"),
            format!("'{a}': not an action of {fam} (ping is)"),
        )));
    }
    let ping = required(&f, "ping")?;
    let list = ping
        .list("requests", PINGS_MAX)
        .map_err(one)?
        .unwrap_or_default();
    let mut errs = Vec::new();
    let mut out = Vec::new();
    for (i, v) in list.iter().enumerate() {
        match Obj::new(&format!("{}[{i}]", ping.at("requests")), v).and_then(|r| request(&r, v6)) {
            Ok(r) => out.push(r),
            Err(e) => errs.push(e),
        }
    }
    for d in [ping.done(), f.done(), p.done(), o.done()] {
        errs.extend(d.err());
    }
    if errs.is_empty() {
        Ok((v6, out))
    } else {
        Err(errs)
    }
}

fn required<'a>(o: &Obj<'a>, key: &'static str) -> Result<Obj<'a>, Vec<Invalid>> {
    o.obj(key)
        .map_err(|e| vec![e])?
        .ok_or_else(|| vec![invalid(&o.at(key), "required")])
}

fn request(r: &Obj, v6: bool) -> Result<Asked, Invalid> {
    let src = r
        .str("src_name")?
        .ok_or_else(|| invalid(&r.at("src_name"), "required"))?;
    let given = r
        .str("dst_ip")?
        .ok_or_else(|| invalid(&r.at("dst_ip"), "required"))?;
    let dst = given
        .parse::<IpAddr>()
        .ok()
        .filter(|ip| ip.is_ipv6() == v6 && !ip.is_unspecified() && !ip.is_multicast())
        .ok_or_else(|| {
            invalid(
                &r.at("dst_ip"),
                format!(
                    "'{given}' is not a unicast {} address",
                    if v6 { "IPv6" } else { "IPv4" }
                ),
            )
        })?;
    r.done()?;
    Ok((
        PingRequest {
            src_name: src.to_string(),
            dst,
        },
        given.to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use crate::grpc::service::{Rpc, call};
    use crate::grpc::{schema, table_action};
    use crate::{Agent, Options};
    use serde_json::{Value, json};

    fn agent() -> Agent {
        let a = Agent::new(Options::loopback(&["wire0", "wire1"]));
        let cfg = json!({
            "ports": [{"name": "p1", "location": "wire0"}],
            "devices": [{"name": "d1", "ethernets": [{
                "name": "d1.eth",
                "connection": {"choice": "port_name", "port_name": "p1"},
                "mac": "02:00:00:00:01:02",
                "ipv4_addresses": [{"name": "d1.ipv4", "address": "198.18.1.2", "gateway": "198.18.1.1", "prefix": 24}],
                "ipv6_addresses": [{"name": "d1.ipv6", "address": "2001:db8:1::2", "gateway": "2001:db8:1::1", "prefix": 64}]
            }]}]
        });
        let r = a.handle("POST", "/config", cfg.to_string().as_bytes());
        assert_eq!(r.status, 200, "{}", r.body);
        a
    }

    fn errors(a: &Agent, doc: &Value) -> Value {
        let r = a.handle("POST", "/control/action", doc.to_string().as_bytes());
        assert_eq!(r.status, 400, "{}", r.body);
        r.body["errors"].clone()
    }

    fn ping(family: &str, reqs: Value) -> Value {
        json!({"choice": "protocol", "protocol": {"choice": family,
            family: {"choice": "ping", "ping": {"requests": reqs}}}})
    }

    #[test]
    fn what_the_agent_does_not_do_is_refused_by_path() {
        let a = agent();
        assert_eq!(
            errors(&a, &json!({"choice": "port", "port": {"choice": "reboot"}})),
            json!([
                "choice: 'port': not supported by linerate agent (it takes protocol: the devices' ipv4 and ipv6 ping)"
            ])
        );
        let bgp = json!({"choice": "protocol", "protocol": {"choice": "bgp", "bgp": {}}});
        assert_eq!(
            errors(&a, &bgp),
            json!([
                "protocol.choice: 'bgp': not supported by linerate agent (it takes ipv4 and ipv6: ping from the devices' addresses)"
            ])
        );
        // Over gRPC: the same words, INVALID_ARGUMENT (the BGP message is
        // one the table knows by name only: the choice says it).
        let bare = json!({"choice": "protocol", "protocol": {"choice": "bgp"}});
        let wire = schema::encode(&table_action::M_CONTROL_ACTION, &bare, "").unwrap();
        let s = call(&a, Rpc::SetControlAction, &wire, a.arrival()).unwrap_err();
        assert_eq!(s.code(), tonic::Code::InvalidArgument);
        let e: Value = serde_json::from_str(s.message()).unwrap();
        assert_eq!(e["errors"], errors(&a, &bgp));
        // Every request's error at once.
        let reqs = json!([
            {"src_name": "d1.ipv6", "dst_ip": "198.18.1.3"},
            {"src_name": "d1.ipv4", "dst_ip": "2001:db8::1"},
            {"src_name": "d1.ipv4"},
            {"src_name": "d1.ipv4", "dst_ip": "224.0.0.1", "ttl": 3}
        ]);
        assert_eq!(
            errors(&a, &ping("ipv4", reqs)),
            json!([
                "protocol.ipv4.ping.requests[1].dst_ip: '2001:db8::1' is not a unicast IPv4 address",
                "protocol.ipv4.ping.requests[2].dst_ip: required",
                "protocol.ipv4.ping.requests[3].dst_ip: '224.0.0.1' is not a unicast IPv4 address"
            ])
        );
        let reqs = json!([{"src_name": "d1.ipv6", "dst_ip": "198.18.1.3"}, {"src_name": "d9.ipv4", "dst_ip": "198.18.1.3"}]);
        assert_eq!(
            errors(&a, &ping("ipv4", reqs)),
            json!([
                "protocol.ipv4.ping.requests[0].src_name: no IPv4 address of a device is named 'd1.ipv6'",
                "protocol.ipv4.ping.requests[1].src_name: no IPv4 address of a device is named 'd9.ipv4'"
            ])
        );
    }

    /// On loopback ports nothing answers: a ping fails when its deadline
    /// passes; no request, nothing to wait for.
    #[test]
    fn an_unanswered_ping_fails_and_no_request_answers_at_once() {
        let a = agent();
        let r = a.handle(
            "POST",
            "/control/action",
            ping("ipv6", json!([])).to_string().as_bytes(),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(
            r.body["response"]["protocol"]["ipv6"]["ping"]["responses"],
            json!([])
        );
        let t = std::time::Instant::now();
        let doc = ping(
            "ipv4",
            json!([{"src_name": "d1.ipv4", "dst_ip": "198.18.1.3"}]),
        );
        let r = a.handle("POST", "/control/action", doc.to_string().as_bytes());
        assert!(t.elapsed() >= crate::neighbors::PING_WITHIN);
        assert_eq!(
            r.body,
            json!({"warnings": [], "response": {"choice": "protocol", "protocol": {"choice": "ipv4",
                "ipv4": {"choice": "ping", "ping": {"responses": [
                    {"src_name": "d1.ipv4", "dst_ip": "198.18.1.3", "result": "failed"}]}}}}})
        );
    }
}
