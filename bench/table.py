#!/usr/bin/env python3
"""Median table from bench/terminators.sh results (TSV on stdin path)."""
import statistics
import sys
from collections import defaultdict

path, ticks_per_second = sys.argv[1], int(sys.argv[2])
# µs of one signature + one key agreement on the server CPU (0 = unknown).
floor_us = float(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] else 0.0
rates = defaultdict(list)
cpu = defaultdict(list)
servers, workloads = [], []
for line in open(path):
    workload, server, _run, requests, rate, before, after, _errors = line.rstrip("\n").split("\t")
    requests = int(requests or 0)
    if server not in servers:
        servers.append(server)
    if workload not in workloads:
        workloads.append(workload)
    rates[(workload, server)].append(float(rate or 0))
    if requests > 0:
        us = (int(after) - int(before)) * 1e6 / ticks_per_second / requests
        cpu[(workload, server)].append(us)

labels = {
    "handshake": "full handshake + 1 request (hey -disable-keepalive)",
    "keepalive": "keepalive HTTP/1.1, 100 B (wrk -c50)",
}
header = "| workload | " + " | ".join(f"{s} req/s | {s} CPU µs/req" for s in servers) + " |"
print(header)
print("|" + "---|" * (1 + 2 * len(servers)))
for workload in workloads:
    cells = []
    for server in servers:
        r = rates.get((workload, server), [])
        c = cpu.get((workload, server), [])
        cells.append(f"{statistics.median(r):.0f}" if r else "—")
        cells.append(f"{statistics.median(c):.1f}" if c else "—")
    print(f"| {labels.get(workload, workload)} | " + " | ".join(cells) + " |")
if floor_us > 0 and "handshake" in workloads:
    print()
    for server in servers:
        c = cpu.get(("handshake", server))
        if c:
            print(f"- handshake: {server} = {statistics.median(c) / floor_us:.1f} x the crypto "
                  f"floor ({floor_us:.0f} µs: one signature + one X25519)")
if len(servers) >= 2:
    base = servers[0]
    print()
    for workload in workloads:
        for other in servers[1:]:
            a, b = cpu.get((workload, base)), cpu.get((workload, other))
            if a and b:
                print(f"- {workload}: {base} CPU per request = "
                      f"{statistics.median(a) / statistics.median(b):.2f} x {other}")
