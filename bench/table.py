#!/usr/bin/env python3
"""Median tables from bench/terminators.sh and bench/h2.sh results.

Usage: table.py RESULTS.tsv CLK_TCK [CRYPTO_FLOOR_US]

RESULTS.tsv rows: workload, server, run, requests, rate, ticks before, ticks
after, errors, backend ticks. Prints per workload the median req/s and
server CPU µs per request of each server, the CPU of each round, the
backend's CPU per request (not part of the server's figure), and the ratios
of tern (or the first server) against each peer and against the best peer.
"""
import statistics
import sys
from collections import defaultdict

path, ticks_per_second = sys.argv[1], int(sys.argv[2])
# µs of one signature + one key agreement on the server CPU (0 = unknown).
floor_us = float(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] else 0.0
rates = defaultdict(list)
cpu = defaultdict(list)
backend = defaultdict(list)
errors = defaultdict(int)
servers, workloads = [], []
for line in open(path):
    fields = line.rstrip("\n").split("\t")
    workload, server, _run, requests, rate, before, after, errs = fields[:8]
    backend_ticks = int(fields[8]) if len(fields) > 8 and fields[8] else None
    requests = int(requests or 0)
    if server not in servers:
        servers.append(server)
    if workload not in workloads:
        workloads.append(workload)
    rates[(workload, server)].append(float(rate or 0))
    errors[(workload, server)] += int(errs or 0)
    if requests > 0:
        us = (int(after) - int(before)) * 1e6 / ticks_per_second / requests
        cpu[(workload, server)].append(us)
        if backend_ticks is not None:
            backend[(workload, server)].append(backend_ticks * 1e6 / ticks_per_second / requests)

labels = {
    "handshake": "full handshake + 1 request (hey -disable-keepalive)",
    "keepalive": "keepalive HTTP/1.1, 100 B (wrk -c50)",
    "h2": "HTTP/2, 100 B (h2load -c50 -m10)",
}


def med(xs):
    return statistics.median(xs) if xs else None


header = "| workload | " + " | ".join(f"{s} req/s | {s} CPU µs/req" for s in servers) + " |"
print(header)
print("|" + "---|" * (1 + 2 * len(servers)))
for workload in workloads:
    cells = []
    for server in servers:
        r, c = med(rates.get((workload, server))), med(cpu.get((workload, server)))
        cells.append(f"{r:.0f}" if r is not None else "—")
        cells.append(f"{c:.1f}" if c is not None else "—")
    print(f"| {labels.get(workload, workload)} | " + " | ".join(cells) + " |")

print()
print("Server CPU µs/req of each round:")
print()
for workload in workloads:
    rounds = "; ".join(
        f"{s} " + " / ".join(f"{x:.1f}" for x in cpu.get((workload, s), []))
        for s in servers
    )
    print(f"- {workload}: {rounds}")

if any(backend.values()):
    print()
    print("Backend CPU µs/req (its own process, not counted in the server figures):")
    print()
    for workload in workloads:
        cells = ", ".join(
            f"{s} {med(backend[(workload, s)]):.1f}" for s in servers if backend.get((workload, s))
        )
        print(f"- {workload}: {cells}")

if floor_us > 0 and "handshake" in workloads:
    print()
    for server in servers:
        c = med(cpu.get(("handshake", server)))
        if c is not None:
            print(f"- handshake: {server} = {c / floor_us:.1f} x the crypto "
                  f"floor ({floor_us:.0f} µs: one signature + one X25519)")

if len(servers) >= 2:
    base = "tern" if "tern" in servers else servers[0]
    peers = [s for s in servers if s != base]
    print()
    print(f"Ratios of {base} (CPU: lower is better; req/s: higher is better):")
    print()
    for workload in workloads:
        mine = med(cpu.get((workload, base)))
        mine_rate = med(rates.get((workload, base)))
        peer_cpu = {p: med(cpu.get((workload, p))) for p in peers}
        peer_cpu = {p: c for p, c in peer_cpu.items() if c is not None}
        if mine is None or not peer_cpu:
            continue
        each = ", ".join(f"{mine / c:.2f} x {p}" for p, c in peer_cpu.items())
        best = min(peer_cpu, key=peer_cpu.get)
        print(f"- {workload}: {base} CPU per request = {each}; "
              f"**{mine / peer_cpu[best]:.2f} x the best peer** ({best}, {peer_cpu[best]:.1f} µs)")
        peer_rate = {p: med(rates.get((workload, p))) for p in peer_cpu}
        fastest = max(peer_rate, key=peer_rate.get)
        if mine_rate and peer_rate[fastest]:
            print(f"- {workload}: {base} req/s = {mine_rate / peer_rate[fastest]:.2f} x the fastest "
                  f"peer ({fastest}, {peer_rate[fastest]:.0f} req/s)")

failed = {k: v for k, v in errors.items() if v}
if failed:
    print()
    for (workload, server), n in failed.items():
        line = f"!!!! WARNING: {workload}: {server} had {n} failed requests or socket errors"
        print(line)
        print(line, file=sys.stderr)
