#!/usr/bin/env python3
"""Gives every thread of a running process an EEVDF slice of its own.

Usage: sched_slice.py MICROSECONDS PID

sched_setattr(2) with SCHED_OTHER and sched_runtime = the slice (Linux
6.12 and later read it as the thread's slice, clamped to 0.1-100 ms; older
kernels ignore it), each thread's nice kept. Prints each thread's slice as
/proc/PID/task/TID/sched reads it afterwards ("?" when the kernel does not
show one). An experiment for bench/h2.sh (TERN_SLICE_US): whether a
shorter slice keeps the backend sharing the server's CPU from preempting
it mid-turn (BENCHMARKS.md, "why tern's rounds sit at two levels").
"""
import ctypes
import os
import struct
import sys

SYS_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274}
SCHED_OTHER = 0


def slice_ns(pid, tid):
    try:
        with open(f"/proc/{pid}/task/{tid}/sched") as f:
            for line in f:
                if line.startswith("se.slice"):
                    return line.split(":")[1].strip()
    except OSError:
        pass
    return "?"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    micros, pid = int(sys.argv[1]), int(sys.argv[2])
    number = SYS_SCHED_SETATTR.get(os.uname().machine)
    if number is None:
        sys.exit(f"sched_slice: no sched_setattr number for {os.uname().machine}")
    libc = ctypes.CDLL(None, use_errno=True)
    for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
        nice = os.getpriority(os.PRIO_PROCESS, tid)
        # struct sched_attr (48 bytes): size, policy, flags, nice, priority,
        # runtime, deadline, period.
        attr = ctypes.create_string_buffer(
            struct.pack("IIQiIQQQ", 48, SCHED_OTHER, 0, nice, 0, micros * 1000, 0, 0))
        if libc.syscall(number, tid, attr, 0) != 0:
            err = ctypes.get_errno()
            print(f"sched_slice: thread {tid}: {os.strerror(err)}", file=sys.stderr)
            sys.exit(1)
        print(f"thread {tid}: slice {slice_ns(pid, tid)} ns")


main()
