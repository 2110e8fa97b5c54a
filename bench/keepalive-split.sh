#!/usr/bin/env bash
# Kernel against user-space CPU per keepalive HTTP/1.1 request, tern and its
# peers side by side (issue 26: keepalive at <= 0.9x hitch). Same layout as
# bench/terminators.sh with BACKEND_CPU=server: each server (one worker) and
# the nginx backend serving 100 bytes on CPU 0, `wrk -t1 -c50` on CPU 1, TLS
# 1.3 AES-128-GCM X25519. For each server in turn: a 1 s warm-up, then perf
# samples all of CPU 0 (`perf record -e cpu-clock -C 0`) over a DURATION
# second wrk run; the server's own samples (its processes' and threads'
# names; not the backend's, the idle task's or kernel threads') are split
# into kernel and user space and divided by wrk's request count.
#
# Samples are CPU time: take them on an idle machine. perf adds its own
# overhead, so compare servers within one run rather than with
# terminators.sh's /proc figures.
#
# Usage: bench/keepalive-split.sh   (env: TERN=target/release/tern
#          SERVERS="tern hitch haproxy" DURATION=5 ROUNDS=2 FREQ=4999;
#          nginx cannot be a server here: the backend is nginx)
# Needs: perf, wrk, nginx, openssl, python3, taskset (and the peers).
# Only 127.0.0.1 is a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

TERN="${TERN:-$root/target/release/tern}"
SERVERS="${SERVERS:-tern hitch haproxy}"
DURATION="${DURATION:-5}"
ROUNDS="${ROUNDS:-2}"
FREQ="${FREQ:-4999}"
SERVER_CPU=0
LOAD_CPU=1
# Server knobs read by lib.sh (as bench/terminators.sh sets them).
SRV_POOL=256
SRV_ALPN=http/1.1
for tool in perf wrk nginx openssl python3 taskset; do need "$tool"; done
# Samples are told apart by process name, and the backend is nginx.
[[ " $SERVERS " == *" nginx "* ]] && die "SERVERS: nginx cannot be split here (the backend is nginx too)"
[[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"

bench_workdir tern-keepalive-split
make_cert ecdsa
mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/index.html"
backend_port="$(free_port)"
start_backend "$backend_port" "$SERVER_CPU"
# shellcheck disable=SC2086 # SERVERS is a list of words
start_servers "$backend_port" $SERVERS

echo "| round | server | requests | kernel µs/request | user µs/request | total | kernel share |"
echo "|---|---|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
    for server in "${active[@]}"; do
        url="https://127.0.0.1:${server_port[$server]}/"
        taskset -c "$LOAD_CPU" wrk -t1 -c50 -d1s -H "Connection: keep-alive" "$url" > /dev/null
        perf record -q -e cpu-clock -F "$FREQ" -C "$SERVER_CPU" -o "$work/perf.data" 2> "$work/perf.err" &
        perf_pid=$!
        # perf writes its file's header once it is attached.
        for _ in $(seq 1 100); do [[ -s "$work/perf.data" ]] && break; sleep 0.05; done
        out="$(taskset -c "$LOAD_CPU" wrk -t1 -c50 -d"${DURATION}s" -H "Connection: keep-alive" "$url")"
        kill -INT "$perf_pid"
        wait "$perf_pid" || true
        requests="$(awk '/requests in/ {print $1}' <<< "$out")"
        perf report -i "$work/perf.data" --sort comm,dso -n --stdio 2> /dev/null \
            | python3 -c '
import re, sys
round_, server, requests, freq = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
kernel = user = 0
for line in sys.stdin:
    m = re.match(r"\s*[\d.]+%\s+(\d+)\s+(\S+)\s+(\S+)", line)
    # Not the server: the backend, the idle task, perf, kernel threads.
    if not m or m.group(2) in ("nginx", "swapper", "perf") or m.group(2).startswith(("kworker", "ksoftirq")):
        continue
    if m.group(3).startswith("[kernel"):
        kernel += int(m.group(1))
    else:
        user += int(m.group(1))
us = lambda n: n / freq / requests * 1e6
total = kernel + user
share = 100 * kernel / total if total else 0
print(f"| {round_} | {server} | {requests} | {us(kernel):.2f} | {us(user):.2f} | {us(total):.2f} | {share:.0f} % |")
' "$round" "$server" "$requests" "$FREQ"
    done
done
echo
echo "$("$TERN" --version 2>/dev/null | head -1), binary $TERN; tree at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
