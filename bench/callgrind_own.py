#!/usr/bin/env python3
"""Functions by their own instructions, per request, from a callgrind dump.

Reads `callgrind_annotate --threshold=100 --auto=no DUMP` on stdin and
prints the TOP functions by the instructions executed in their own code
(callees excluded), divided by REQUESTS. callgrind_annotate lists a
function once per source file its code came from (inlined code keeps its
file), so one function shows as many rows of a few hundred each; here
they are summed under the function's name.

Usage: callgrind_annotate --threshold=100 --auto=no DUMP | bench/callgrind_own.py REQUESTS TOP
"""

import re
import sys
from collections import Counter

ROW = re.compile(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$")


def main() -> None:
    requests = float(sys.argv[1])
    top = int(sys.argv[2])
    own: Counter[str] = Counter()
    listing = False
    for line in sys.stdin:
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
        own[function] += int(m.group(1).replace(",", ""))
    for function, cost in own.most_common(top):
        print(f"{cost / requests:9.0f}  {function[:160]}")


if __name__ == "__main__":
    main()
