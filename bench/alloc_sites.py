"""Per-connection allocations from bench/conn-allocs.sh's heaptrack files.

Usage: python3 bench/alloc_sites.py WORKDIR N TOP PROTO...
For each PROTO, WORKDIR holds PROTO-0.* (tern serve with no connection) and
PROTO-N.* (N new connections): heaptrack_print's summary (.txt) and size
histogram (.hist), and with SITES=1 the demangled flame-graph stacks (.dm:
frames root first, then the allocation count). Prints, per connection:
allocation calls, bytes and allocations of more than 1,032 bytes (past
glibc's per-thread cache); with the stacks, the TOP call sites (the four
deepest frames outside the allocator and the standard collections) and,
for h3 beside h1, the sites where QUIC allocates more than TCP+TLS.
"""

import collections
import os
import re
import sys

TCACHE_MAX = 1032

# Frames that say nothing about who asked for the memory, by their name's
# last path segment: the allocator, RawVec and collection growth, Box and
# Vec constructors, conversions and closures' call shims.
PLUMBING = frozenset("""
    alloc alloc_zeroed alloc_impl alloc_impl_runtime allocate do_alloc finish_grow grow grow_one
    grow_amortized grow_impl grow_to do_reserve_and_handle reserve try_reserve reserve_rehash
    reserve_rehash_inner resize_inner prepare_resize fallible_with_capacity with_capacity
    with_capacity_in try_with_capacity try_allocate_in new new_in new_uninit box_new_uninit
    try_new_uninit_in push push_mut push_back extend extend_trusted spec_extend extend_from_slice
    extend_from_within to_vec to_vec_in from_elem into_vec from_iter collect clone to_owned from into map
    unwrap_or_else call_once copy_from_slice put put_slice write_all realloc malloc calloc
""".split())

# Symbols of the allocator itself, by prefix.
ALLOCATOR = ("<std::alloc::System", "__rustc", "__rdl", "malloc", "realloc", "calloc")


def summary_calls(path):
    for line in open(path, errors="replace"):
        if line.startswith("calls to allocation functions:"):
            return int(line.split(":")[1].split()[0])
    sys.exit(f"alloc_sites.py: no allocation count in {path}")


def histogram(path):
    sizes = collections.Counter()
    for line in open(path):
        parts = line.split()
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            sizes[int(parts[0])] += int(parts[1])
    return sizes


def stacks(path):
    counts = collections.Counter()
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if not line:
            continue
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        counts[tuple(f.strip() for f in stack.rstrip(";").split(";"))] += int(n)
    return counts


def frame_name(frame):
    """A frame without its generic arguments (a qualified path's `<T as
    Trait>` stays), its tail if long, and its file."""
    name = re.sub(r" \([^()]*\)$", "", frame)
    where = re.search(r"\(([^()]*)\)$", frame)
    while True:
        shorter = re.sub(r"(?<=[\w\]])<[^<>]*>", "", name)
        if shorter == name:
            break
        name = shorter
    if len(name) > 70:
        name = "…" + name[-69:]
    return name + (f" ({where.group(1)})" if where else "")


def plumbing(frame):
    """Whether a frame is the allocator's or a collection's: by its last
    path segment without generics (`<alloc::raw_vec::RawVec<T>>::grow_one`
    is `grow_one`), or an allocator symbol."""
    name = re.sub(r" \([^()]*\)$", "", frame)
    while True:
        shorter = re.sub(r"<[^<>]*>", "", name)
        if shorter == name:
            break
        name = shorter
    last = name.rsplit("::", 1)[-1]
    return last in PLUMBING or frame.startswith(ALLOCATOR)


def sites(before, after, n):
    out = collections.Counter()
    for stack in set(before) | set(after):
        delta = (after[stack] - before[stack]) / n
        if delta == 0:
            continue
        kept = [frame_name(f) for f in stack if not plumbing(f)]
        out[" < ".join(reversed(kept[-4:]))] += delta
    return out


def main():
    work, n, top, protos = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    print("| protocol | allocations | bytes | allocations > 1,032 B |")
    print("|---|---|---|---|")
    per_site = {}
    for proto in protos:
        base, load = f"{work}/{proto}-0", f"{work}/{proto}-{n}"
        calls = (summary_calls(load + ".txt") - summary_calls(base + ".txt")) / n
        h0, h1 = histogram(base + ".hist"), histogram(load + ".hist")
        sizes = {s: (h1[s] - h0[s]) / n for s in set(h0) | set(h1)}
        total = sum(s * c for s, c in sizes.items())
        large = sum(c for s, c in sizes.items() if s > TCACHE_MAX)
        print(f"| {proto} | {calls:.1f} | {total:,.0f} | {large:.2f} |")
        if os.path.exists(load + ".dm"):
            per_site[proto] = sites(stacks(base + ".dm"), stacks(load + ".dm"), n)
    for proto, counts in per_site.items():
        print(f"\n{proto}: call sites, allocations per connection (top {top}):")
        for site, count in sorted(counts.items(), key=lambda kv: -kv[1])[:top]:
            print(f"  {count:6.1f}  {site}")
    if "h1" in per_site and "h3" in per_site:
        h1, h3 = per_site["h1"], per_site["h3"]
        print(f"\nh3 - h1: where a QUIC connection allocates more than a TCP+TLS one (top {top}):")
        rows = sorted(((h3[s] - h1[s], s) for s in set(h1) | set(h3)), key=lambda r: -abs(r[0]))
        for delta, site in rows[:top]:
            print(f"  {delta:+6.1f}  ({h3[site]:.1f} against {h1[site]:.1f})  {site}")


if __name__ == "__main__":
    main()
