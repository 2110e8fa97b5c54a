"""Splits `perf report --sort dso,sym -n --stdio` into parts, per operation.

Usage: perf report ... | python3 bench/perf_parts.py N FREQ TOP [UNIT]
(bench/new-conn-profile.sh). Prints microseconds of CPU per UNIT (default
"connection"; N of them were measured) for each part (samples / FREQ / N)
and the TOP symbols.
"""

import re
import sys

# First match wins: (part, test on "dso symbol").
PARTS = [
    ("kernel", lambda dso, sym: dso.startswith("[kernel")),
    ("malloc", lambda dso, sym: re.match(
        r"(__libc_)?(_int_malloc|_int_free|_int_realloc|_int_memalign|malloc|cfree|free|realloc|"
        r"calloc|unlink_chunk|malloc_consolidate|_mid_memalign|tcache)", sym) is not None),
    ("memcpy/memset", lambda dso, sym: sym.startswith(("__mem", "memcpy", "memset", "memmove"))),
    ("crypto (aws-lc)", lambda dso, sym: re.search(
        r"aws_lc|^L?curve25519|^L?bignum|ecp_nistz256|^aead_|gcm|^sha\d|aes_", sym) is not None),
    ("rustls", lambda dso, sym: "rustls" in sym[:60]),
    ("quinn", lambda dso, sym: "quinn" in sym[:60]),
    ("h3", lambda dso, sym: re.match(r"<?h3(_quinn)?::", sym) is not None),
    ("h2", lambda dso, sym: re.match(r"<?h2::", sym) is not None),
    ("tokio", lambda dso, sym: "tokio" in sym[:60]),
    ("tern", lambda dso, sym: "tern_" in sym[:60]),
    # The peers (bench/keepalive-split.sh PARTS=1), by library.
    ("openssl", lambda dso, sym: dso.startswith(("libssl", "libcrypto"))),
    ("libc", lambda dso, sym: dso.startswith("libc")),
    ("haproxy", lambda dso, sym: dso.startswith("haproxy")),
]


def main() -> None:
    n, freq, top = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    unit = sys.argv[4] if len(sys.argv) > 4 else "connection"
    rows = []
    for line in sys.stdin:
        m = re.match(r"\s*[\d.]+%\s+(\d+)\s+(\S+)\s+\[(.)\]\s+(.*)", line)
        if m:
            rows.append((int(m.group(1)), m.group(2), m.group(4).strip()))
    total = sum(r[0] for r in rows)
    if not total:
        sys.exit("no samples")
    parts: dict[str, int] = {}
    for count, dso, sym in rows:
        part = next((p for p, test in PARTS if test(dso, sym)), "other")
        parts[part] = parts.get(part, 0) + count

    def us(samples: int) -> float:
        return samples / freq / n * 1e6

    print(f"  total {us(total):7.1f} us per {unit} ({total} samples)")
    for part, count in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"  {part:16} {us(count):7.1f} us  {100 * count / total:5.1f} %")
    print(f"  top {top} symbols:")
    for count, dso, sym in sorted(rows, key=lambda r: -r[0])[:top]:
        print(f"  {us(count):7.2f} us  {sym[:100]}")


if __name__ == "__main__":
    main()
