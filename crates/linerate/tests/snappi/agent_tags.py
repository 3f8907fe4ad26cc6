#!/usr/bin/env python3
"""Sends two tagged flows through a linerate agent with snappi and
prints their flow metrics' tagged rows as one JSON document for the Rust
test (crates/linerate/tests/agent_tags.rs):

- "exact": ipv4 src 198.18.1.1/198.18.1.2 tagged by its last byte
  ("host"), udp dst_port 6000..6003 tagged whole ("dst");
- "pair": udp dst_port 7000..7003 tagged by its top 15 bits ("pair"),
  so two ports share a value;

22 frames of 128 bytes each, latency measured. Read three ways: the
default request, with `include` false, and filtered to one "pair" value
with frames_rx only. Beside them, "long": 6,000 frames at 2,000 a second,
udp dst_port 8000/8001 tagged whole ("half"), its flow and rows' rates
sampled while it runs, its rows' counts, loss and latency once stopped.

    agent_tags.py --location https://127.0.0.1:8443 --token T \\
        --tx veth0 --rx veth1 [--grpc --cert cert.pem]
"""
import argparse
import json
import time

import snappi
from agent_headers import api_for

FRAMES = 22
LONG = 6000


def config(api, tx, rx):
    c = api.config()
    ptx, prx = c.ports.port(name="p1", location=tx).port(name="p2", location=rx)
    for name, host, port in (("exact", 1, 6000), ("pair", 2, 7000), ("long", 3, 8000)):
        f = c.flows.flow(name=name)[-1]
        f.tx_rx.port.tx_name = ptx.name
        f.tx_rx.port.rx_names = [prx.name]
        f.metrics.enable = True
        f.metrics.latency.enable = True
        f.duration.fixed_packets.packets = LONG if name == "long" else FRAMES
        f.size.fixed = 128
        f.rate.pps = 2000 if name == "long" else 1000
        eth, ip, udp = f.packet.ethernet().ipv4().udp()[-3:]
        eth.src.value = "02:00:00:00:0%d:01" % host
        eth.dst.value = "02:00:00:00:0%d:02" % host
        ip.dst.value = "198.18.2.1"
        udp.src_port.value = 5000
        udp.dst_port.increment.start = port
        udp.dst_port.increment.step = 1
        udp.dst_port.increment.count = 2 if name == "long" else 4
        if name == "long":
            ip.src.value = "198.18.1.4"
            udp.dst_port.metric_tags.metrictag(name="half")
        elif name == "exact":
            ip.src.values = ["198.18.1.1", "198.18.1.2"]
            ip.src.metric_tags.metrictag(name="host", offset=24, length=8)
            udp.dst_port.metric_tags.metrictag(name="dst")
        else:
            ip.src.value = "198.18.1.3"
            udp.dst_port.metric_tags.metrictag(name="pair", offset=0, length=15)
    return c


def num(x):
    return None if x is None else int(x)


def rows(m):
    return [{"tags": [[t.name, t.value.hex] for t in r.tags],
             "frames_tx": num(r.frames_tx), "frames_rx": num(r.frames_rx),
             "bytes_tx": num(r.bytes_tx), "bytes_rx": num(r.bytes_rx)}
            for r in m.tagged_metrics]


def extras(m):
    """Each row's loss and latency (a dict, or None)."""
    return [[float(r.loss), r.serialize(r.DICT).get("latency")] for r in m.tagged_metrics]


def metrics(api, shape=None, names=("exact", "pair")):
    req = api.metrics_request()
    req.flow.flow_names = list(names)
    if shape:
        shape(req.flow.tagged_metrics)
    return api.get_metrics(req).flow_metrics


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
    cs = api.control_state()
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.START
    api.set_control_state(cs)
    deadline = time.time() + 20
    samples = []
    while True:
        ms = metrics(api)
        lm = metrics(api, names=["long"])[0]
        if lm.transmit == lm.STARTED and float(lm.frames_tx_rate) > 0:
            samples.append({"tx": float(lm.frames_tx_rate), "rx": float(lm.frames_rx_rate),
                            "rows": [[float(r.frames_tx_rate), float(r.frames_rx_rate)]
                                     for r in lm.tagged_metrics]})
        done = all(m.transmit == m.STOPPED for m in list(ms) + [lm])
        if done or time.time() > deadline:
            break
        time.sleep(0.05)

    def off(t):
        t.include = False

    def one(t):
        t.metric_names = ["frames_rx"]
        t.filters.filter(name="pair", values=["0xdad"])

    out = {}
    for m in ms:
        out[m.name] = {"transmit": m.transmit, "frames_tx": int(m.frames_tx),
                       "frames_rx": int(m.frames_rx), "rows": rows(m), "extras": extras(m)}
    out["long"] = {"transmit": lm.transmit, "frames_tx": int(lm.frames_tx),
                   "frames_rx": int(lm.frames_rx), "rows": rows(lm), "extras": extras(lm),
                   "samples": samples}
    out["off"] = [len(m.tagged_metrics) for m in metrics(api, off)]
    out["one"] = [rows(m) for m in metrics(api, one)]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
