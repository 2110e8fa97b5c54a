#!/usr/bin/env python3
"""Median tables from bench/terminators.sh and bench/h2.sh results.

Usage: table.py RESULTS.tsv CLK_TCK [CRYPTO_FLOOR_US]

RESULTS.tsv rows: workload, server, run, requests, rate, ticks before, ticks
after, errors, backend ticks, then optional NAME=VALUE counters of the round
(bench/h2.sh: see bench/lib.sh proc_counters), printed per request in a
table of every round when present. Prints per workload the median req/s and
server CPU µs per request of each server, the CPU of each round, the
backend's CPU per request (not part of the server's figure), and the ratios
of tern (or the first server) against each peer and against the best peer.
"""
import os
import statistics
import sys
from collections import defaultdict

# A round whose server parked at least this often per request let the
# backend on its CPU run whole batches: the lower of the two levels its
# rounds sit at (BENCHMARKS.md, "why tern's rounds sit at two levels").
PARKED_SWITCHES = 0.02

path, ticks_per_second = sys.argv[1], int(sys.argv[2])
# µs of one signature + one key agreement on the server CPU (0 = unknown).
floor_us = float(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] else 0.0
rates = defaultdict(list)
cpu = defaultdict(list)
# The same, by round: the paired ratios compare rounds taken minutes apart
# at most, which a host whose speed drifts over a run needs.
cpu_by_run = defaultdict(dict)
backend = defaultdict(list)
errors = defaultdict(int)
servers, workloads = [], []
# (workload, server, run, requests, rate, cpu µs/req, backend µs/req, counters)
round_rows = []
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
        cpu_by_run[(workload, server)][_run] = us
        if backend_ticks is not None:
            backend[(workload, server)].append(backend_ticks * 1e6 / ticks_per_second / requests)
        counters = dict(f.split("=", 1) for f in fields[9:] if "=" in f)
        if counters:
            be = backend_ticks * 1e6 / ticks_per_second / requests if backend_ticks is not None else None
            round_rows.append((workload, server, _run, requests, float(rate or 0), us, be, counters))

# The order PMU=1's counts are shown in (bench/counters.sh PMU_EVENTS).
PMU_ORDER = ["pmu_cycles", "pmu_instructions", "pmu_L1-dcache-load-misses",
             "pmu_LLC-load-misses", "pmu_dTLB-load-misses", "pmu_iTLB-load-misses"]

labels = {
    "handshake": "full handshake + 1 request (hey -disable-keepalive)",
    "keepalive": "keepalive HTTP/1.1, 100 B (wrk -c50)",
    "h2": f"HTTP/2, 100 B (h2load {os.environ.get('H2_LOAD', '-c50 -m10')})",
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

if round_rows:
    # Per request unless said: what moved with a round's CPU.
    columns = [
        ("vcs", "vcs", 1), ("nvcs", "nvcs", 1), ("rd+wr", ("syscr", "syscw"), 1),
        ("queued µs", "wait_us", 1), ("slices", "slices", 1),
        ("be vcs", "be_vcs", 1), ("be nvcs", "be_nvcs", 1), ("be queued µs", "be_wait_us", 1),
        ("load CPU µs", "load_ms", 1000),
    ]
    if any("canary0_us" in r[7] for r in round_rows):
        # Not per request: the median µs of the canary's fixed work.
        columns += [("canary CPU 0 µs", "canary0_us", None), ("canary CPU 1 µs", "canary1_us", None)]
    if any("be_sys" in r[7] for r in round_rows):
        columns += [("syscalls", "sys", 1), ("epoll waits", "epoll", 1),
                    ("be syscalls", "be_sys", 1), ("be epoll waits", "be_epoll", 1)]
    pmu_keys = sorted(sorted({k for r in round_rows for k in r[7] if k.startswith("pmu_")}),
                      key=lambda k: PMU_ORDER.index(k) if k in PMU_ORDER else len(PMU_ORDER))
    if pmu_keys:
        # PMU=1 (bench/h2.sh): the server's hardware counts per request, and
        # its instructions per cycle (not per request).
        columns += [(k[len("pmu_"):], k, 1) for k in pmu_keys]
        if "pmu_cycles" in pmu_keys and "pmu_instructions" in pmu_keys:
            columns.append(("IPC", "ipc", None))
    print()
    print("Every round, per request (vcs/nvcs: the server's voluntary (park, then a "
          "wake-up) and nonvoluntary context switches; rd+wr: its read/write-family "
          "system calls, recv*/send* not counted; queued: runnable but waiting for the "
          "CPU; slices: times put on a CPU; be: the backend nginx; be conns: backend "
          "connections opened in the round / open at its end; load CPU: h2load's; "
          "syscalls and epoll waits, SYSCALLS=1: perf stat; cycles, instructions, "
          "misses and IPC, PMU=1: perf stat's hardware counts; others on CPU 0: its busy "
          "time (/proc/stat) less the server's (and the backend's when it runs there), "
          "i.e. what else ran there, near 0 on an idle host; steal: the "
          "hypervisor's; CPU 0 busy %: of the round's time; load CPU %: h2load's share "
          "of CPU 1; canary: median µs of CPU time a fixed piece of work took on "
          "that CPU during the round, bench/canary.py, higher = a slower core):")
    print()
    print("| workload | server | round | req/s | CPU µs | backend CPU µs | "
          + " | ".join(c[0] for c in columns)
          + " | others on CPU 0 µs | steal µs | CPU 0 busy % | load CPU % | be conns opened / open | load avg |")
    print("|" + "---|" * (12 + len(columns)))
    for workload, server, run, requests, rate, us, be, ctr in round_rows:
        cells = []
        for _label, key, scale in columns:
            keys = key if isinstance(key, tuple) else (key,)
            try:
                if key == "ipc":
                    cells.append(f"{float(ctr['pmu_instructions']) / float(ctr['pmu_cycles']):.2f}")
                    continue
                if scale is None:
                    cells.append(ctr[keys[0]])
                    continue
                value = sum(float(ctr[k]) for k in keys) * scale / requests
                cells.append(f"{value:.3f}")
            except (KeyError, ValueError, ZeroDivisionError):
                cells.append("—")
        be_cell = f"{be:.1f}" if be is not None else "—"
        # What else ran on the server's CPU: its busy time less the server's
        # and, when it shares that CPU (BACKEND_CPU=server), the backend's.
        try:
            be_here = ctr.get("be_on_server_cpu", "1") == "1"
            others_us = ((int(ctr["cpu0_ticks"]) * 1e6 / ticks_per_second) / requests - us
                         - ((be or 0) if be_here else 0))
            steal_us = int(ctr["steal0_ticks"]) * 1e6 / ticks_per_second / requests
            cells.append(f"{others_us:.1f}")
            cells.append(f"{steal_us:.2f}")
        except (KeyError, ValueError):
            cells += ["—", "—"]
        # Which CPU was the bottleneck: the share of the round's time CPU 0
        # (server, and the backend under BACKEND_CPU=server) was busy, and
        # the load tool's own share of CPU 1, over the counted window.
        try:
            # The window the counters cover: h2load's handshakes included.
            seconds = int(ctr["wall_ms"]) / 1000
            cells.append(f"{int(ctr['cpu0_ticks']) / ticks_per_second / seconds * 100:.0f}")
            cells.append(f"{int(ctr['load_ms']) / 1000 / seconds * 100:.0f}")
        except (KeyError, ValueError, ZeroDivisionError):
            cells += ["—", "—"]
        print(f"| {workload} | {server} | {run} | {rate:.0f} | {us:.1f} | {be_cell} | "
              + " | ".join(cells)
              + f" | {ctr.get('be_opened', '—')} / {ctr.get('be_open', '—')} | {ctr.get('loadavg', '—')} |")

    # A round's CPU follows how often the server and the backend, sharing
    # CPU 0, take it from each other (BENCHMARKS.md, "why tern's rounds sit
    # at two levels"): the server preempted (its nonvoluntary switches) and
    # the backend parking. The fit puts each server's rounds on one line,
    # so servers can be compared at the same switching, not only by medians
    # of rounds that fell into different patterns.
    fits = []
    for workload in workloads:
        for server in servers:
            pts = [(float(c["nvcs"]) / n, us) for w, s, _r, n, _rate, us, _be, c in round_rows
                   if w == workload and s == server and "nvcs" in c]
            xs = [x for x, _ in pts]
            if len(pts) >= 5 and max(xs) > min(xs):
                fit = statistics.linear_regression(xs, [y for _, y in pts])
                r = statistics.correlation(xs, [y for _, y in pts])
                fits.append(f"- {workload}: {server} CPU µs ≈ {fit.intercept:.1f} + {fit.slope:.0f} x "
                            f"nonvoluntary switches per request (r = {r:.2f}, {len(pts)} rounds, "
                            f"switches {min(xs):.3f}-{max(xs):.3f})")
    if fits:
        print()
        print("CPU per request against the server's nonvoluntary context switches "
              "(preempted on its CPU), least squares over the rounds:")
        print()
        print("\n".join(fits))

    # The same rounds by level: where the server parked (ran out of work,
    # so the backend sharing its CPU ran a whole batch) and where it did
    # not. A server's median can come from either level, by the host's
    # scheduling more than by its code; each level's median says which.
    def level_text(rounds, label):
        if not rounds:
            return f"no round {label}"
        return f"{len(rounds)} {label}, median {statistics.median(rounds):.1f} µs"

    levels = []
    for workload in workloads:
        for server in servers:
            parked, unparked = [], []
            for w, s, _r, n, _rate, us, _be, c in round_rows:
                if w == workload and s == server and "vcs" in c:
                    level = parked if float(c["vcs"]) / n >= PARKED_SWITCHES else unparked
                    level.append(us)
            if parked or unparked:
                levels.append(f"- {workload}: {server}: {level_text(parked, 'parked')}; "
                              f"{level_text(unparked, 'did not')}")
    if levels:
        print()
        print(f"Rounds by level (parked: at least {PARKED_SWITCHES} voluntary switches "
              "per request):")
        print()
        print("\n".join(levels))

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
        mine_by_run = cpu_by_run.get((workload, base), {})
        paired = []
        for p in peer_cpu:
            theirs = cpu_by_run.get((workload, p), {})
            pairs = [mine_by_run[r] / theirs[r] for r in mine_by_run if r in theirs and theirs[r] > 0]
            if len(pairs) >= 2:
                paired.append(f"{statistics.median(pairs):.2f} x {p} "
                              f"({' / '.join(f'{x:.2f}' for x in pairs)})")
        if paired:
            print(f"- {workload}: paired, the median of each round's ratio to the peer's round "
                  f"of the same run: " + ", ".join(paired))
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
