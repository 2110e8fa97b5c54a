#!/usr/bin/env python3
"""How fast a CPU runs a fixed piece of work while a bench round loads it.

Usage: canary.py OUT [INTERVAL_S]   (run pinned: taskset -c CPU canary.py ...)

Every INTERVAL_S seconds (default 0.5) it times a fixed loop by its own
thread's CPU time (not wall time: waiting for the CPU behind the server does
not count) and appends the µs to OUT; it stops on SIGTERM or SIGINT. The
loop takes a few ms every half second (well under 1 % of the CPU), so the
round it watches barely changes. The same work taking longer in one round
than in another means the core itself was slower then (a hyperthread
sibling busy, cache or memory contention from a neighbour, a lower clock):
a host effect that raises every server's CPU per request in that round,
not something a server's code did.
"""
import signal
import sys
import time

out_path = sys.argv[1]
interval = float(sys.argv[2]) if len(sys.argv) > 2 else 0.5
stop = False


def on_signal(_signum, _frame):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)


def work():
    # Integer arithmetic and a small list: the interpreter's usual mix of
    # branches, loads and stores, in L1/L2.
    acc, xs = 0, list(range(64))
    for i in range(20000):
        acc = (acc + xs[i & 63] * i) & 0xFFFFFFFF
    return acc


with open(out_path, "w", buffering=1) as out:
    while not stop:
        start = time.thread_time_ns()
        work()
        out.write(f"{(time.thread_time_ns() - start) / 1000:.1f}\n")
        # sleep ends early on a signal (PEP 475 resumes it unless the
        # handler raises): the loop then checks stop at most INTERVAL later.
        time.sleep(interval)
