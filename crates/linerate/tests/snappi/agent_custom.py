#!/usr/bin/env python3
"""Sends a flow with a `custom` header through a linerate agent with
snappi (over HTTP, or over gRPC with --grpc), captures it on the receive
port, and prints one JSON document for the Rust test
(crates/linerate/tests/agent_custom.rs): the flow's metrics and, for each
captured frame of the flow in order, its UDP ports and the bytes after the
probe; then, in a configuration of its own, a flow with `random` UDP
ports (from 198.18.1.2): its metrics and its captured frames' ports.

    agent_custom.py --location https://127.0.0.1:8443 --token T \
        --tx veth0 --rx veth1 [--grpc --cert cert.pem]
"""
import argparse
import json
import struct
import time

import snappi

CUSTOM = b"..QUICKSTART SNAPPI.."


def api_for(args):
    if not args.grpc:
        api = snappi.api(location=args.location, verify=False)
        # snappi has no option for it: the session's headers carry it.
        api._transport._session.headers["Authorization"] = "Bearer " + args.token
        return api
    import grpc
    from snappi import otg_pb2_grpc

    api = snappi.api(location=args.location, transport="grpc")
    creds = grpc.composite_channel_credentials(
        grpc.ssl_channel_credentials(open(args.cert, "rb").read()),
        grpc.access_token_call_credentials(args.token),
    )
    api._channel = grpc.secure_channel(args.location, creds)
    api._stub = otg_pb2_grpc.OpenapiStub(api._channel)
    return api


def config(api, tx, rx):
    c = api.config()
    ptx, prx = c.ports.port(name="p1", location=tx).port(name="p2", location=rx)
    c.captures.capture(name="cap", port_names=[prx.name], format="pcap")
    f = c.flows.flow(name="custom")[-1]
    f.tx_rx.port.tx_name = ptx.name
    f.tx_rx.port.rx_names = [prx.name]
    f.metrics.enable = True
    f.duration.fixed_packets.packets = 20
    f.size.fixed = 128
    f.rate.pps = 1000
    eth, ip, udp, cus = f.packet.ethernet().ipv4().udp().custom()
    eth.src.value = "02:00:00:00:01:01"
    eth.dst.value = "02:00:00:00:01:02"
    ip.src.value = "198.18.1.1"
    ip.dst.value = "198.18.2.1"
    udp.src_port.values = [5010, 5015, 5020, 5025, 5030]
    udp.dst_port.increment.start = 6010
    udp.dst_port.increment.step = 5
    udp.dst_port.increment.count = 5
    # As the suite's quickstart writes them: two hex digits a byte.
    cus.bytes = "".join(hex(c)[2:] for c in CUSTOM)
    return c


def random_config(api, tx, rx):
    """A flow whose UDP ports are the model's `random`: source 1024..65535
    seed 42, 5 values; destination 5000..5009 with the model's default
    seed (1), 4 values. A configuration of its own: a port's capture is
    kept by one flow's receiver while it runs (docs/agent.md)."""
    c = api.config()
    ptx, prx = c.ports.port(name="p1", location=tx).port(name="p2", location=rx)
    c.captures.capture(name="cap", port_names=[prx.name], format="pcap")
    f = c.flows.flow(name="random")[-1]
    f.tx_rx.port.tx_name = ptx.name
    f.tx_rx.port.rx_names = [prx.name]
    f.metrics.enable = True
    f.duration.fixed_packets.packets = 20
    f.size.fixed = 128
    f.rate.pps = 1000
    eth, ip, udp = f.packet.ethernet().ipv4().udp()
    eth.src.value = "02:00:00:00:01:01"
    eth.dst.value = "02:00:00:00:01:02"
    ip.src.value = "198.18.1.2"
    ip.dst.value = "198.18.2.1"
    udp.src_port.random.min = 1024
    udp.src_port.random.max = 65535
    udp.src_port.random.seed = 42
    udp.src_port.random.count = 5
    udp.dst_port.random.min = 5000
    udp.dst_port.random.max = 5009
    udp.dst_port.random.count = 4
    return c


def pcap_frames(data):
    """The frames of a pcap file (microsecond, little- or big-endian)."""
    endian = "<" if data[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    at, out = 24, []
    while at + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + "IIII", data[at:at + 16])
        out.append(data[at + 16:at + 16 + incl])
        at += 16 + incl
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--location", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--tx", required=True)
    p.add_argument("--rx", required=True)
    p.add_argument("--grpc", action="store_true")
    p.add_argument("--cert")
    args = p.parse_args()
    api = api_for(args)
    api.set_config(config(api, args.tx, args.rx))
    m, pcap = run(api, "custom")
    frames = []
    for fr in pcap_frames(pcap):
        # Ethernet (0x0800), IPv4 from 198.18.1.1, UDP: the flow's.
        if len(fr) < 81 or fr[12:14] != b"\x08\x00" or fr[23] != 17:
            continue
        if fr[26:30] != bytes([198, 18, 1, 1]):
            continue
        sport, dport = struct.unpack(">HH", fr[34:38])
        frames.append({"len": len(fr), "src_port": sport, "dst_port": dport,
                       "after_probe": fr[60:60 + len(CUSTOM)].decode("latin-1")})
    api.set_config(random_config(api, args.tx, args.rx))
    mr, pcap = run(api, "random")
    random_frames = []
    for fr in pcap_frames(pcap):
        if len(fr) < 60 or fr[12:14] != b"\x08\x00" or fr[23] != 17:
            continue
        if fr[26:30] == bytes([198, 18, 1, 2]):
            sport, dport = struct.unpack(">HH", fr[34:38])
            random_frames.append({"len": len(fr), "src_port": sport, "dst_port": dport})
    print(json.dumps({"transmit": m.transmit, "frames_tx": int(m.frames_tx),
                      "frames_rx": int(m.frames_rx), "frames": frames,
                      "random": {"transmit": mr.transmit, "frames_tx": int(mr.frames_tx),
                                 "frames_rx": int(mr.frames_rx), "frames": random_frames}}))


def run(api, name):
    """Starts p2's capture and the traffic, waits for flow `name` to stop
    (20 s at most), stops the capture: the flow's metrics and the pcap."""
    cs = api.control_state()
    cs.port.capture.port_names = ["p2"]
    cs.port.capture.state = cs.port.capture.START
    api.set_control_state(cs)
    cs = api.control_state()
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.START
    api.set_control_state(cs)

    req = api.metrics_request()
    req.flow.flow_names = [name]
    deadline = time.time() + 20
    while True:
        m = api.get_metrics(req).flow_metrics[0]
        if m.transmit == m.STOPPED or time.time() > deadline:
            break
        time.sleep(0.1)

    cs = api.control_state()
    cs.port.capture.port_names = ["p2"]
    cs.port.capture.state = cs.port.capture.STOP
    api.set_control_state(cs)
    creq = api.capture_request()
    creq.port_name = "p2"
    return m, api.get_capture(creq).read()


if __name__ == "__main__":
    main()
