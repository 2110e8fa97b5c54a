#!/usr/bin/env bash
# Kernel against user-space CPU per kept-alive request, tern and its peers
# side by side (issue 26: keepalive at <= 0.9x hitch, HTTP/2 at <= 0.85x
# haproxy). Same layout as bench/terminators.sh (LOAD=h1) or bench/h2.sh
# (LOAD=h2) with BACKEND_CPU=server: each server (one worker) and the nginx
# backend serving 100 bytes on CPU 0, the load on CPU 1, TLS 1.3
# AES-128-GCM X25519. LOAD=h1: `wrk -t1 -c50`, HTTP/1.1; LOAD=h2: `h2load
# -c50 -m10`, HTTP/2 (hitch, an L4 terminator, cannot serve it: skipped;
# the peers' backend pool tuning as in bench/h2.sh). For each server in
# turn: a 1 s warm-up, then perf samples all of CPU 0 (`perf record -e
# cpu-clock -C 0`) over a DURATION second run; the server's own samples
# (its processes' and threads' names; not the backend's, the idle task's
# or kernel threads') are split into kernel and user space and divided by
# the load's request count. PARTS=1 then prints, per server, its samples
# split by component (bench/perf_parts.py: kernel, malloc, memcpy, aws-lc,
# rustls, h2, tokio, tern... for tern; by library for the peers) and its
# TOP symbols, from the last round. HOT=1 then prints tern's hot
# instructions (bench/perf_hot.py: the instructions of its busiest
# functions with the most samples, per request, each with the instruction
# before it and its source line: where a cache miss is waited for).
#
# Samples are CPU time: take them on an idle machine. perf adds its own
# overhead, so compare servers within one run rather than with
# terminators.sh's /proc figures.
#
# Usage: bench/keepalive-split.sh   (env: TERN=target/release/tern LOAD=h1|h2
#          SERVERS="tern hitch haproxy" DURATION=5 ROUNDS=2 FREQ=4999
#          PARTS= TOP=20 HOT=; nginx cannot be a server here: the backend is nginx)
# e.g.   LOAD=h2 PARTS=1 bench/keepalive-split.sh   (tern against haproxy)
# Needs: perf, wrk (LOAD=h1) or h2load (LOAD=h2), nginx, openssl, python3,
# taskset (and the peers).
# Only 127.0.0.1 is a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

TERN="${TERN:-$root/target/release/tern}"
LOAD="${LOAD:-h1}"
SERVERS="${SERVERS:-tern hitch haproxy}"
DURATION="${DURATION:-5}"
ROUNDS="${ROUNDS:-2}"
FREQ="${FREQ:-4999}"
PARTS="${PARTS:-}"
TOP="${TOP:-20}"
HOT="${HOT:-}"
SERVER_CPU=0
LOAD_CPU=1
# Server knobs read by lib.sh (as bench/terminators.sh or bench/h2.sh set them).
case "$LOAD" in
    h1)
        SRV_POOL=256
        SRV_ALPN=http/1.1
        load_tool=wrk
        ;;
    h2)
        SRV_POOL=512
        SRV_ALPN=h2
        load_tool=h2load
        # An L4 terminator cannot serve h2 in front of an HTTP/1.1 backend.
        SERVERS="$(tr ' ' '\n' <<< "$SERVERS" | grep -vx hitch | tr '\n' ' ')"
        ;;
    *) die "LOAD: h1 (wrk) or h2 (h2load), not $LOAD" ;;
esac
for tool in perf "$load_tool" nginx openssl python3 taskset; do need "$tool"; done
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

# run_load SECONDS URL: the load on CPU 1; prints the requests it completed.
run_load() {
    local out
    if [[ "$LOAD" == h1 ]]; then
        out="$(taskset -c "$LOAD_CPU" wrk -t1 -c50 -d"$1s" -H "Connection: keep-alive" "$2")"
        awk '/requests in/ {print $1}' <<< "$out"
    else
        out="$(taskset -c "$LOAD_CPU" h2load -c 50 -m 10 -D "$1" "$2" 2>&1)"
        # "requests: N total, N started, N done, N succeeded, N failed, N errored, ..."
        awk '/^requests:/ { if ($10 + $12 > 0) { print "h2load: " $0 > "/dev/stderr"; exit 1 } print $8 }' <<< "$out"
    fi
}

echo "| round | server | requests | kernel µs/request | user µs/request | total | kernel share |"
echo "|---|---|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
    for server in "${active[@]}"; do
        url="https://127.0.0.1:${server_port[$server]}/"
        run_load 1 "$url" > /dev/null
        perf record -q -e cpu-clock -F "$FREQ" -C "$SERVER_CPU" -o "$work/perf.data" 2> "$work/perf.err" &
        perf_pid=$!
        # perf writes its file's header once it is attached.
        for _ in $(seq 1 100); do [[ -s "$work/perf.data" ]] && break; sleep 0.05; done
        requests="$(run_load "$DURATION" "$url")"
        kill -INT "$perf_pid"
        wait "$perf_pid" || true
        # The server's own samples, by its process and thread names (tern's
        # threads are tern and tern-worker-N): not the backend's, the idle
        # task's, kernel threads' or those of anything else on CPU 0.
        perf report -i "$work/perf.data" --sort comm,dso,sym -n --stdio 2> /dev/null \
            | python3 -c '
import re, sys
own = {"tern": ("tern", "tokio-")}.get(sys.argv[1], (sys.argv[1],))
for line in sys.stdin:
    m = re.match(r"\s*([\d.]+%)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\[.\].*)", line)
    if m and m.group(3).startswith(own):
        print(m.group(1), m.group(2), m.group(4), m.group(5))
' "$server" > "$work/own-$server"
        if [[ -n "$HOT" && "$server" == tern ]]; then cp "$work/perf.data" "$work/perf-tern.data"; fi
        python3 -c '
import re, sys
round_, server, requests, freq = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
kernel = user = 0
for line in open(sys.argv[5]):
    _, count, dso, _ = line.split(" ", 3)
    if dso.startswith("[kernel"):
        kernel += int(count)
    else:
        user += int(count)
us = lambda n: n / freq / requests * 1e6
total = kernel + user
share = 100 * kernel / total if total else 0
print(f"| {round_} | {server} | {requests} | {us(kernel):.2f} | {us(user):.2f} | {us(total):.2f} | {share:.0f} % |")
' "$round" "$server" "$requests" "$FREQ" "$work/own-$server"
        echo "$requests" > "$work/requests-$server"
    done
done
if [[ -n "$PARTS" ]]; then
    for server in "${active[@]}"; do
        echo
        echo "== $server, round $ROUNDS: its own samples by component, per request"
        python3 "$here/perf_parts.py" "$(cat "$work/requests-$server")" "$FREQ" "$TOP" request < "$work/own-$server"
    done
fi
if [[ -n "$HOT" && -s "$work/perf-tern.data" ]]; then
    echo
    echo "== tern, round $ROUNDS: its worker's hot instructions, per request"
    python3 "$here/perf_hot.py" "$work/perf-tern.data" tern-worker-0 \
        "$(cat "$work/requests-tern")" "$FREQ"
fi
echo
echo "load: LOAD=$LOAD ($load_tool$([[ "$LOAD" == h2 ]] && echo ' -c50 -m10' || echo ' -t1 -c50'))"
echo "$("$TERN" --version 2>/dev/null | head -1), binary $TERN; tree at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
