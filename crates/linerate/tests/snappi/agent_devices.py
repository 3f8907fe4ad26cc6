#!/usr/bin/env python3
"""Drives a linerate agent's emulated devices with snappi, as a user
testing through a router would: devices d1 (port p1) and d2 (port p2)
with IPv4 and IPv6 addresses and their gateways, d3 on p1 whose gateway
does not exist; waits for the gateways' MACs in monitor/states, runs an
IPv4 and an IPv6 flow from d1 to d2 until they read stopped, tries a
flow from d3 (refused: its gateway is not resolved) and a configuration
whose flow names a device (refused, with its path). Prints one JSON
document for the Rust test (crates/linerate/tests/agent_devices.rs).

    agent_devices.py --location https://127.0.0.1:8443 --token T
"""
import argparse
import json
import sys
import time

import snappi

FRAMES = 1000


def api_for(location, token):
    api = snappi.api(location=location, verify=False)
    api._transport._session.headers["Authorization"] = "Bearer " + token
    return api


def error_of(call):
    try:
        call()
    except Exception as e:  # snappi raises Exception(Error)
        return str(e)
    return None


def device(c, name, port, mac, v4, gw4, v6, gw6):
    d = c.devices.device(name=name)[-1]
    e = d.ethernets.add(name=name + ".eth", mac=mac)
    e.connection.port_name = port
    e.ipv4_addresses.add(name=name + ".ipv4", address=v4, gateway=gw4, prefix=24)
    if v6:
        e.ipv6_addresses.add(name=name + ".ipv6", address=v6, gateway=gw6, prefix=64)


def flow(c, name, tx, rx, v6, dst_port):
    f = c.flows.flow(name=name)[-1]
    f.tx_rx.device.tx_names = [tx]
    f.tx_rx.device.rx_names = [rx]
    f.size.fixed = 128
    f.rate.pps = 2000
    f.duration.fixed_packets.packets = FRAMES
    f.metrics.enable = True
    if v6:
        _, _, udp = f.packet.ethernet().ipv6().udp()
    else:
        _, _, udp = f.packet.ethernet().ipv4().udp()
    udp.src_port.value = 5000
    udp.dst_port.value = dst_port


def config(api):
    c = api.config()
    c.ports.port(name="p1", location="p1").port(name="p2", location="p2")
    device(c, "d1", "p1", "02:00:00:00:01:02", "198.18.1.2", "198.18.1.1",
           "2001:db8:1::2", "2001:db8:1::1")
    device(c, "d2", "p2", "02:00:00:00:02:02", "198.18.2.2", "198.18.2.1",
           "2001:db8:2::2", "2001:db8:2::1")
    device(c, "d3", "p1", "02:00:00:00:01:03", "198.18.1.3", "198.18.1.77",
           None, None)
    flow(c, "v4", "d1.ipv4", "d2.ipv4", False, 7004)
    flow(c, "v6", "d1.ipv6", "d2.ipv6", True, 7006)
    flow(c, "lost", "d3.ipv4", "d2.ipv4", False, 7009)
    return c


def neighbors(api, v6):
    r = api.states_request()
    if v6:
        r.ipv6_neighbors.ethernet_names = ["d1.eth", "d2.eth"]
        got = api.get_states(r).ipv6_neighbors
        key = "ipv6_address"
    else:
        r.ipv4_neighbors.ethernet_names = ["d1.eth", "d2.eth", "d3.eth"]
        got = api.get_states(r).ipv4_neighbors
        key = "ipv4_address"
    return [
        {"ethernet_name": n.ethernet_name, "address": getattr(n, key),
         "link_layer_address": n.link_layer_address}
        for n in got
    ]


def wait_resolved(api):
    """Until d1's and d2's gateways are resolved (both families), 10 s."""
    deadline = time.time() + 10
    while True:
        v4, v6 = neighbors(api, False), neighbors(api, True)
        done = [n for n in v4 + v6
                if n["link_layer_address"] and n["ethernet_name"] != "d3.eth"]
        if len(done) == 4 or time.time() > deadline:
            return v4, v6
        time.sleep(0.1)


def run(api, names):
    cs = api.control_state()
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.START
    cs.traffic.flow_transmit.flow_names = names
    api.set_control_state(cs)
    deadline = time.time() + 60
    while time.time() < deadline:
        req = api.metrics_request()
        req.flow.flow_names = names
        m = api.get_metrics(req).flow_metrics
        if all(f.transmit == "stopped" for f in m):
            return [
                {"name": f.name, "frames_tx": f.frames_tx, "frames_rx": f.frames_rx,
                 "bytes_tx": f.bytes_tx, "bytes_rx": f.bytes_rx,
                 "port_tx": f.port_tx, "port_rx": f.port_rx}
                for f in m
            ]
        time.sleep(0.2)
    raise SystemExit("flows did not stop within 60 s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--location", required=True)
    ap.add_argument("--token", required=True)
    a = ap.parse_args()
    api = api_for(a.location, a.token)
    out = {}

    bad = config(api)
    bad.flows[0].tx_rx.device.tx_names = ["d1"]
    out["names_a_device"] = error_of(lambda: api.set_config(bad))

    api.set_config(config(api))
    out["ipv4_neighbors"], out["ipv6_neighbors"] = wait_resolved(api)
    out["flows"] = run(api, ["v4", "v6"])
    cs = api.control_state()
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.START
    cs.traffic.flow_transmit.flow_names = ["lost"]
    out["lost"] = error_of(lambda: api.set_control_state(cs))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
