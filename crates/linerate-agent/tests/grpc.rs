//! `linerate agent`'s gRPC server end to end on loopback: TLS with the
//! agent's certificate (ALPN h2), the token in the metadata, gRPC's
//! framing and statuses, the models' messages; a client made of hyper's
//! HTTP/2 client, so the bytes on the wire are the test's own.

#[path = "support/grpc_client.rs"]
mod grpc_client;

use grpc_client::{Client, Server, TOKEN, call, error};
use linerate_agent::grpc::messages::{Data, Empty, Holding};
use linerate_agent::grpc::{schema, table_action, table_api, table_config};
use prost::Message;
use serde_json::json;
use std::time::Duration;

#[test]
fn the_version_is_answered_with_the_token() {
    let s = Server::start();
    let a = call(&s, Some(TOKEN), "GetVersion", Empty {}.encode_to_vec());
    assert_eq!((a.status, a.message.as_str()), (0, ""));
    let v = Holding::decode(&a.body[..]).unwrap();
    assert_eq!(
        schema::decode(&table_api::M_VERSION, v.bytes(), "").unwrap(),
        json!({"api_spec_version": "1.62.0", "sdk_version": "",
            "app_version": format!("linerate {}", env!("CARGO_PKG_VERSION"))})
    );
}

#[test]
fn a_call_without_the_token_is_refused_before_its_body() {
    let s = Server::start();
    for (token, why) in [
        (
            None,
            "no bearer token: send the metadata authorization: Bearer <token>",
        ),
        (
            Some("grpc-test-token-0123456789abcdeX"),
            "the bearer token is not this agent's",
        ),
        (Some(""), "the bearer token is not this agent's"),
    ] {
        // A body that is not a message: never read.
        let a = call(&s, token, "SetConfig", vec![0xff; 7]);
        assert_eq!(a.status, 16, "UNAUTHENTICATED: {a:?}");
        assert_eq!(
            error(&a),
            json!({"code": 16, "kind": "validation", "errors": [why]})
        );
    }
    // A source that keeps failing is answered later each time (as over
    // HTTPS): the 4th failure after 50 ms, the 5th after 100 ms.
    for wait_ms in [50, 100] {
        let t = std::time::Instant::now();
        let a = call(
            &s,
            Some("grpc-test-token-wrong-0123456789"),
            "GetVersion",
            Vec::new(),
        );
        assert_eq!(a.status, 16);
        assert!(
            t.elapsed() >= Duration::from_millis(wait_ms),
            "{:?} < {wait_ms} ms",
            t.elapsed()
        );
    }
    // The token still opens it at once.
    let a = call(&s, Some(TOKEN), "GetVersion", Vec::new());
    assert_eq!(a.status, 0);
}

#[test]
fn a_refused_config_answers_every_error_with_its_path() {
    let s = Server::start();
    let doc = json!({
        "ports": [{"name": "tx", "location": "eth0"}, {"name": "rx", "location": "eth1"}],
    });
    let config = schema::encode(&table_config::M_CONFIG, &doc, "").unwrap();
    let a = call(
        &s,
        Some(TOKEN),
        "SetConfig",
        Holding::of(config).encode_to_vec(),
    );
    assert_eq!(a.status, 3, "INVALID_ARGUMENT: {a:?}");
    assert_eq!(
        error(&a),
        json!({"code": 3, "kind": "validation", "errors": [
            "ports[0].location: 'eth0' is not an interface this agent may use (its allow-list: wire0, wire1)",
            "ports[1].location: 'eth1' is not an interface this agent may use (its allow-list: wire0, wire1)"
        ]})
    );
    // Bytes that are no Config: refused with where.
    let a = call(
        &s,
        Some(TOKEN),
        "SetConfig",
        Holding::of(vec![0x0a, 0x05, 0x12]).encode_to_vec(),
    );
    assert_eq!(a.status, 3);
    assert_eq!(
        error(&a)["errors"],
        json!(["(document): not protobuf wire data: a cut value"])
    );
    // A method of the models the agent does not serve.
    let a = call(
        &s,
        Some(TOKEN),
        "streamSetControlAction",
        Holding::of(Vec::new()).encode_to_vec(),
    );
    assert_eq!(a.status, 12, "UNIMPLEMENTED: {a:?}");
    // The control action and the config update: served, their refusals
    // INVALID_ARGUMENT with the path.
    let bgp = json!({"choice": "protocol", "protocol": {"choice": "bgp"}});
    let msg = schema::encode(&table_action::M_CONTROL_ACTION, &bgp, "").unwrap();
    let a = call(
        &s,
        Some(TOKEN),
        "SetControlAction",
        Holding::of(msg).encode_to_vec(),
    );
    assert_eq!(a.status, 3, "INVALID_ARGUMENT: {a:?}");
    assert_eq!(
        error(&a)["errors"],
        json!([
            "protocol.choice: 'bgp': not supported by linerate agent (it takes ipv4 and ipv6: ping from the devices' addresses)"
        ])
    );
    let up = json!({"choice": "flows", "flows": {"property_names": ["rate"]}});
    let msg = schema::encode(&table_action::M_CONFIG_UPDATE, &up, "").unwrap();
    let a = call(
        &s,
        Some(TOKEN),
        "UpdateConfig",
        Holding::of(msg).encode_to_vec(),
    );
    assert_eq!(a.status, 3, "INVALID_ARGUMENT: {a:?}");
    assert_eq!(
        error(&a)["errors"],
        json!(["no configuration: POST /config first"])
    );
    // And a good one taken, then read back.
    let doc = json!({"ports": [{"name": "tx", "location": "wire0"}]});
    let config = schema::encode(&table_config::M_CONFIG, &doc, "").unwrap();
    let a = call(
        &s,
        Some(TOKEN),
        "SetConfig",
        Holding::of(config.clone()).encode_to_vec(),
    );
    assert_eq!(a.status, 0, "{a:?}");
    assert_eq!(
        a.body,
        Holding::of(Vec::new()).encode_to_vec(),
        "no warnings"
    );
    let a = call(&s, Some(TOKEN), "GetConfig", Empty {}.encode_to_vec());
    assert_eq!(Holding::decode(&a.body[..]).unwrap().bytes(), config);
    // The stream form: the Config itself in one Data piece.
    let a = call(&s, Some(TOKEN), "streamGetConfig", Empty {}.encode_to_vec());
    assert_eq!(a.status, 0, "{a:?}");
    let d = Data::decode(&a.body[..]).unwrap();
    assert_eq!((d.chunk_size, d.datum), (4 << 20, config));
}

/// Connections stay open between calls (snappi keeps its channel), and a
/// source holds at most 8: a 9th takes the slot of the one idle longest,
/// which is closed; the others serve on.
#[test]
fn a_sources_ninth_connection_takes_the_slot_of_the_idlest() {
    let s = Server::start();
    let mut clients: Vec<Client> = (0..8).map(|_| Client::connect(&s)).collect();
    for c in &mut clients {
        let a = c.call(Some(TOKEN), "GetVersion", Vec::new()).unwrap();
        assert_eq!(a.status, 0);
        std::thread::sleep(Duration::from_millis(20));
    }
    // The first used again: now the second has been idle longest.
    let a = clients[0]
        .call(Some(TOKEN), "GetVersion", Vec::new())
        .unwrap();
    assert_eq!(a.status, 0);
    let mut ninth = Client::connect(&s);
    let a = ninth.call(Some(TOKEN), "GetVersion", Vec::new()).unwrap();
    assert_eq!(a.status, 0, "the 9th served");
    // The server closes the evicted one within its 250 ms check.
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        clients[1]
            .call(Some(TOKEN), "GetVersion", Vec::new())
            .is_none(),
        "the idlest connection was closed"
    );
    for (i, c) in clients.iter_mut().enumerate().filter(|(i, _)| *i != 1) {
        let a = c.call(Some(TOKEN), "GetVersion", Vec::new());
        assert_eq!(a.map(|a| a.status), Some(0), "connection {i} serves on");
    }
}
