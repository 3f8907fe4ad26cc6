#!/usr/bin/env python3
"""Sends one flow of 20 frames (UDP dst 6000..6003 in turn) through a
linerate agent with snappi, its receive port captured through filters
(ethernet src, ipv4 dst and protocol, then a custom field: the UDP
destination with its last bit masked), and prints the captured frames'
UDP destination ports and the flow's counts as JSON for the Rust test
(crates/linerate/tests/agent_capture_filters.rs).

    agent_capture_filters.py --location https://127.0.0.1:8443 --token T \\
        --tx veth0 --rx veth1 [--grpc --cert cert.pem]
"""
import argparse
import json
import struct

from agent_headers import api_for, pcap_frames, run, udp_flow


def config(api, tx, rx):
    c = api.config()
    ptx, prx = c.ports.port(name="p1", location=tx).port(name="p2", location=rx)
    cap = c.captures.capture(name="cap", port_names=[prx.name], format="pcap")[-1]
    eth, ip, custom = cap.filters.ethernet().ipv4().custom()
    eth.src.value = "020000000101"
    ip.dst.value = "c6120201"
    ip.protocol.value = "11"
    custom.offset = 16
    custom.bit_length = 16
    custom.value = "1770"
    custom.mask = "0001"
    u = udp_flow(c, ptx, prx)
    u.dst_port.increment.start = 6000
    u.dst_port.increment.step = 1
    u.dst_port.increment.count = 4
    return c


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
    m, pcap = run(api, "f")
    ports = [struct.unpack(">H", fr[36:38])[0] for fr in pcap_frames(pcap)]
    print(json.dumps({"transmit": m.transmit, "frames_tx": int(m.frames_tx),
                      "frames_rx": int(m.frames_rx), "ports": ports}))


if __name__ == "__main__":
    main()
