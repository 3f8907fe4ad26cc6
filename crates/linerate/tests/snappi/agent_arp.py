#!/usr/bin/env python3
"""Two ARP flows through a linerate agent with snappi, sharing their
receive port: flow "a" (30 frames of 64 bytes, its fields stepped per
frame: operation values 1, 2; sender MAC increment by 1 over 5; sender IP
increment over 3; target IP decrement by 2 over 4) and flow "b" (20
frames of 80 bytes, another sender IP), flow "c" (50 frames of 64 bytes
behind a vlan tag, id 100, priority 3) and flow "d" (24 frames, two
cycles of the IMIX). The receive port is captured.
Prints each flow's metrics and the captured ARP frames (hex, FCS
included) as JSON for the Rust test (crates/linerate/tests/agent_arp.rs).

    agent_arp.py --location https://127.0.0.1:8443 --token T \\
        --tx veth0 --rx veth1 [--grpc --cert cert.pem]
"""
import argparse
import json
import time

from agent_headers import api_for
from agent_port_capture import capture, frames


def arp_flow(c, name, packets, size, vlan=False):
    f = c.flows.flow(name=name)[-1]
    f.tx_rx.port.tx_name = "p1"
    f.tx_rx.port.rx_names = ["p2"]
    f.metrics.enable = True
    f.duration.fixed_packets.packets = packets
    if size == "imix":
        f.size.weight_pairs.predefined = "imix"
    else:
        f.size.fixed = size
    f.rate.pps = 1000
    if vlan:
        e, v, a = f.packet.ethernet().vlan().arp()[-3:]
        v.id.value = 100
        v.priority.value = 3
    else:
        e, a = f.packet.ethernet().arp()[-2:]
    e.src.value = "02:00:00:00:05:01"
    e.dst.value = "ff:ff:ff:ff:ff:ff"
    return a


def config(api, args):
    c = api.config()
    c.ports.port(name="p1", location=args.tx).port(name="p2", location=args.rx)
    c.captures.capture(name="cap", port_names=["p2"], format="pcap")
    a = arp_flow(c, "a", 30, 64)
    a.operation.values = [1, 2]
    a.sender_hardware_addr.increment.start = "02:00:00:00:0a:00"
    a.sender_hardware_addr.increment.step = "00:00:00:00:00:01"
    a.sender_hardware_addr.increment.count = 5
    a.sender_protocol_addr.increment.start = "198.18.5.1"
    a.sender_protocol_addr.increment.step = "0.0.0.1"
    a.sender_protocol_addr.increment.count = 3
    a.target_protocol_addr.decrement.start = "198.18.6.10"
    a.target_protocol_addr.decrement.step = "0.0.0.2"
    a.target_protocol_addr.decrement.count = 4
    b = arp_flow(c, "b", 400, 80)
    b.sender_protocol_addr.value = "198.18.7.1"
    b.target_protocol_addr.value = "198.18.7.2"
    t = arp_flow(c, "c", 50, 64, vlan=True)
    t.sender_protocol_addr.value = "198.18.8.1"
    m = arp_flow(c, "d", 24, "imix")
    m.sender_protocol_addr.value = "198.18.9.1"
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
    api.set_config(config(api, args))
    capture(api, "start")
    cs = api.control_state()
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.START
    api.set_control_state(cs)
    req = api.metrics_request()
    req.flow.flow_names = ["a", "b", "c", "d"]
    deadline = time.time() + 20
    rate_max = {}
    while True:
        ms = api.get_metrics(req).flow_metrics
        for m in ms:
            rate_max[m.name] = max(rate_max.get(m.name, 0.0), float(m.frames_rx_rate))
        if all(m.transmit == m.STOPPED for m in ms) or time.time() > deadline:
            break
        time.sleep(0.1)
    capture(api, "stop")
    creq = api.capture_request()
    creq.port_name = "p2"
    got = [f for f in frames(api.get_capture(creq).read()) if f[12:14] == b"\x08\x06"]
    flows = {}
    for m in ms:
        flows[m.name] = {"transmit": m.transmit, "frames_tx": int(m.frames_tx),
                         "frames_rx": int(m.frames_rx), "bytes_tx": int(m.bytes_tx),
                         "bytes_rx": int(m.bytes_rx),
                         "frames_rx_rate_max": rate_max.get(m.name, 0.0),
                         "latency": m.serialize(m.DICT).get("latency")}
    print(json.dumps({"flows": flows, "frames": [f.hex() for f in got]}))


if __name__ == "__main__":
    main()
