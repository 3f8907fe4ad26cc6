#!/usr/bin/env python3
"""Drives a linerate agent with snappi, as an OTG user would: a request
without the token (refused), a configuration of three flows, start, poll
until every flow reads stopped, then the flow and port metrics. Prints one
JSON document for the Rust test (crates/linerate/tests/agent_snappi.rs)
to check against what it counted on the wire itself.

    agent_flows.py --location https://127.0.0.1:8443 --token T \
        --tx veth0 --rx veth1 [--rx-location ...]
"""
import argparse
import json
import sys
import time

import snappi


def api_for(location, token):
    api = snappi.api(location=location, verify=False)
    if token is not None:
        # snappi has no option for it: the session's headers carry it.
        api._transport._session.headers["Authorization"] = "Bearer " + token
    return api


def error_of(call):
    try:
        call()
    except Exception as e:  # snappi raises Exception(Error)
        return str(e)
    return None


def config(api, tx, rx, rx_location):
    c = api.config()
    ptx, prx = c.ports.port(name="tx", location=tx).port(name="rx", location=rx_location or rx)

    # f1: IPv6/UDP, 4 source ports, exactly 1000 frames of 128 bytes, latency.
    f1 = c.flows.flow(name="f1")[-1]
    f1.tx_rx.port.tx_name = ptx.name
    f1.tx_rx.port.rx_names = [prx.name]
    f1.size.fixed = 128
    f1.rate.pps = 2000
    f1.duration.fixed_packets.packets = 1000
    f1.metrics.enable = True
    f1.metrics.latency.enable = True
    eth, ip, udp = f1.packet.ethernet().ipv6().udp()
    eth.src.value = "02:00:00:00:01:01"
    ip.src.value = "2001:db8::1"
    ip.dst.value = "2001:db8::2"
    udp.src_port.increment.start = 5000
    udp.src_port.increment.step = 1
    udp.src_port.increment.count = 4
    udp.dst_port.value = 7001

    # f2: IPv4/UDP, IMIX sizes, two destinations, one second at 500 frames/s.
    f2 = c.flows.flow(name="f2")[-1]
    f2.tx_rx.port.tx_name = ptx.name
    f2.tx_rx.port.rx_names = [prx.name]
    f2.size.weight_pairs.predefined = "imix"
    f2.rate.pps = 500
    f2.duration.fixed_seconds.seconds = 1
    f2.metrics.enable = True
    eth, ip, udp = f2.packet.ethernet().ipv4().udp()
    eth.src.value = "02:00:00:00:01:02"
    ip.src.value = "198.18.0.1"
    ip.dst.values = ["198.18.0.3", "198.18.0.2"]
    udp.src_port.value = 5100
    udp.dst_port.value = 7002

    # f3: IPv4/TCP SYNs, sizes 80 to 140 by 30, 300 frames at 1 Mbit/s.
    f3 = c.flows.flow(name="f3")[-1]
    f3.tx_rx.port.tx_name = ptx.name
    f3.tx_rx.port.rx_names = [prx.name]
    f3.size.increment.start = 80
    f3.size.increment.end = 140
    f3.size.increment.step = 30
    f3.rate.kbps = 1000
    f3.duration.fixed_packets.packets = 300
    f3.metrics.enable = True
    eth, ip, tcp = f3.packet.ethernet().ipv4().tcp()
    eth.src.value = "02:00:00:00:01:03"
    ip.src.value = "198.18.0.1"
    ip.dst.increment.start = "198.18.0.10"
    ip.dst.increment.step = "0.0.0.2"
    ip.dst.increment.count = 3
    ip.priority.dscp.phb.value = 46
    tcp.src_port.value = 5200
    tcp.dst_port.value = 7003
    tcp.ctl_syn.value = 1
    return c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--location", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--tx", required=True)
    ap.add_argument("--rx", required=True)
    ap.add_argument("--rx-location")
    ap.add_argument("--deadline", type=float, default=60.0)
    a = ap.parse_args()
    out = {}

    # Without the token, and with a wrong one: refused.
    out["no_token"] = error_of(lambda: api_for(a.location, None).get_config())
    out["bad_token"] = error_of(lambda: api_for(a.location, "x" * 32).get_config())

    api = api_for(a.location, a.token)
    v = api.get_version()
    out["version"] = v.serialize(v.DICT)

    # A port outside the allow-list: refused with the field's path.
    bad = api.config()
    bad.ports.port(name="p", location="eth99")
    out["bad_port"] = error_of(lambda: api.set_config(bad))

    c = config(api, a.tx, a.rx, a.rx_location)
    w = api.set_config(c)
    out["warnings"] = list(w.warnings)

    cs = api.control_state()
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.START
    t0 = time.monotonic()
    api.set_control_state(cs)

    req = api.metrics_request()
    req.flow.flow_names = []
    polls = 0
    while True:
        polls += 1
        m = api.get_metrics(req)
        states = [f.transmit for f in m.flow_metrics]
        if all(s == "stopped" for s in states):
            break
        if time.monotonic() - t0 > a.deadline:
            print(json.dumps({"error": "flows still %s after %.0f s" % (states, a.deadline)}))
            return 1
        time.sleep(0.2)
    out["polls"] = polls
    out["seconds"] = time.monotonic() - t0
    out["flow_metrics"] = json.loads(m.serialize())["flow_metrics"]
    preq = api.metrics_request()
    preq.port.port_names = []
    out["port_metrics"] = json.loads(api.get_metrics(preq).serialize())["port_metrics"]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
