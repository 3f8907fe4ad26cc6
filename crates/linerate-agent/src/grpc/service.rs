//! The `otg.Openapi` service's methods without I/O: each decodes its
//! request through the models' table into the JSON document the HTTP
//! path takes, calls the same route ([`Agent::handle`]), and encodes the
//! answer (or the models' `Error`, as a gRPC status) back. One
//! implementation of the API's checks and behaviour serves both.

use super::messages::{GetCaptureResponse, Holding};
use super::schema::{self, Msg};
use super::table_action as action;
use super::table_api as api;
use super::table_config::M_CONFIG;
use crate::api::{Agent, Reply};
use serde_json::{Value, json};
use tonic::{Code, Status};

/// The service's name, as paths carry it (`/otg.Openapi/SetConfig`).
pub const SERVICE: &str = "otg.Openapi";

/// A method the agent serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rpc {
    SetConfig,
    GetConfig,
    UpdateConfig,
    AppendConfig,
    DeleteConfig,
    SetControlState,
    SetControlAction,
    GetMetrics,
    GetCapture,
    GetVersion,
    GetStates,
    StreamGetConfig,
    StreamGetMetrics,
    StreamGetCapture,
    StreamGetStates,
}

/// The models' methods the agent does not serve (refused as the HTTP
/// path refuses a path it does not have).
pub const UNSERVED: &[&str] = &[
    "streamSetConfig",
    "streamSetControlState",
    "streamSetControlAction",
];

/// A request's method by its path: `Ok` a served one, `Err` the status to
/// answer.
pub fn rpc(path: &str) -> Result<Rpc, Status> {
    let name = path
        .strip_prefix('/')
        .and_then(|p| p.strip_prefix(SERVICE))
        .and_then(|p| p.strip_prefix('/'));
    let served = [
        ("SetConfig", Rpc::SetConfig),
        ("GetConfig", Rpc::GetConfig),
        ("UpdateConfig", Rpc::UpdateConfig),
        ("AppendConfig", Rpc::AppendConfig),
        ("DeleteConfig", Rpc::DeleteConfig),
        ("SetControlState", Rpc::SetControlState),
        ("SetControlAction", Rpc::SetControlAction),
        ("GetMetrics", Rpc::GetMetrics),
        ("GetCapture", Rpc::GetCapture),
        ("GetVersion", Rpc::GetVersion),
        ("GetStates", Rpc::GetStates),
        ("streamGetStates", Rpc::StreamGetStates),
        ("streamGetConfig", Rpc::StreamGetConfig),
        ("streamGetMetrics", Rpc::StreamGetMetrics),
        ("streamGetCapture", Rpc::StreamGetCapture),
    ];
    if let Some(&(_, r)) = served.iter().find(|(n, _)| Some(*n) == name) {
        return Ok(r);
    }
    let what = match name {
        Some(n) if UNSERVED.contains(&n) => format!(
            "{SERVICE}/{n}: not served by linerate agent (it serves SetConfig, GetConfig, UpdateConfig, AppendConfig, DeleteConfig, SetControlState, SetControlAction, GetMetrics, GetStates, GetCapture, GetVersion and the stream forms of the Get methods)"
        ),
        _ => format!("{path}: not a method of {SERVICE}"),
    };
    Err(status(&Reply::error(501, what)))
}

/// The gRPC code of an HTTP status the API answers.
pub fn code(http: u16) -> Code {
    match http {
        400 => Code::InvalidArgument,
        401 => Code::Unauthenticated,
        404 => Code::NotFound,
        405 | 501 => Code::Unimplemented,
        409 => Code::FailedPrecondition,
        500..=599 => Code::Internal,
        _ => Code::Unknown,
    }
}

/// The models' `Error` as gRPC carries it: the status's code, and its
/// message the `Error` in JSON with that code (snappi and gosnappi read
/// it back from the message).
pub fn status(reply: &Reply) -> Status {
    let c = code(reply.status);
    let mut body = reply.body.clone();
    if !body.is_object() {
        body = json!({"kind": "internal", "errors": []});
    }
    body["code"] = json!(c as i32);
    Status::new(c, body.to_string())
}

/// The token refused: `UNAUTHENTICATED`.
pub fn unauthenticated(what: &str) -> Status {
    status(&Reply::error(401, what))
}

/// A route of the HTTP path with `body` (a request message decoded into
/// its JSON); a status other than 200 is the error answered.
fn route(
    agent: &Agent,
    arrived: u64,
    method: &str,
    path: &str,
    body: &Value,
) -> Result<Reply, Status> {
    let reply = agent.handle_arrived(arrived, method, path, body.to_string().as_bytes());
    if reply.status == 200 {
        Ok(reply)
    } else {
        Err(status(&reply))
    }
}

/// A request's message as the HTTP path's document.
fn request(msg: &Msg, wire: &[u8]) -> Result<Value, Status> {
    schema::decode(msg, wire, "").map_err(|e| status(&Reply::error(400, e.to_string())))
}

/// An answer's JSON as the models' message.
fn answer(msg: &Msg, v: &Value) -> Result<Vec<u8>, Status> {
    schema::encode(msg, v, "").map_err(|e| {
        status(&Reply::error(
            500,
            format!("the answer does not fit the models' message: {e}"),
        ))
    })
}

/// A method's answer: the message (inside its envelope for the unary
/// forms) or the capture's bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Held(Holding),
    Capture(GetCaptureResponse),
    /// A stream form's whole answer, sent in `Data` pieces.
    Stream(Vec<u8>),
}

/// Serves one call that arrived `arrived`-th ([`Agent::arrival`]: control
/// requests take effect in arrival order, as over HTTP): `wire` is the
/// request's envelope's message (empty for the methods taking `Empty`).
pub fn call(agent: &Agent, rpc: Rpc, wire: &[u8], arrived: u64) -> Result<Answer, Status> {
    let route = |method, path, body: &Value| route(agent, arrived, method, path, body);
    let held = |m: &Msg, v: &Value| answer(m, v).map(|b| Answer::Held(Holding::of(b)));
    match rpc {
        Rpc::SetConfig => {
            let doc = request(&M_CONFIG, wire)?;
            held(&api::M_WARNING, &route("POST", "/config", &doc)?.body)
        }
        Rpc::GetConfig | Rpc::StreamGetConfig => {
            let r = route("GET", "/config", &Value::Null)?;
            let b = answer(&M_CONFIG, &r.body)?;
            Ok(if rpc == Rpc::GetConfig {
                Answer::Held(Holding::of(b))
            } else {
                Answer::Stream(b)
            })
        }
        Rpc::UpdateConfig | Rpc::AppendConfig | Rpc::DeleteConfig => {
            let (msg, path) = match rpc {
                Rpc::UpdateConfig => (&action::M_CONFIG_UPDATE, "/config"),
                Rpc::AppendConfig => (&action::M_CONFIG_APPEND, "/config/append"),
                _ => (&action::M_CONFIG_DELETE, "/config/delete"),
            };
            let doc = request(msg, wire)?;
            held(&api::M_WARNING, &route("PATCH", path, &doc)?.body)
        }
        Rpc::SetControlAction => {
            let doc = request(&action::M_CONTROL_ACTION, wire)?;
            let r = route("POST", "/control/action", &doc)?;
            held(&action::M_CONTROL_ACTION_RESPONSE, &r.body)
        }
        Rpc::SetControlState => {
            let doc = request(&api::M_CONTROL_STATE, wire)?;
            let r = route("POST", "/control/state", &doc)?;
            held(&api::M_WARNING, &r.body)
        }
        Rpc::GetMetrics | Rpc::StreamGetMetrics => {
            let doc = request(&api::M_METRICS_REQUEST, wire)?;
            let r = route("POST", "/monitor/metrics", &doc)?;
            let b = answer(&api::M_METRICS_RESPONSE, &r.body)?;
            Ok(if rpc == Rpc::GetMetrics {
                Answer::Held(Holding::of(b))
            } else {
                Answer::Stream(b)
            })
        }
        Rpc::GetStates | Rpc::StreamGetStates => {
            let doc = request(&api::M_STATES_REQUEST, wire)?;
            let r = route("POST", "/monitor/states", &doc)?;
            let b = answer(&api::M_STATES_RESPONSE, &r.body)?;
            Ok(if rpc == Rpc::GetStates {
                Answer::Held(Holding::of(b))
            } else {
                Answer::Stream(b)
            })
        }
        Rpc::GetCapture | Rpc::StreamGetCapture => {
            let doc = request(&api::M_CAPTURE_REQUEST, wire)?;
            let r = route("POST", "/monitor/capture", &doc)?;
            let bytes = r.bytes.unwrap_or_default();
            Ok(if rpc == Rpc::GetCapture {
                Answer::Capture(GetCaptureResponse {
                    response_bytes: bytes,
                })
            } else {
                Answer::Stream(bytes)
            })
        }
        Rpc::GetVersion => {
            let r = route("GET", "/capabilities/version", &Value::Null)?;
            held(&api::M_VERSION, &r.body)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Options;

    fn agent() -> Agent {
        Agent::new(Options::loopback(&["wire0", "wire1"]))
    }

    fn config() -> Value {
        json!({
            "ports": [{"name": "tx", "location": "wire0"}, {"name": "rx", "location": "wire1"}],
            "flows": [{
                "name": "f1",
                "tx_rx": {"choice": "port", "port": {"tx_name": "tx", "rx_names": ["rx"]}},
                "packet": [
                    {"choice": "ethernet", "ethernet": {"src": {"choice": "value", "value": "02:00:00:00:00:01"}}},
                    {"choice": "ipv4", "ipv4": {"dst": {"choice": "value", "value": "198.18.0.2"}}},
                    {"choice": "udp", "udp": {"dst_port": {"choice": "values", "values": [7, 9]}}}
                ],
                "rate": {"choice": "pps", "pps": "1000"},
                "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": 10}}
            }]
        })
    }

    fn wire(m: &Msg, v: &Value) -> Vec<u8> {
        schema::encode(m, v, "").unwrap()
    }

    fn held(a: Answer) -> Vec<u8> {
        match a {
            Answer::Held(h) => h.bytes().to_vec(),
            other => panic!("{other:?}"),
        }
    }

    /// The status's message: the models' `Error` in JSON.
    fn error(s: &Status) -> Value {
        serde_json::from_str(s.message()).unwrap()
    }

    /// The same configuration refused over gRPC and over HTTP: the same
    /// error list, word for word, the code gRPC's.
    #[test]
    fn a_refused_config_has_the_http_paths_errors() {
        let a = agent();
        let mut doc = config();
        doc["ports"][0]["location"] = json!("eth0");
        doc["ports"][1]["location"] = json!("eth1");
        doc["flows"][0]["egress_packet"] = json!([{"choice": "ethernet"}]);
        let mut w = wire(&M_CONFIG, &doc);
        // A LAG (Config.lags, field 2): a part the agent does not run.
        w.extend([0x12, 0x03, 0x12, 0x01, b'l']);
        doc["lags"] = json!([{}]);
        let http = a.handle("POST", "/config", doc.to_string().as_bytes());
        assert_eq!(http.status, 400);
        let s = call(&a, Rpc::SetConfig, &w, a.arrival()).unwrap_err();
        assert_eq!(s.code(), Code::InvalidArgument);
        let e = error(&s);
        assert_eq!(e["code"], 3);
        assert_eq!(e["kind"], "validation");
        assert_eq!(e["errors"], http.body["errors"]);
        assert_eq!(
            e["errors"],
            json!([
                "flows[0].egress_packet: not supported by linerate agent (see docs/agent.md for the fields it runs)",
                "lags: not supported by linerate agent (ports and flows only)"
            ])
        );
        // The plan's errors too: both ports outside the allow-list.
        doc.as_object_mut().unwrap().remove("lags");
        doc["flows"][0]
            .as_object_mut()
            .unwrap()
            .remove("egress_packet");
        let http = a.handle("POST", "/config", doc.to_string().as_bytes());
        let s = call(&a, Rpc::SetConfig, &wire(&M_CONFIG, &doc), a.arrival()).unwrap_err();
        assert_eq!(error(&s)["errors"], http.body["errors"]);
        assert_eq!(
            error(&s)["errors"].as_array().unwrap().len(),
            2,
            "{}",
            s.message()
        );
    }

    #[test]
    fn a_config_taken_comes_back_and_flows_report() {
        let a = agent();
        let w = held(call(&a, Rpc::SetConfig, &wire(&M_CONFIG, &config()), a.arrival()).unwrap());
        // No warnings: an empty Warning (present, as snappi reads it).
        assert_eq!(w, b"");
        let got = held(call(&a, Rpc::GetConfig, &[], a.arrival()).unwrap());
        let mut want = config();
        // The configuration as protobuf has it: 64-bit as strings.
        want["flows"][0]["duration"]["fixed_packets"]["packets"] = json!(10);
        assert_eq!(schema::decode(&M_CONFIG, &got, "").unwrap(), want);
        let req = json!({"choice": "flow", "flow": {"flow_names": ["f1"]}});
        let m = held(
            call(
                &a,
                Rpc::GetMetrics,
                &wire(&api::M_METRICS_REQUEST, &req),
                a.arrival(),
            )
            .unwrap(),
        );
        let m = schema::decode(&api::M_METRICS_RESPONSE, &m, "").unwrap();
        assert_eq!(m["choice"], "flow_metrics");
        assert_eq!(m["flow_metrics"][0]["name"], "f1");
        assert_eq!(m["flow_metrics"][0]["frames_tx"], "0");
        assert_eq!(m["flow_metrics"][0]["transmit"], "stopped");
        let Answer::Stream(b) = call(&a, Rpc::StreamGetConfig, &[], a.arrival()).unwrap() else {
            panic!("a stream form")
        };
        assert_eq!(b, got);
        // No capture configured: refused by name, as over HTTP.
        let req = wire(&api::M_CAPTURE_REQUEST, &json!({"port_name": "rx"}));
        let s = call(&a, Rpc::GetCapture, &req, a.arrival()).unwrap_err();
        assert_eq!(
            error(&s)["errors"],
            json!(["port_name: port 'rx' has no capture in the configuration"])
        );
    }

    #[test]
    fn control_state_and_version_are_the_routes() {
        let a = agent();
        let start = json!({"choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": "start"}}});
        let s = call(
            &a,
            Rpc::SetControlState,
            &wire(&api::M_CONTROL_STATE, &start),
            a.arrival(),
        )
        .unwrap_err();
        assert_eq!(s.code(), Code::FailedPrecondition, "no configuration yet");
        assert_eq!(error(&s)["code"], 9);
        let v = held(call(&a, Rpc::GetVersion, &[], a.arrival()).unwrap());
        assert_eq!(
            schema::decode(&api::M_VERSION, &v, "").unwrap(),
            json!({"api_spec_version": "1.62.0", "sdk_version": "",
                "app_version": format!("linerate {}", env!("CARGO_PKG_VERSION"))})
        );
    }

    /// Devices, a device flow and the neighbours' states over gRPC: the
    /// same answers as over HTTP from an agent given the same document.
    #[test]
    fn devices_and_their_neighbours_answer_as_over_http() {
        let dev = |n: &str, port: &str, mac: &str, last: u8| {
            json!({"name": n, "ethernets": [{
                "name": format!("{n}.eth"),
                "connection": {"choice": "port_name", "port_name": port},
                "mac": mac,
                "ipv4_addresses": [{"name": format!("{n}.ipv4"), "address": format!("198.18.{last}.2"), "gateway": format!("198.18.{last}.1"), "prefix": 24}],
                "ipv6_addresses": [{"name": format!("{n}.ipv6"), "address": format!("2001:db8:{last}::2"), "gateway": format!("2001:db8:{last}::1"), "prefix": 64}]
            }]})
        };
        let doc = json!({
            "ports": [{"name": "tx", "location": "wire0"}, {"name": "rx", "location": "wire1"}],
            "devices": [dev("d1", "tx", "02:00:00:00:01:02", 1), dev("d2", "rx", "02:00:00:00:02:02", 2)],
            "flows": [{
                "name": "f",
                "tx_rx": {"choice": "device", "device": {"mode": "mesh", "tx_names": ["d1.ipv4"], "rx_names": ["d2.ipv4"], "bidirectional": false}},
                "packet": [
                    {"choice": "ethernet", "ethernet": {}},
                    {"choice": "ipv4", "ipv4": {"src": {"choice": "auto", "auto": {"choice": "dhcp"}}}},
                    {"choice": "udp", "udp": {"dst_port": {"choice": "value", "value": 7}}}
                ]
            }]
        });
        let (g, h) = (agent(), agent());
        let over_http = h.handle("POST", "/config", doc.to_string().as_bytes());
        assert_eq!(over_http.status, 200, "{}", over_http.body);
        let w = held(call(&g, Rpc::SetConfig, &wire(&M_CONFIG, &doc), g.arrival()).unwrap());
        let mut warnings = schema::decode(&api::M_WARNING, &w, "").unwrap();
        if warnings.get("warnings").is_none() {
            warnings["warnings"] = json!([]);
        }
        assert_eq!(warnings, over_http.body);
        let got = held(call(&g, Rpc::GetConfig, &[], g.arrival()).unwrap());
        assert_eq!(schema::decode(&M_CONFIG, &got, "").unwrap(), doc);
        for v6 in [false, true] {
            let key = if v6 {
                "ipv6_neighbors"
            } else {
                "ipv4_neighbors"
            };
            let req = json!({"choice": key, key: {"ethernet_names": ["d1.eth"]}});
            let over_http = h.handle("POST", "/monitor/states", req.to_string().as_bytes());
            assert_eq!(over_http.status, 200, "{}", over_http.body);
            let r = wire(&api::M_STATES_REQUEST, &req);
            let b = held(call(&g, Rpc::GetStates, &r, g.arrival()).unwrap());
            let got = schema::decode(&api::M_STATES_RESPONSE, &b, "").unwrap();
            assert_eq!(got, over_http.body);
            assert_eq!(
                got[key][0]["ethernet_name"], "d1.eth",
                "the gateway's row: {got}"
            );
        }
    }

    #[test]
    fn methods_by_path() {
        assert_eq!(rpc("/otg.Openapi/SetConfig").unwrap(), Rpc::SetConfig);
        assert_eq!(
            rpc("/otg.Openapi/streamGetCapture").unwrap(),
            Rpc::StreamGetCapture
        );
        assert_eq!(rpc("/otg.Openapi/GetStates").unwrap(), Rpc::GetStates);
        assert_eq!(
            rpc("/otg.Openapi/SetControlAction").unwrap(),
            Rpc::SetControlAction
        );
        let s = rpc("/otg.Openapi/streamSetControlAction").unwrap_err();
        assert_eq!(s.code(), Code::Unimplemented);
        assert!(
            s.message().contains("streamSetControlAction: not served"),
            "{}",
            s.message()
        );
        let s = rpc("/otg.Other/SetConfig").unwrap_err();
        assert_eq!(s.code(), Code::Unimplemented);
        assert!(s.message().contains("not a method of otg.Openapi"));
    }
}
