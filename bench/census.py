#!/usr/bin/env python3
"""Tables of bench/census.sh: per request, per server and load.

Usage: census.py CENSUS.tsv WORKDIR

CENSUS.tsv rows: load, server, requests, voluntary and nonvoluntary context
switches, and the path of the `perf stat -x,` output of pass 1. In WORKDIR,
LOAD.SERVER.strace (strace -c) with LOAD.SERVER.strace.requests, and for
tern LOAD.tern.top / LOAD.tern.dso (perf report).
"""
import bisect
import os
import re
import sys
from collections import Counter, OrderedDict

path, work = sys.argv[1], sys.argv[2]
EPOLL = ("syscalls:sys_enter_epoll_wait", "syscalls:sys_enter_epoll_pwait",
         "syscalls:sys_enter_epoll_pwait2")


def perf_stat(file):
    """{event: value} from `perf stat -x,` output."""
    out = {}
    for line in open(file):
        fields = line.strip().split(",")
        if len(fields) < 3 or line.startswith("#"):
            continue
        try:
            out[fields[2]] = float(fields[0])
        except ValueError:
            out[fields[2]] = None
    return out


def strace_counts(file):
    """{syscall: calls} from `strace -c` output."""
    counts = {}
    for line in open(file):
        fields = line.split()
        if len(fields) < 5 or not fields[0].replace(".", "").isdigit():
            continue
        name = fields[-1]
        if name == "total":
            continue
        counts[name] = int(fields[3])
    return counts


def symbolizer(nm_file):
    """A function naming an address of tern's binary from `nm -C` output."""
    table = []
    if os.path.exists(nm_file):
        for line in open(nm_file):
            parts = line.rstrip("\n").split(" ", 2)
            if len(parts) == 3 and parts[1].lower() in ("t", "w"):
                table.append((int(parts[0], 16), parts[2]))
    table.sort()
    starts = [a for a, _ in table]

    def name(addr):
        i = bisect.bisect_right(starts, addr) - 1
        return table[i][1] if i >= 0 else hex(addr)
    return name


def top_symbols(top_file, name, n):
    """perf report lines (percent, dso, [.], symbol or address), the
    addresses named, summed by name: the n largest."""
    shares = Counter()
    for line in open(top_file):
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[\.\]\s+(.*)", line)
        if not m:
            continue
        pct, dso, sym = float(m.group(1)), m.group(2), m.group(3).strip()
        if sym.startswith("0x"):
            sym = name(int(sym, 16))
        shares[f"{dso} {sym}"[:150]] += pct
    return shares.most_common(n)


def per(n, requests):
    return "—" if n is None or not requests else f"{n / requests:.3f}"


loads = OrderedDict()
for line in open(path):
    load, server, requests, vol, nonvol, stat = line.rstrip("\n").split("\t")
    loads.setdefault(load, []).append((server, int(requests or 0), int(vol), int(nonvol), stat))

names = {"keepalive": "keepalive HTTP/1.1, 100 B (wrk -t1 -c50)",
         "h2": "HTTP/2, 100 B (h2load -c50 -m10)",
         "h3": "HTTP/3, 100 B (tern bench --h3 -c20 -m1)"}
for load, rows in loads.items():
    print(f"### {names.get(load, load)}")
    print()
    print("Pass 1 (perf stat, /proc), per request:")
    print()
    print("| server | requests | CPU µs | system calls | epoll waits | requests per epoll wait | voluntary switches | nonvoluntary |")
    print("|---|---|---|---|---|---|---|---|")
    for server, requests, vol, nonvol, stat in rows:
        s = perf_stat(stat) if os.path.exists(stat) else {}
        cpu_ms = s.get("task-clock")
        epolls = sum(s.get(e) or 0 for e in EPOLL)
        cpu = f"{cpu_ms * 1000 / requests:.2f}" if cpu_ms and requests else "—"
        per_wait = f"{requests / epolls:.1f}" if epolls else "—"
        print(f"| {server} | {requests} | {cpu} | {per(s.get('raw_syscalls:sys_enter'), requests)} "
              f"| {per(epolls, requests)} | {per_wait} | {per(vol, requests)} | {per(nonvol, requests)} |")
    print()
    kinds = {}
    reqs = {}
    for server, *_ in rows:
        f = os.path.join(work, f"{load}.{server}.strace")
        if os.path.exists(f):
            kinds[server] = strace_counts(f)
            reqs[server] = int(open(f + ".requests").read().strip() or 0)
    if kinds:
        # Every kind some server makes at least 0.005 times per request.
        shown = sorted({k for server, c in kinds.items() for k, n in c.items()
                        if reqs[server] and n / reqs[server] >= 0.005})
        print("Pass 2 (strace -c -f), system calls by kind per request:")
        print()
        print("| server | " + " | ".join(shown) + " |")
        print("|---|" + "---|" * len(shown))
        for server, c in kinds.items():
            print(f"| {server} | " + " | ".join(per(c.get(k, 0), reqs[server]) for k in shown) + " |")
        print()
    top = os.path.join(work, f"{load}.tern.top")
    if os.path.exists(top):
        print("tern, perf record (cpu-clock), by shared object:")
        print()
        print("```")
        print(open(os.path.join(work, f"{load}.tern.dso")).read().rstrip())
        print("```")
        print()
        print("tern, top user-space functions (share of all of tern's samples):")
        print()
        print("```")
        name = symbolizer(os.path.join(work, "tern.nm"))
        for sym, pct in top_symbols(top, name, int(os.environ.get("TOP", "25"))):
            print(f"{pct:6.2f}%  {sym}")
        print("```")
        print()
