#!/usr/bin/env python3
"""Atomic read-modify-write instructions executed per request, from a callgrind dump.

usage: callgrind_atomics.py DUMP REQUESTS [TOP]

DUMP must be taken with --dump-instr=yes (bench/instructions.sh ATOMICS=1),
so that it holds each instruction's execution count by address. Each object
named in it is disassembled (objdump -d) and the instructions that lock the
cache line are picked out: a `lock` prefix, `xchg` with a memory operand
(locked without one) and `mfence`. A plain instruction costs about a cycle;
these cost tens, and callgrind's instruction counts weigh them the same.
Prints their count per request, by object, by kind and by the function
whose code holds them (inlined code counts in the function it was inlined
into).
"""
import collections
import re
import subprocess
import sys

NAMED = re.compile(r"(c?ob|c?fn)=\((\d+)\)\s*(.*)")


def counts(dump):
    """(object names, function names, {(object, address): count}, {(object, address): function})"""
    objects, functions = {}, {}
    executed = collections.Counter()
    function_at = {}
    ob = fn = None
    position = 0
    call_line = False
    with open(dump, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            named = NAMED.match(line)
            if named:
                kind, number, name = named.groups()
                table = objects if kind.endswith("ob") else functions
                if name:
                    table[number] = name
                if kind == "ob":
                    ob = number
                elif kind == "fn":
                    fn = number
                continue
            if line.startswith("calls="):
                # The next cost line is the call's inclusive cost, not an
                # instruction's own count; its position still moves.
                call_line = True
                continue
            if not line or line[0] not in "0123456789+-*":
                continue
            fields = line.split()
            where = fields[0]
            if where.startswith("0x"):
                position = int(where, 16)
            elif where[0] == "+":
                position += int(where[1:])
            elif where[0] == "-":
                position -= int(where[1:])
            if call_line:
                call_line = False
                continue
            if len(fields) >= 3:
                executed[(ob, position)] += int(fields[2])
                function_at[(ob, position)] = fn
    return objects, functions, executed, function_at


def atomic_addresses(path):
    """{address: mnemonic} of the locking instructions in one object."""
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path],
                             capture_output=True, text=True, check=False).stdout
    found = {}
    for line in listing.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s+(\S+)(?:\s+(\S+))?(.*)", line)
        if not m:
            continue
        first, second, rest = m.group(2), m.group(3) or "", m.group(4)
        if first == "lock":
            found[int(m.group(1), 16)] = "lock " + second
        elif first.startswith("xchg") and "(" in second + rest:
            found[int(m.group(1), 16)] = "xchg (memory)"
        elif first == "mfence":
            found[int(m.group(1), 16)] = "mfence"
    return found


def main():
    dump, requests = sys.argv[1], float(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    objects, functions, executed, function_at = counts(dump)
    by_object, by_kind, by_function = (collections.Counter() for _ in range(3))
    per_object = collections.defaultdict(list)
    for (ob, address), n in executed.items():
        per_object[ob].append((address, n))
    for ob, addresses in per_object.items():
        path = objects.get(ob, "")
        if not path.startswith("/"):
            continue
        atomic = atomic_addresses(path)
        for address, n in addresses:
            if address in atomic:
                by_object[path] += n
                by_kind[atomic[address]] += n
                by_function[functions.get(function_at[(ob, address)], "?")] += n
    print(f"atomic read-modify-writes per request: {sum(by_object.values()) / requests:.1f}")
    for title, table in (("by object", by_object), ("by kind", by_kind), ("by function", by_function)):
        print(f"{title}:")
        for name, n in table.most_common(top):
            print(f"  {n / requests:7.1f}  {name[:150]}")


if __name__ == "__main__":
    main()
