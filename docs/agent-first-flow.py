#!/usr/bin/env python3
"""A first flow through `linerate agent` with snappi (the OTG client), on
the lab's `dut` topology: the generator's port `ga` sends 50,000 UDP frames
of 512 bytes from 16 source ports to 198.18.1.2, through the device (the
kernel routing, `lr-dut`), and its port `gb` receives them. Prints the
flow's metrics; exits 1 unless every frame sent arrived.

    pip install snappi==1.62.0        # in a venv
    linerate lab up --topology dut
    echo my-lab-token-0123456789 > token
    ip netns exec lr-gen linerate agent --allow-iface ga,gb --token-file token &
    ip netns exec lr-gen python3 docs/agent-first-flow.py --token-file token

docs/agent.md shows a real run; tests/readme_examples.rs runs it.
"""
import argparse
import sys
import time

import snappi

# The lab's fixed MACs (docs/lab.md): the generator's ga and the device's da.
GA_MAC = "02:00:00:00:01:01"
DA_MAC = "02:00:00:00:02:01"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--location", default="https://127.0.0.1:8443")
    p.add_argument("--token-file", required=True)
    a = p.parse_args()

    api = snappi.api(location=a.location, verify=False)
    # snappi has no option for a bearer token: its session's headers carry it.
    with open(a.token_file) as f:
        token = f.readline().strip()
    api._transport._session.headers["Authorization"] = "Bearer " + token

    c = api.config()
    tx, rx = c.ports.port(name="tx", location="ga").port(name="rx", location="gb")
    flow = c.flows.flow(name="first")[-1]
    flow.tx_rx.port.tx_name = tx.name
    flow.tx_rx.port.rx_names = [rx.name]
    flow.size.fixed = 512
    flow.rate.pps = 10000
    flow.duration.fixed_packets.packets = 50000
    flow.metrics.enable = True
    flow.metrics.latency.enable = True
    eth, ip, udp = flow.packet.ethernet().ipv4().udp()
    eth.src.value = GA_MAC
    eth.dst.value = DA_MAC  # the device routes it on
    ip.src.value = "198.18.0.1"
    ip.dst.value = "198.18.1.2"
    udp.src_port.increment.start = 5000
    udp.src_port.increment.step = 1
    udp.src_port.increment.count = 16
    udp.dst_port.value = 7000
    api.set_config(c)

    cs = api.control_state()
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.START
    api.set_control_state(cs)

    req = api.metrics_request()
    req.flow.flow_names = ["first"]
    deadline = time.time() + 30
    while True:
        m = api.get_metrics(req).flow_metrics[0]
        if m.transmit == m.STOPPED:
            break
        if time.time() > deadline:
            sys.exit("the flow did not stop within 30 s")
        time.sleep(0.5)

    print("frames_tx:", m.frames_tx)
    print("frames_rx:", m.frames_rx)
    print("loss:", m.loss)
    lat = m.latency
    print(
        "latency ns: min %.0f, average %.0f, max %.0f"
        % (lat.minimum_ns, lat.average_ns, lat.maximum_ns)
    )
    sys.exit(0 if m.frames_tx == m.frames_rx == 50000 else 1)


if __name__ == "__main__":
    main()
