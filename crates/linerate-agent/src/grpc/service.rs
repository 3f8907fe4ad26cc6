//! The `otg.Openapi` service's methods without I/O: each decodes its
//! request through the models' table into the JSON document the HTTP
//! path takes, calls the same route ([`Agent::handle`]), and encodes the
//! answer (or the models' `Error`, as a gRPC status) back. One
//! implementation of the API's checks and behaviour serves both.

use super::messages::{GetCaptureResponse, Holding};
use super::schema::{self, Msg};
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
    SetControlState,
    GetMetrics,
    GetCapture,
    GetVersion,
    StreamGetConfig,
    StreamGetMetrics,
    StreamGetCapture,
}

/// The models' methods the agent does not serve (refused as the HTTP
/// path refuses a path it does not have).
pub const UNSERVED: &[&str] = &[
    "streamSetConfig",
    "UpdateConfig",
    "AppendConfig",
    "DeleteConfig",
    "streamSetControlState",
    "SetControlAction",
    "streamSetControlAction",
    "GetStates",
    "streamGetStates",
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
        ("SetControlState", Rpc::SetControlState),
        ("GetMetrics", Rpc::GetMetrics),
        ("GetCapture", Rpc::GetCapture),
        ("GetVersion", Rpc::GetVersion),
        ("streamGetConfig", Rpc::StreamGetConfig),
        ("streamGetMetrics", Rpc::StreamGetMetrics),
        ("streamGetCapture", Rpc::StreamGetCapture),
    ];
    if let Some(&(_, r)) = served.iter().find(|(n, _)| Some(*n) == name) {
        return Ok(r);
    }
    let what = match name {
        Some(n) if UNSERVED.contains(&n) => format!(
            "{SERVICE}/{n}: not served by linerate agent (it serves SetConfig, GetConfig, SetControlState, GetMetrics, GetCapture, GetVersion and the stream forms of the Get methods)"
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
fn route(agent: &Agent, method: &str, path: &str, body: &Value) -> Result<Reply, Status> {
    let reply = agent.handle(method, path, body.to_string().as_bytes());
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

/// Serves one call: `wire` is the request's envelope's message (empty
/// for the methods taking `Empty`).
pub fn call(agent: &Agent, rpc: Rpc, wire: &[u8]) -> Result<Answer, Status> {
    let held = |m: &Msg, v: &Value| answer(m, v).map(|b| Answer::Held(Holding::of(b)));
    match rpc {
        Rpc::SetConfig => {
            let doc = request(&M_CONFIG, wire)?;
            held(
                &api::M_WARNING,
                &route(agent, "POST", "/config", &doc)?.body,
            )
        }
        Rpc::GetConfig | Rpc::StreamGetConfig => {
            let r = route(agent, "GET", "/config", &Value::Null)?;
            let b = answer(&M_CONFIG, &r.body)?;
            Ok(if rpc == Rpc::GetConfig {
                Answer::Held(Holding::of(b))
            } else {
                Answer::Stream(b)
            })
        }
        Rpc::SetControlState => {
            let doc = request(&api::M_CONTROL_STATE, wire)?;
            let r = route(agent, "POST", "/control/state", &doc)?;
            held(&api::M_WARNING, &r.body)
        }
        Rpc::GetMetrics | Rpc::StreamGetMetrics => {
            let doc = request(&api::M_METRICS_REQUEST, wire)?;
            let r = route(agent, "POST", "/monitor/metrics", &doc)?;
            let b = answer(&api::M_METRICS_RESPONSE, &r.body)?;
            Ok(if rpc == Rpc::GetMetrics {
                Answer::Held(Holding::of(b))
            } else {
                Answer::Stream(b)
            })
        }
        Rpc::GetCapture | Rpc::StreamGetCapture => {
            let doc = request(&api::M_CAPTURE_REQUEST, wire)?;
            let r = route(agent, "POST", "/monitor/capture", &doc)?;
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
            let r = route(agent, "GET", "/capabilities/version", &Value::Null)?;
            held(&api::M_VERSION, &r.body)
        }
    }
}
