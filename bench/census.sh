#!/usr/bin/env bash
# Census of a small request's cost: where tern, nginx, haproxy and hitch
# spend it, per request, on the loads of bench/terminators.sh and
# bench/h2.sh. Counts, not times, so it reads the same on a busy machine:
#
#   keepalive  HTTP/1.1, 100-byte body, wrk -t1 -c50 (all four servers)
#   h2         HTTP/2, 100-byte body, h2load -c50 -m10 (hitch cannot: L4)
#   h3         HTTP/3, 100-byte body, tern bench --h3 -c20 -m1 (the load of
#              bench/h3-peers.sh; every server with SRV_H3 on; nginx and
#              haproxy need QUIC builds: NGINX_BIN, HAPROXY_BIN)
#
# For each server and load, two passes of DURATION seconds:
#   1. perf stat (software events: this kind of VM has no PMU, so no
#      instruction counts): system calls (raw_syscalls:sys_enter), epoll
#      waits (epoll_wait + epoll_pwait + epoll_pwait2), CPU time
#      (task-clock), and context switches from /proc/PID/task/*/status
#      (voluntary, nonvoluntary) before and after;
#   2. strace -c -f: system calls by kind (strace slows the server, so its
#      per-request counts are a shape, pass 1 has the totals);
# and for tern a third: perf record (cpu-clock samples) and the TOP
# user-space symbols of tern's own process.
# Every figure is divided by the requests the load tool completed in that
# pass. Servers as in bench/lib.sh: one worker pinned to CPU 0, TLS 1.3
# AES-128-GCM X25519, access logs off, tern with its defaults; the nginx
# backend and the load on CPU 1.
#
# Usage: bench/census.sh   (env: DURATION=5 TOP=25 TERN=target/release/tern
#                           SERVERS="tern nginx haproxy hitch" LOADS="keepalive h2"
#                           NGINX_BIN=... HAPROXY_BIN=... for LOADS=h3)
# Needs: perf, strace, nginx, haproxy, hitch, wrk, h2load, openssl, curl,
# python3, taskset; root (perf and strace attach to the servers).
# Only 127.0.0.1 is ever a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

DURATION="${DURATION:-5}"
TOP="${TOP:-25}"
TERN="${TERN:-$root/target/release/tern}"
SERVERS="${SERVERS:-tern nginx haproxy hitch}"
LOADS="${LOADS:-keepalive h2}"
SERVER_CPU=0
LOAD_CPU=1
# The peers' tuning, as in bench/h2.sh: nginx keeps this many idle backend
# connections (its default of none would churn). tern gets none.
SRV_POOL=512
for tool in perf strace nm wrk h2load nginx openssl curl python3 taskset; do need "$tool"; done

bench_workdir tern-census
make_cert ecdsa
mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/index.html"
backend_port="$(free_port)"
start_backend "$backend_port" "$LOAD_CPU"

# run_load LOAD PORT: runs the load; prints the requests it completed.
run_load() {
    local out
    case "$1" in
        keepalive)
            out="$(taskset -c "$LOAD_CPU" wrk -t1 -c50 -d"${DURATION}s" \
                -H "Connection: keep-alive" "https://127.0.0.1:$2/")"
            printf '%s\n' "$out" | awk '/requests in/ {print $1; exit}'
            ;;
        h2)
            out="$(taskset -c "$LOAD_CPU" h2load -c 50 -m 10 -D "$DURATION" "https://127.0.0.1:$2/" 2>&1)"
            printf '%s\n' "$out" | awk '/^requests:/ {print $8; exit}'
            ;;
        h3)
            taskset -c "$LOAD_CPU" "$TERN" bench --h3 -z "${DURATION}s" -c 20 -m 1 -k \
                --ciphers "$TLS_SUITE" --groups "$TLS_GROUP" --no-progress -o json \
                "https://127.0.0.1:$2/" \
                | python3 -c 'import json, sys; s = json.load(sys.stdin)["targets"][0]["summary"]; print(s["completed"] - s["failed"])'
            ;;
    esac
}

# settle: gives perf or strace, just started, time to attach (neither
# says when it has; a pass is long next to this).
settle() {
    sleep 1
}

results="$work/census.tsv"
: > "$results"
for load in $LOADS; do
    unset SRV_H3
    case "$load" in
        keepalive) SRV_ALPN=http/1.1 ;;
        h2) SRV_ALPN=h2 ;;
        h3) SRV_ALPN=h2; SRV_H3=1 ;;
        *) die "LOADS: keepalive, h2 and/or h3" ;;
    esac
    wanted=()
    for server in $SERVERS; do
        [[ "$load" == h2 && "$server" == hitch ]] && continue
        [[ "$load" == h3 ]] && ! quic_capable "$server" && continue
        wanted+=("$server")
    done
    start_servers "$backend_port" "${wanted[@]}"
    for server in "${active[@]}"; do
        port="${server_port[$server]}"
        read -r -a spids <<< "$(pids_of "${server_pid[$server]}")"
        curl_version=--http1.1
        [[ "$load" != keepalive ]] && curl_version=--http2
        body="$(curl -sS -k "$curl_version" "https://127.0.0.1:$port/")"
        [[ ${#body} -eq 100 ]] || die "$server did not proxy the 100-byte body (got ${#body} bytes)"
        # Warm-up: pools, caches.
        run_load "$load" "$port" > /dev/null
        tag="$load.$server"

        # Pass 1: totals from perf stat and /proc.
        read -r v0 n0 <<< "$(switches "${spids[@]}")"
        perf stat -x, -o "$work/$tag.stat" \
            -e task-clock,raw_syscalls:sys_enter,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_epoll_pwait2 \
            -p "$(IFS=,; echo "${spids[*]}")" &
        tracer=$!
        settle
        requests="$(run_load "$load" "$port")"
        kill -INT "$tracer"
        wait "$tracer" || true
        read -r v1 n1 <<< "$(switches "${spids[@]}")"
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$load" "$server" "${requests:-0}" "$((v1 - v0))" "$((n1 - n0))" "$work/$tag.stat" >> "$results"

        # Pass 2: system calls by kind.
        strace_args=()
        for p in "${spids[@]}"; do strace_args+=(-p "$p"); done
        strace -c -f -qq -o "$work/$tag.strace" "${strace_args[@]}" &
        tracer=$!
        settle
        requests="$(run_load "$load" "$port")"
        kill -INT "$tracer"
        wait "$tracer" || true
        echo "${requests:-0}" > "$work/$tag.strace.requests"
        echo "census: $load $server done" >&2

        # Pass 3 (tern): where its user-space time goes.
        if [[ "$server" == tern ]]; then
            perf record -q -e cpu-clock -F 1999 -o "$work/$tag.perf" -p "${spids[0]}" 2> /dev/null &
            tracer=$!
            settle
            run_load "$load" "$port" > /dev/null
            kill -INT "$tracer"
            wait "$tracer" || true
            # perf 6.1 cannot read the symbols of tern's binary here ("not
            # found, continuing without symbols"): census.py names the
            # addresses from nm's table.
            perf report -i "$work/$tag.perf" --stdio --no-children --sort dso,sym 2> /dev/null \
                | grep '\[\.\]' > "$work/$tag.top" || true
            nm -C --defined-only "$TERN" > "$work/tern.nm" 2> /dev/null || true
            perf report -i "$work/$tag.perf" --stdio --no-children --sort dso 2> /dev/null \
                | grep -v '^#' | grep -v '^$' | head -n 8 > "$work/$tag.dso" || true
        fi
    done
    for server in "${active[@]}"; do
        kill "${server_pid[$server]}" 2> /dev/null || true
        wait "${server_pid[$server]}" 2> /dev/null || true
    done
done

{
    echo "## Census of a small request, per request (bench/census.sh)"
    echo
    python3 "$here/census.py" "$results" "$work"
    echo
    echo "Conditions:"
    echo
    echo "- CPU: $(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}'), $(nproc) cores; kernel $(uname -r); load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    for server in $SERVERS; do
        echo "- $server: $(server_version "$server")"
    done
    echo "- tree at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'); $(h2load --version 2>&1 | head -1); wrk $(wrk --version 2>&1 | awk 'NR==1 {print $2}')"
    echo "- keepalive: taskset -c $LOAD_CPU wrk -t1 -c50 -d${DURATION}s -H \"Connection: keep-alive\" https://127.0.0.1:PORT/"
    echo "- h2: taskset -c $LOAD_CPU h2load -c 50 -m 10 -D $DURATION https://127.0.0.1:PORT/"
    echo "- h3: taskset -c $LOAD_CPU tern bench --h3 -z ${DURATION}s -c 20 -m 1 -k https://127.0.0.1:PORT/ (UDP GSO on for every server)"
    echo "- every server: taskset -c $SERVER_CPU, one worker, TLSv1.3 only, $TLS_SUITE, $TLS_GROUP, access log off; configs in bench/lib.sh; tern with its defaults (no pool tuning), nginx upstream keepalive $SRV_POOL, haproxy http-reuse always"
    echo "- backend: nginx serving 100 bytes on CPU $LOAD_CPU; one warm-up run before each pass"
}
