#!/usr/bin/env python3
"""Where a server's CPU goes, from `perf script` output of DWARF call stacks.

Reads `perf script` text (samples with full call chains, as recorded by
`perf record --call-graph dwarf -p PID`) on stdin and prints the share of
samples in each part of a TLS terminator's work, and, given the requests
served while recording and the process's CPU µs per request, what each
part costs per request.

Usage: perf script -i perf.data | bench/cost_breakdown.py [CPU_US_PER_REQUEST]

A sample is put in the first class whose test its stack passes, in the
order of CLASSES below (innermost frame first in perf's output):

- crypto: the public-key operations a full handshake needs (signature,
  key exchange), then the rest of the provider's work (hashing, HKDF,
  AEAD, random numbers);
- kernel: by the system call the sample is under (accept, reads, writes,
  shutdown, close, epoll), split into the client and the backend leg by
  whether tern's upstream code is on the stack; time in the scheduler
  (switching to and from the backend on the same CPU) and softirq work
  outside a system call counted apart;
- rustls outside the provider; tokio; the allocator; tern's own code.
"""

import re
import sys
from collections import Counter

CRYPTO_FRAME = re.compile(
    r"aws_lc_rs::|aws_lc_0_|curve25519|ecp_nistz256|bignum_|sha256_block|gcm_|aesni|mlkem|ML_KEM|RSA_"
)
RUSTLS_FRAME = re.compile(r"rustls::(?!crypto::aws_lc_rs)")
SIGN = re.compile(r"ECDSA_|ecdsa_sign|RSA_sign|rsa_|EVP_DigestSign|emit_certificate_verify")
KX = re.compile(r"x25519|X25519|start_and_complete|mlkem|MLKEM|ml_kem|KeyExchange|ECDH|ec_point_mul")
# The user-side frame just outside the kernel entry names the system call
# (libc's wrapper); kernel-side names are often inlined away.
SYSCALL_ENTRY = "entry_SYSCALL_64"
SYSCALL_NAMES = [
    ("writev", "send"), ("send", "send"), ("write", "send"),
    ("recv", "receive"), ("read", "receive"),
    ("epoll_wait", "epoll_wait"), ("epoll_ctl", "epoll_ctl"), ("accept", "accept"),
    ("shutdown", "shutdown"), ("close", "close"), ("setsockopt", "setsockopt"),
    ("getsockopt", "getsockopt"), ("clock", "clock"),
]
BACKEND = re.compile(r"tern_proxy::upstream::")
SCHED = re.compile(r"finish_task_switch|__schedule")


def read_samples(lines):
    """Yields each sample's frames (symbol text, innermost first)."""
    frames = []
    in_sample = False
    for line in lines:
        if not line.strip():
            if in_sample:
                yield frames
            frames, in_sample = [], False
            continue
        if not line[0].isspace():
            frames, in_sample = [], True
            continue
        parts = line.strip().split(None, 1)
        frames.append(parts[1] if len(parts) > 1 else parts[0])
    if in_sample:
        yield frames


def first(frames, pattern):
    """Index of the innermost frame matching pattern, or None."""
    return next((i for i, f in enumerate(frames) if pattern.search(f)), None)


def syscall_name(frames):
    """The system call a kernel sample is under, from libc's wrapper."""
    entry = next((i for i, f in enumerate(frames) if SYSCALL_ENTRY in f), None)
    if entry is None or entry + 1 >= len(frames):
        return None
    wrapper = frames[entry + 1].split("+")[0].lower()
    for needle, name in SYSCALL_NAMES:
        if needle in wrapper:
            return name
    return wrapper


def classify(frames):
    stack = "\n".join(frames)
    leaf = frames[0] if frames else ""
    kernel_leaf = "[kernel.kallsyms]" in leaf
    crypto_at = first(frames, CRYPTO_FRAME)
    rustls_at = first(frames, RUSTLS_FRAME)
    if not kernel_leaf and crypto_at is not None and (rustls_at is None or crypto_at < rustls_at):
        if SIGN.search(stack):
            return "crypto: signature"
        if KX.search(stack):
            return "crypto: key exchange"
        return "crypto: hashing, HKDF, AEAD, random"
    if kernel_leaf:
        name = syscall_name(frames)
        if name:
            leg = "backend" if BACKEND.search(stack) else "client"
            if name in ("send", "receive"):
                return f"kernel: {name} ({leg})"
            return f"kernel: {name}"
        if SCHED.search(stack):
            return "kernel: scheduler (outside a syscall)"
        return "kernel: other (interrupts, softirq)"
    if "rustls::" in stack and "rustls::" in "\n".join(frames[:6]):
        return "rustls (outside the provider)"
    if re.search(r"malloc|free|realloc|_int_|memmove|memset|memcpy", leaf):
        return "libc: allocator and memory copies"
    if "tokio::" in leaf or "mio::" in leaf:
        return "tokio and mio"
    return "tern and the rest"


def main():
    per_request = float(sys.argv[1]) if len(sys.argv) > 1 else None
    counts = Counter(classify(f) for f in read_samples(sys.stdin))
    total = sum(counts.values())
    if total == 0:
        sys.exit("cost_breakdown: no samples on stdin")
    header = "| part | share of samples |"
    rule = "|---|---|"
    if per_request:
        header += " µs per request |"
        rule += "---|"
    print(header)
    print(rule)
    for part, n in sorted(counts.items(), key=lambda kv: (kv[0].split(":")[0], -kv[1])):
        row = f"| {part} | {100 * n / total:.1f}% |"
        if per_request:
            row += f" {per_request * n / total:.1f} |"
        print(row)
    print(f"\n{total} samples")


if __name__ == "__main__":
    main()
