#!/usr/bin/env python3
"""A port's capture independent of flows, driven by snappi: p2 (--rx)
captured with no flow running, known frames sent into it from the other
end of the wire (a raw socket on --tx), then one flow of 20 frames to it
while it still captures, then frames after its stop. Prints the
captured frames (hex, FCS included) and the flow's counts as JSON for
the Rust test (crates/linerate/tests/agent_port_capture.rs).

    agent_port_capture.py --location https://127.0.0.1:8443 --token T \\
        --tx veth0 --rx veth1 [--grpc --cert cert.pem]

Over gRPC the capture is asked as pcapng, over HTTP as pcap.
"""
import argparse
import json
import socket
import struct
import time

from agent_headers import api_for, udp_flow

RAW = 50
SRC = bytes.fromhex("020000000303")
DST = bytes.fromhex("020000000404")


def raw_frame(k, tag):
    """Frame k of a batch: 60 + k bytes, local experimental ether type."""
    body = struct.pack(">BH", tag, k) + bytes((k + i) % 256 for i in range(60 + k - 17))
    return DST + SRC + b"\x88\xb5" + body


def send_raw(iface, tag, n):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    for k in range(n):
        s.send(raw_frame(k, tag))
    s.close()


def quiet(iface):
    """No IPv6 on the wire: nothing but the test's frames arrives."""
    with open(f"/proc/sys/net/ipv6/conf/{iface}/disable_ipv6", "w") as f:
        f.write("1")


def config(api, args):
    c = api.config()
    ptx, prx = c.ports.port(name="p1", location=args.tx).port(name="p2", location=args.rx)
    c.captures.capture(name="cap", port_names=[prx.name],
                       format="pcapng" if args.grpc else "pcap")
    u = udp_flow(c, ptx, prx)
    u.dst_port.value = 6000
    return c


def frames(data):
    """The frames of a pcap or pcapng file."""
    out = []
    if data[:4] == b"\x0a\x0d\x0d\x0a":
        at = 0
        endian = "<" if data[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
        while at + 12 <= len(data):
            kind, length = struct.unpack(endian + "II", data[at:at + 8])
            if kind == 6:
                incl = struct.unpack(endian + "I", data[at + 20:at + 24])[0]
                out.append(data[at + 28:at + 28 + incl])
            at += length
        return out
    endian = "<" if data[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    at = 24
    while at + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + "IIII", data[at:at + 16])
        out.append(data[at + 16:at + 16 + incl])
        at += 16 + incl
    return out


def capture(api, state):
    cs = api.control_state()
    cs.port.capture.port_names = ["p2"]
    cs.port.capture.state = state
    api.set_control_state(cs)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--location", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--tx", required=True)
    p.add_argument("--rx", required=True)
    p.add_argument("--grpc", action="store_true")
    p.add_argument("--cert")
    args = p.parse_args()
    quiet(args.tx)
    quiet(args.rx)
    api = api_for(args)
    api.set_config(config(api, args))
    time.sleep(0.3)
    # Before the start: not captured.
    send_raw(args.tx, 0, 5)
    time.sleep(0.2)
    capture(api, "start")
    send_raw(args.tx, 1, RAW)
    time.sleep(0.2)
    cs = api.control_state()
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.START
    api.set_control_state(cs)
    req = api.metrics_request()
    req.flow.flow_names = ["f"]
    deadline = time.time() + 20
    while True:
        m = api.get_metrics(req).flow_metrics[0]
        if m.transmit == m.STOPPED or time.time() > deadline:
            break
        time.sleep(0.1)
    send_raw(args.tx, 2, 3)
    time.sleep(0.2)
    capture(api, "stop")
    # After the stop: not captured.
    send_raw(args.tx, 3, 5)
    time.sleep(0.2)
    creq = api.capture_request()
    creq.port_name = "p2"
    got = frames(api.get_capture(creq).read())
    print(json.dumps({"transmit": m.transmit, "frames_tx": int(m.frames_tx),
                      "frames_rx": int(m.frames_rx),
                      "frames": [f.hex() for f in got]}))


if __name__ == "__main__":
    main()
