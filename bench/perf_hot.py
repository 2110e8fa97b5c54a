#!/usr/bin/env python3
"""The single instructions a server's samples pile up on, per request.

Usage: bench/perf_hot.py PERF_DATA COMM REQUESTS FREQ [SYMBOLS] [MIN_SAMPLES]
(bench/keepalive-split.sh HOT=1). Runs `perf annotate` on the SYMBOLS
(default 25) user-space symbols of thread COMM with the most samples and
prints every instruction with at least MIN_SAMPLES (default 20) samples, as
microseconds per request (samples / FREQ / REQUESTS), with the instruction
before it and the last two source lines perf names there.

Why instructions and not functions: in tern's HTTP/2 path a few hundred
instructions of a function can cost a microsecond, most of it on a handful
of instructions right after a load of memory last touched hundreds of
exchanges earlier (a cache miss; cpu-clock samples land on the
instruction after the one that waited). The instruction before the hot one
and its source line say which field of which structure missed.
"""

import re
import subprocess
import sys


def top_symbols(data: str, comm: str, count: int) -> list[str]:
    out = subprocess.run(
        ["perf", "report", "-i", data, "--comm", comm, "--sort", "sym", "-n", "--stdio"],
        capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        m = re.match(r"\s*[\d.]+%\s+\d+\s+\[\.\]\s+(.*\S)", line)
        if m:
            syms.append(m.group(1))
        if len(syms) == count:
            break
    return syms


def hot_lines(data: str, sym: str, min_samples: float):
    """(samples, instruction before, instruction, source lines) of `sym`."""
    out = subprocess.run(["perf", "annotate", "-i", data, "--stdio", "-s", sym],
                         capture_output=True, text=True).stdout
    total = None
    rows, source, prev = [], [], ""
    for line in out.splitlines():
        if total is None:
            m = re.search(r"\((\d+) samples", line)
            if m:
                total = int(m.group(1))
            continue
        a = re.match(r"^\s*([\d.]+) :\s+[0-9a-f]+:\s+(.*)$", line)
        if a:
            samples = float(a.group(1)) / 100 * total
            insn = " ".join(a.group(2).split())[:48]
            if samples >= min_samples:
                rows.append((samples, prev, insn, " | ".join(source[-2:])))
            prev = insn
            continue
        b = re.match(r"^\s*:\s+\d+\s+(.*\S)", line)
        if b and not b.group(1).startswith("0000"):
            source.append(b.group(1).strip()[:70])
    return rows


def main() -> None:
    data, comm = sys.argv[1], sys.argv[2]
    requests, freq = float(sys.argv[3]), float(sys.argv[4])
    count = int(sys.argv[5]) if len(sys.argv) > 5 else 25
    min_samples = float(sys.argv[6]) if len(sys.argv) > 6 else 20
    rows = []
    for sym in top_symbols(data, comm, count):
        for samples, prev, insn, source in hot_lines(data, sym, min_samples):
            rows.append((samples, sym, prev, insn, source))
    rows.sort(reverse=True)
    us = lambda s: s / freq / requests * 1e6
    total = 0.0
    for samples, sym, prev, insn, source in rows:
        total += us(samples)
        print(f"  {us(samples):5.3f} us  {sym[:70]}")
        print(f"            after `{prev}`: `{insn}`  ({source})")
    print(f"  {total:5.3f} us a request on these {len(rows)} instructions")


if __name__ == "__main__":
    main()
