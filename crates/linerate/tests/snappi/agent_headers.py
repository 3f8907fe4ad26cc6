#!/usr/bin/env python3
"""Sends a gre, an mpls, an icmp and an icmpv6 flow through a linerate
agent with snappi (each in a configuration of its own: a port's capture
is kept by one flow's receiver), captures each on the receive port, and
prints one JSON document for the Rust test
(crates/linerate/tests/agent_headers.rs): for each flow its metrics and
its captured frames (those from the flow's source MAC), in order, as hex.

    agent_headers.py --location https://127.0.0.1:8443 --token T \
        --tx veth0 --rx veth1 [--grpc --cert cert.pem]
"""
import argparse
import json
import struct
import time

import snappi

FRAMES = 20
SRC_MAC = "02:00:00:00:01:01"


def flow_config(api, tx, rx, name):
    c = api.config()
    ptx, prx = c.ports.port(name="p1", location=tx).port(name="p2", location=rx)
    c.captures.capture(name="cap", port_names=[prx.name], format="pcap")
    f = c.flows.flow(name=name)[-1]
    f.tx_rx.port.tx_name = ptx.name
    f.tx_rx.port.rx_names = [prx.name]
    f.metrics.enable = True
    f.duration.fixed_packets.packets = FRAMES
    f.size.fixed = 128
    f.rate.pps = 1000
    eth = f.packet.ethernet()[-1]
    eth.src.value = SRC_MAC
    eth.dst.value = "02:00:00:00:01:02"
    return c, f


def udp_flow(c, ptx, prx):
    """Flow "f" of config `c` from port `ptx` to `prx`: 20 frames of 128
    bytes at 1000 pps, ethernet, ipv4 198.18.1.1 -> 198.18.2.1, udp from
    port 5000; its udp header (the caller sets the destination port)."""
    f = c.flows.flow(name="f")[-1]
    f.tx_rx.port.tx_name = ptx.name
    f.tx_rx.port.rx_names = [prx.name]
    f.metrics.enable = True
    f.duration.fixed_packets.packets = FRAMES
    f.size.fixed = 128
    f.rate.pps = 1000
    e, i, u = f.packet.ethernet().ipv4().udp()[-3:]
    e.src.value = SRC_MAC
    e.dst.value = "02:00:00:00:01:02"
    i.src.value = "198.18.1.1"
    i.dst.value = "198.18.2.1"
    u.src_port.value = 5000
    return u


def gre(api, tx, rx):
    c, f = flow_config(api, tx, rx, "gre")
    outer, g, inner, udp = f.packet.ipv4().gre().ipv4().udp()[-4:]
    outer.src.value = "198.18.1.1"
    outer.dst.value = "198.18.2.1"
    g.checksum_present.value = 1
    inner.src.value = "198.18.3.1"
    inner.dst.value = "198.18.4.1"
    udp.src_port.value = 5000
    udp.dst_port.increment.start = 6000
    udp.dst_port.increment.step = 1
    udp.dst_port.increment.count = 4
    return c


def mpls(api, tx, rx):
    c, f = flow_config(api, tx, rx, "mpls")
    m1, m2, ip, udp = f.packet.mpls().mpls().ipv4().udp()[-4:]
    m1.label.increment.start = 100
    m1.label.increment.step = 1
    m1.label.increment.count = 5
    m1.time_to_live.value = 32
    m2.label.value = 200
    m2.traffic_class.value = 5
    ip.src.value = "198.18.1.2"
    ip.dst.value = "198.18.2.1"
    udp.src_port.values = [7000, 7002]
    udp.dst_port.value = 6000
    return c


def icmp(api, tx, rx):
    c, f = flow_config(api, tx, rx, "icmp")
    ip, i = f.packet.ipv4().icmp()[-2:]
    ip.src.value = "198.18.1.3"
    ip.dst.value = "198.18.2.1"
    i.echo.identifier.increment.start = 1
    i.echo.identifier.increment.step = 1
    i.echo.identifier.increment.count = 3
    i.echo.sequence_number.values = [10, 20]
    return c


def icmpv6(api, tx, rx):
    c, f = flow_config(api, tx, rx, "icmpv6")
    ip, i = f.packet.ipv6().icmpv6()[-2:]
    ip.src.value = "2001:db8::1"
    ip.dst.value = "2001:db8::2"
    i.echo.identifier.value = 0x1234
    i.echo.sequence_number.decrement.start = 100
    i.echo.sequence_number.decrement.step = 2
    i.echo.sequence_number.decrement.count = 4
    return c


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


def pcap_frames(data):
    """The frames of a pcap file (microsecond, little- or big-endian)."""
    endian = "<" if data[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    at, out = 24, []
    while at + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + "IIII", data[at:at + 16])
        out.append(data[at + 16:at + 16 + incl])
        at += 16 + incl
    return out


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
    src = bytes(int(x, 16) for x in SRC_MAC.split(":"))
    out = {}
    for make in (gre, mpls, icmp, icmpv6):
        name = make.__name__
        api.set_config(make(api, args.tx, args.rx))
        m, pcap = run(api, name)
        frames = [fr.hex() for fr in pcap_frames(pcap) if fr[6:12] == src]
        out[name] = {"transmit": m.transmit, "frames_tx": int(m.frames_tx),
                     "frames_rx": int(m.frames_rx), "bytes_tx": int(m.bytes_tx),
                     "bytes_rx": int(m.bytes_rx), "frames": frames}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
