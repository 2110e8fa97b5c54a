#!/usr/bin/env python3
"""One callee's cost split by its callers, per request, from a callgrind dump.

callgrind_annotate shows a shared callee (memcpy, memcmp, malloc) as one
row: which caller's calls executed the instructions or took the cache
misses is in the dump's call records, not in the listing. This sums,
for every function whose name matches CALLEE, the inclusive cost of the
calls each caller made to it, in one EVENT of the dump (Ir for
instructions; D1mw, DLmr, DLmw... when callgrind ran with
`--cache-sim=yes`), divided by REQUESTS, with the calls per request.

Usage: bench/callgrind_callers.py DUMP CALLEE_REGEX EVENT REQUESTS [TOP]
e.g.   bench/callgrind_callers.py callgrind.out.123.1 '^__memcpy' DLmw 10000
       (a dump kept by `KEEP=1 VALGRIND_OPTS=--cache-sim=yes bench/instructions.sh`)
"""
import collections
import re
import sys


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    dump, callee, event = sys.argv[1], re.compile(sys.argv[2]), sys.argv[3]
    requests = float(sys.argv[4])
    top = int(sys.argv[5]) if len(sys.argv) > 5 else 20
    names = {}
    index = None
    caller = target = None
    calls_pending = 0
    cost = collections.Counter()
    calls = collections.Counter()

    def resolve(spec):
        # "(id) name" defines a compressed name, "(id)" reuses it.
        m = re.match(r"\((\d+)\)(?: (.*))?", spec)
        if not m:
            return spec
        if m.group(2):
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), "?")

    with open(dump) as f:
        for line in f:
            if line.startswith("events:"):
                fields = line.split()[1:]
                if event not in fields:
                    sys.exit(f"event {event} not in the dump (it has {' '.join(fields)})")
                index = fields.index(event)
            elif line.startswith("fn="):
                caller = resolve(line[3:].strip())
            elif line.startswith("cfn="):
                target = resolve(line[4:].strip())
            elif line.startswith("calls="):
                calls_pending = int(line.split()[0][6:])
            elif calls_pending:
                # The line after calls= is the calls' inclusive cost:
                # a position, then one number per event (trailing zeros
                # may be left out).
                if target and callee.search(target):
                    values = line.split()[1:]
                    if index is not None and index < len(values):
                        cost[caller] += int(values[index])
                    calls[caller] += calls_pending
                calls_pending = 0
    print(f"{event} per request, by caller of /{sys.argv[2]}/ (calls per request)")
    for name, value in cost.most_common(top):
        print(f"{value / requests:9.2f} {calls[name] / requests:7.2f}  {name[:160]}")


if __name__ == "__main__":
    main()
