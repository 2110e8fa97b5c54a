"""Who calls malloc, and which system calls the kernel time is in.

Usage: perf script -F ip,sym,dso --no-inline -i perf.data \
           | python3 bench/perf_callers.py N FREQ TOP [UNIT]
(bench/new-conn-profile.sh with CALLERS=1, which records DWARF call
graphs). For the samples in glibc's malloc and free (and their helpers),
the first caller outside the allocator, std, core, bytes and hashbrown;
for the samples in the kernel, the system call they are under (or the
interrupt or fault). Microseconds per UNIT (N of them measured) and the
share of all samples.
"""

import collections
import re
import sys

MALLOC = re.compile(
    r"^(__libc_)?(_int_malloc|_int_free|_int_realloc|_int_memalign|malloc|cfree|free|realloc|"
    r"calloc|unlink_chunk|malloc_consolidate|_mid_memalign|tcache)"
)
# Frames skipped on the way up from malloc to the code that asked for it.
PLUMBING = re.compile(
    r"^(__rust|__rdl|__GI|_int|_mid|malloc|cfree|free|unlink|realloc|calloc|"
    r"<?(alloc|core|std|bytes|hashbrown)::|<<?(alloc|core|std|bytes|hashbrown)::|\[unknown\])"
)

# Kernel frames that name the system call a sample is under (some calls
# reach their work through a ksys_/do_ helper without a __x64_sys_ frame).
SYSCALL_FRAMES = ("__x64_sys_", "__sys_", "__do_sys_", "__se_sys_", "ksys_", "do_writev", "do_readv")


def samples(lines):
    """Each sample's frames, leaf first, as (symbol, dso)."""
    frames = []
    for line in lines:
        line = line.strip()
        if not line:
            if frames:
                yield frames
            frames = []
            continue
        parts = line.split(None, 1)
        if len(parts) == 2:
            sym, _, dso = parts[1].rpartition(" (")
            frames.append((sym, dso.rstrip(")")))
    if frames:
        yield frames


def main() -> None:
    n, freq, top = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    unit = sys.argv[4] if len(sys.argv) > 4 else "connection"
    total = 0
    callers: collections.Counter = collections.Counter()
    syscalls: collections.Counter = collections.Counter()
    for frames in samples(sys.stdin):
        total += 1
        leaf, dso = frames[0]
        if dso.startswith("[kernel"):
            call = next(
                (s for s, _ in frames if s.startswith(SYSCALL_FRAMES)),
                None,
            )
            if call is None:
                # Outermost kernel frame: the interrupt or fault entry.
                call = "no system call: " + next(s for s, d in reversed(frames) if d.startswith("[kernel"))
            syscalls[call] += 1
        elif MALLOC.match(leaf):
            caller = next((s for s, _ in frames[1:] if not PLUMBING.match(s)), "?")
            callers[caller[:110]] += 1
    if not total:
        sys.exit("no samples")

    def row(count: int, what: str) -> str:
        return f"  {count / freq / n * 1e6:7.2f} us  {100 * count / total:5.1f} %  {what}"

    print(f"  kernel by system call ({sum(syscalls.values())} of {total} samples), per {unit}:")
    for call, count in syscalls.most_common(top):
        print(row(count, call))
    print(f"  malloc/free by caller ({sum(callers.values())} of {total} samples), per {unit}:")
    for caller, count in callers.most_common(top):
        print(row(count, caller))


if __name__ == "__main__":
    main()
