#!/usr/bin/env bash
# What one new connection carrying one 100 B request costs a server in
# datagrams and system calls (issue 26: a new QUIC connection at <= 1.3x a
# new TCP+TLS one). Counts, not times, so it reads the same on a busy
# machine. For each server (tern and, with HAPROXY_BIN, haproxy 3.2 with
# QUIC) a QUIC pass, and for tern a TCP+TLS (HTTP/1.1) pass as well:
#
#   load     `tern bench [--h3] --plan new -n N -c C` (BENCH_TERN), after
#            WARM unmeasured connections;
#   strace   `strace -c -f -p PID` over the measured load: the server's
#            system calls by kind, per connection;
#   client   tern bench's own QUIC counters: datagrams it sent (the
#            server received) and received (the server sent), per
#            connection, up to the client's close;
#   host     nstat's UdpOutDatagrams over the same load (every datagram on
#            the host both ways, the client's included; only meaningful on
#            a machine where nothing else speaks UDP).
#
# Servers as in bench/lib.sh (one worker on CPU 0 with the nginx backend,
# TLS 1.3 AES-128-GCM X25519, access logs off), load on CPU 1.
#
# Usage: bench/quic-new-packets.sh   (env: N=300 WARM=100 C=10
#          TERN=target/release/tern BENCH_TERN=... HAPROXY_BIN=...)
# Needs: nginx, strace, nstat, openssl, python3, taskset; root (strace
# attaches to the servers). Only 127.0.0.1 is ever a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

N="${N:-300}"
WARM="${WARM:-100}"
C="${C:-10}"
quic_new_conn_defaults strace nstat

bench_workdir tern-quic-new
make_cert ecdsa
www_backend "$SERVER_CPU"
servers=(tern)
[[ -n "${HAPROXY_BIN:-}" ]] && servers+=(haproxy)
start_servers "$backend_port" "${servers[@]}"

# load PROTO PORT COUNT JSON: COUNT new connections, one request each.
load() {
    local -a proto=()
    [[ "$1" == h3 ]] && proto=(--h3)
    taskset -c "$LOAD_CPU" "$BENCH_TERN" bench "${proto[@]}" --plan new -n "$3" -c "$C" -k \
        --ciphers "$TLS_SUITE" --groups "$TLS_GROUP" --no-progress -o json \
        "https://127.0.0.1:$2/" > "$4"
}

echo "A new connection + one 100 B request: per connection, N=$N (after $WARM), -c $C; $(nproc) CPUs, $(uname -r)"
printf '%-8s %-7s %9s %9s %9s %9s %9s %9s\n' server proto syscalls sendmsg recvmsg epoll dgr_out dgr_in
for server in "${active[@]}"; do
    protos="h3"
    [[ "$server" == tern ]] && protos="h3 h1"
    for proto in $protos; do
        port="${server_port[$server]}"
        pid="${server_pid[$server]}"
        load "$proto" "$port" "$WARM" "$work/warm.json"
        strace -c -f -q -p "$pid" -o "$work/strace-$server-$proto.txt" &
        spid=$!
        # strace is attached once it lists the process's threads as traced.
        for _ in $(seq 50); do
            grep -q "TracerPid:[[:space:]]*[1-9]" "/proc/$pid/status" && break
            sleep 0.1
        done
        nstat -n
        load "$proto" "$port" "$N" "$work/run-$server-$proto.json"
        udp_out="$(nstat -z UdpOutDatagrams | awk '/UdpOutDatagrams/ {print $2}')"
        kill -INT "$spid"
        wait "$spid" 2>/dev/null || true
        python3 - "$work/strace-$server-$proto.txt" "$work/run-$server-$proto.json" "$N" "$server" "$proto" "$udp_out" <<'PY'
import json, re, sys
path, run, n, server, proto, udp_out = sys.argv[1:]
n = int(n)
calls = {}
for line in open(path):
    f = line.split()
    if len(f) >= 5 and re.match(r"^[0-9.]+$", f[0]) and f[-1] not in ("total",):
        calls[f[-1]] = int(f[3])
total = sum(calls.values())
send = sum(v for k, v in calls.items() if k.startswith(("sendmsg", "sendmmsg", "sendto", "write")))
recv = sum(v for k, v in calls.items() if k.startswith(("recvmsg", "recvmmsg", "recvfrom", "read")))
epoll = sum(v for k, v in calls.items() if k.startswith("epoll"))
t = json.load(open(run))
targets = t["targets"] if "targets" in t else [t]
quic = (targets[0].get("summary") or {}).get("quic") or {}
out = quic.get("datagrams_received", 0) / n
inn = quic.get("datagrams_sent", 0) / n
print(f"{server:<8} {proto:<7} {total/n:9.2f} {send/n:9.2f} {recv/n:9.2f} {epoll/n:9.2f} "
      f"{out:9.2f} {inn:9.2f}   (host UDP datagrams {int(udp_out or 0)/n:.2f}; "
      + ", ".join(f"{k} {v/n:.2f}" for k, v in sorted(calls.items(), key=lambda kv: -kv[1])[:8]) + ")")
PY
    done
done
echo "dgr_out/dgr_in: datagrams the server sent/received per connection, as tern bench's QUIC client counted them up to its close (h1: none)"
