#!/usr/bin/env python3
"""Own instructions per operation by part of the program, from
`callgrind_annotate --auto=no --threshold=100` output (its function list,
after the `file:function` header) on stdin.

Usage: callgrind_annotate --auto=no --threshold=100 OUT | sed -n '/file:function/,$p' \\
           | sed 1d | bench/callgrind_parts.py OPERATIONS

A function is put in the first part whose file pattern its source file
matches (the file the instructions were written in: code inlined from a
crate counts for that crate); code from Rust's standard library (generic
helpers: drops, iterators, moves) counts for the crate of the function it
was inlined into, by that function's name.
"""

import re
import sys

# (part, source file pattern, function name pattern for std code)
# A crate's name where a path starts in a function name: at its start or
# after `<`, `(`, a space or a comma (`drop_in_place<h2::...>`), not as a
# module inside another crate (`tern_proxy::upstream::h2::open`).
AT = r"(^|[<( ,])"
PARTS = [
    ("crypto (aws-lc: AES-GCM, X25519, ECDSA, hashes)", r"aws-lc|aws_lc", r"aws_lc"),
    ("rustls and tokio-rustls", r"rustls", AT + r"(tokio_)?rustls::"),
    ("HPACK (h2 src/hpack)", r"/h2-[^/]*/src/hpack/", AT + r"h2::hpack::"),
    ("h2 other (frames, streams, flow control)", r"/h2-[^/]*/src/", AT + r"h2::"),
    ("tokio (runtime, I/O driver, timers, codec)", r"/tokio-|/mio-", AT + r"(tokio|tokio_util|mio)::"),
    ("http crate (HeaderMap, names, URIs)", r"/http-[^/]*/src/", AT + r"http::"),
    ("allocator (malloc, free)", r"malloc|free", r"malloc|free"),
    ("memcpy/memmove/memset/memcmp", r"mem(cpy|move|set|cmp)", r"mem(cpy|move|set|cmp)"),
    ("tern", r"/crates/tern", AT + r"tern_"),
    ("SipHash (std HashMap and indexmap keys)", r"/hash/sip.rs", r"BuildHasher::hash_one|DefaultHasher"),
    ("bytes, futures, slab, other crates", r"/index.crates.io-[^/]*/", AT + r"(bytes|futures_util|slab|indexmap)::"),
    ("libc (syscall wrappers)", r"libc|sysdeps|nptl", r"^(__|recv|send|epoll|writev|readv)"),
]


def main():
    n = int(sys.argv[1])
    sums = {name: 0 for name, _, _ in PARTS}
    sums["other (std code in other functions)"] = 0
    for line in sys.stdin:
        m = re.match(r"\s*([\d,]+)\s+\(\s*([\d.]+)%\)\s+(.*)", line)
        # callgrind charges the functions that were on the stack when the
        # counters were zeroed (the worker thread's outer frames) with
        # their inclusive count: not their own.
        if not m or float(m.group(2)) >= 99:
            continue
        count, where = int(m.group(1).replace(",", "")), m.group(3)
        source, _, function = where.partition(":")
        std = source.startswith("/rustc/")
        for name, file_pat, fn_pat in PARTS:
            # std's hashing is named by the file, whoever calls it.
            hashing = std and "/hash/sip.rs" in source
            if re.search(fn_pat, function) if std and not hashing else re.search(file_pat, source):
                sums[name] += count
                break
        else:
            sums["other (std code in other functions)"] += count
    print("Per operation by part (own instructions, by source file):")
    for name, count in sorted(sums.items(), key=lambda kv: -kv[1]):
        print(f"  {count / n:9,.0f}  {name}")


main()
