#!/usr/bin/env python3
"""Functions by their own instructions, per request, from a callgrind dump.

Reads `callgrind_annotate --threshold=100 --auto=no DUMP` on stdin and
prints the TOP functions by the instructions executed in their own code
(callees excluded), divided by REQUESTS. callgrind_annotate lists a
function once per source file its code came from (inlined code keeps its
file), so one function shows as many rows of a few hundred each; here
they are summed under the function's name.

BASE, if given, is the same listing of another run, subtracted function by
function (a process that cannot be zeroed mid-run: two runs that differ
by the load counted).

With INCLUSIVE=1 in the environment the listing is an inclusive one
(`--inclusive=yes`): a function's rows are not summed, its largest is
taken (the rows of inlined files are parts of it).

Usage: callgrind_annotate --threshold=100 --auto=no DUMP | bench/callgrind_own.py REQUESTS TOP [BASE]
"""

import os
import re
import sys
from collections import Counter

ROW = re.compile(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$")


def costs(lines) -> Counter[str]:
    own: Counter[str] = Counter()
    listing = False
    for line in lines:
        if "file:function" in line:
            listing = True
            continue
        m = ROW.match(line) if listing else None
        if not m:
            continue
        # "FILE:FUNCTION [OBJECT]": the function is what follows the first
        # colon (paths hold none; Rust paths hold "::", after it).
        where = re.sub(r" \[[^\]]*\]$", "", m.group(2))
        function = where.split(":", 1)[1] if ":" in where else where
        cost = int(m.group(1).replace(",", ""))
        if os.environ.get("INCLUSIVE"):
            own[function] = max(own[function], cost)
        else:
            own[function] += cost
    return own


def main() -> None:
    requests = float(sys.argv[1])
    top = int(sys.argv[2])
    own = costs(sys.stdin)
    if len(sys.argv) > 3:
        with open(sys.argv[3], encoding="utf-8") as base:
            own.subtract(costs(base))
    for function, cost in own.most_common(top):
        print(f"{cost / requests:9.0f}  {function[:160]}")


if __name__ == "__main__":
    main()
