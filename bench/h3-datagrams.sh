#!/usr/bin/env bash
# UDP datagrams per HTTP/3 request, each way, for tern and the QUIC peers,
# on the load of bench/h3-peers.sh (100-byte responses, `tern bench --h3
# -c C -m 1`, keepalive). The kernel's UDP cost is per datagram, so a
# server that answers a request and acknowledges the client in one
# datagram pays less than one that sends them apart. The counts come from
# the client (quinn's connection statistics in tern bench's JSON report:
# what it sent is what the server received), so they do not depend on
# machine load the way times do; the C handshakes of each run are in the
# count (~0.013 datagrams per request each way at the defaults). The
# server's own system calls per request come from `strace -c -f` over a
# second, identical run.
#
# Usage: bench/h3-datagrams.sh   (env: N=20000 C=20 SERVERS="tern haproxy"
#          HAPROXY_BIN=... NGINX_BIN=... TERN=target/release/tern STRACE=1
#          BENCH_TERN=... the client's binary, TERN by default)
# e.g.   HAPROXY_BIN=/work/wt/h3perf-peers/haproxy-3.2.0/haproxy bench/h3-datagrams.sh
# Needs: nginx (the backend), openssl, python3, taskset (strace with
# STRACE=1). Only 127.0.0.1 is ever a target; everything stops by itself.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

N="${N:-20000}"
C="${C:-20}"
SERVERS="${SERVERS:-tern haproxy}"
STRACE="${STRACE:-1}"
TERN="${TERN:-$root/target/release/tern}"
BENCH_TERN="${BENCH_TERN:-$TERN}"
for tool in nginx openssl python3 taskset; do need "$tool"; done
[[ "$STRACE" == 0 ]] || need strace

bench_workdir tern-h3-datagrams
bench_defaults
make_cert ecdsa
mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/index.html"
backend_port="$(free_port)"
start_backend "$backend_port" 0
SRV_ALPN=h2
SRV_H3=1
servers=()
for s in $SERVERS; do quic_capable "$s" && servers+=("$s"); done
[[ ${#servers[@]} -gt 0 ]] || die "no QUIC-capable server in SERVERS=$SERVERS"
start_servers "$backend_port" "${servers[@]}"

# load SERVER TAG: N requests on C connections; the JSON report in $work/TAG.json.
load() {
    taskset -c "$LOAD_CPU" "$BENCH_TERN" bench --h3 -n "$N" -c "$C" -m 1 -k \
        --ciphers "$TLS_SUITE" --groups "$TLS_GROUP" --no-progress -o json \
        "https://127.0.0.1:${server_port[$1]}/" > "$work/$2.json" 2> "$work/$2.err" ||
        { cat "$work/$2.err" >&2; die "$1: load failed"; }
}

printf '%-8s %12s %12s %10s %16s\n' server "client->srv" "srv->client" "both" "srv syscalls"
for server in "${active[@]}"; do
    load "$server" "$server-warm"
    load "$server" "$server"
    calls="-"
    if [[ "$STRACE" != 0 ]]; then
        strace_args=(-p "${server_pid[$server]}")
        for p in $(pgrep -P "${server_pid[$server]}" || true); do strace_args+=(-p "$p"); done
        strace -c -f -qq -o "$work/$server.strace" "${strace_args[@]}" &
        strace_pid=$!
        # strace does not say when it has attached (as in census.sh).
        sleep 1
        load "$server" "$server-traced"
        kill -INT "$strace_pid"
        wait "$strace_pid" 2> /dev/null || true
        calls="$(awk -v n="$N" '$NF == "total" {printf "%.2f", $(NF - 2) / n}' "$work/$server.strace")"
    fi
    python3 - "$work/$server.json" "$server" "$calls" <<'PY'
import json, sys
path, server, calls = sys.argv[1:4]
s = json.load(open(path))["targets"][0]["summary"]
q = s.get("quic") or {}
n = s["completed"]
if s["failed"] or not n or not q:
    sys.exit(f"{server}: {s['failed']} failed, {n} completed, quic stats {q}")
sent, received = q["datagrams_sent"] / n, q["datagrams_received"] / n
print(f"{server:<8} {sent:12.3f} {received:12.3f} {sent + received:10.3f} {calls:>16}")
PY
done
echo "(datagrams per request from tern bench's QUIC statistics, $N requests on $C connections, -m 1, after $N unmeasured; system calls: strace -c -f over another $N)"
