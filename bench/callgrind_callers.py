#!/usr/bin/env python3
"""One callee's cost split by its callers, per request, from a callgrind dump.

callgrind_annotate shows a shared callee (memcpy, memcmp, malloc) as one
row: which caller's calls executed the instructions or took the cache
misses is in the dump's call records, not in the listing. This sums,
for every function whose name matches CALLEE, the inclusive cost of the
calls each caller made to it, in one EVENT of the dump (Ir for
instructions; D1mw, DLmr, DLmw... when callgrind ran with
`--cache-sim=yes`), divided by REQUESTS, with the calls per request.
The dump is read by bench/callgrind_layers.py's parser.

Usage: bench/callgrind_callers.py DUMP CALLEE_REGEX EVENT REQUESTS [TOP]
e.g.   bench/callgrind_callers.py callgrind.out.123.1 '^__memcpy' DLmw 10000
       (a dump kept by `KEEP=1 VALGRIND_OPTS=--cache-sim=yes bench/instructions.sh`)
"""
import collections
import re
import sys

from callgrind_layers import parse


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    dump, callee, event = sys.argv[1], re.compile(sys.argv[2]), sys.argv[3]
    requests = float(sys.argv[4])
    top = int(sys.argv[5]) if len(sys.argv) > 5 else 20
    _own, calls, counts = parse(dump, event)
    cost, made = collections.Counter(), collections.Counter()
    for caller, callees in calls.items():
        for name, value in callees.items():
            if callee.search(name):
                cost[caller] += value
                made[caller] += counts[caller][name]
    print(f"{event} per request, by caller of /{sys.argv[2]}/ (calls per request)")
    for name, value in cost.most_common(top):
        print(f"{value / requests:9.2f} {made[name] / requests:7.2f}  {name[:160]}")


if __name__ == "__main__":
    main()
