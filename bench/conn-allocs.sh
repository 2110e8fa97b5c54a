#!/usr/bin/env bash
# What a new connection allocates in tern, per protocol (issue 26: a new
# QUIC connection at <= 1.3x a new TCP+TLS one). heaptrack records every
# malloc, calloc and realloc of `tern serve` under `tern bench --plan new`
# (a new connection, full handshake and one 100 B request each), once
# with no connection (N=0: start-up and shutdown alone) and once with N;
# the difference divided by N is what one connection costs: allocation
# calls, bytes, and the allocations of more than 1,032 bytes (past glibc's
# per-thread cache, so malloc's slow path both ways). Counts, not times:
# they read the same on a busy machine.
#
# SITES=1 adds, per protocol, the call sites with the most allocations per
# connection (the deepest frames outside the allocator and the standard
# collections), and for QUIC its sites against TCP+TLS's (h3 - h1); it
# needs rustfilt (cargo install rustfilt) for Rust's symbol names.
#
# tern serve: one worker on CPU 0 with an nginx backend serving 100 bytes,
# TLS 1.3 AES-128-GCM X25519, HTTP/3 on, access log off, its other
# defaults; the load on CPU 1.
#
# Usage: bench/conn-allocs.sh   (env: N=1000 C=10 PROTOS="h1 h3" SITES=
#          TOP=30 TERN=target/release/tern BENCH_TERN=... KEEP=1 keeps the
#          heaptrack files)
# Needs: heaptrack (Debian: heaptrack), nginx, openssl, python3, taskset.
# Only 127.0.0.1 is ever a target; everything stops by itself.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

N="${N:-1000}"
C="${C:-10}"
PROTOS="${PROTOS:-h1 h3}"
TOP="${TOP:-30}"
bench_defaults tern server
BENCH_TERN="${BENCH_TERN:-$TERN}"
TLS_SUITE=TLS_AES_128_GCM_SHA256
TLS_GROUP=X25519
SRV_ALPN=h2
SRV_H3=1
for tool in heaptrack heaptrack_print nginx openssl python3 taskset; do need "$tool"; done
[[ -n "${SITES:-}" ]] && need rustfilt
[[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"

bench_workdir tern-conn-allocs
make_cert ecdsa
www_backend "$SERVER_CPU"

# serve_under PROTO COUNT: one heaptrack'd tern serve under COUNT new
# connections of PROTO (none for 0), stopped; leaves $work/PROTO-COUNT.*
serve_under() {
    local proto="$1" count="$2" port tern_pid heaptrack_pid i
    local -a flag
    port="$(free_port)"
    tern_serve_args "$port" "$backend_port"
    taskset -c "$SERVER_CPU" heaptrack -o "$work/$proto-$count" "$TERN" "${TERN_SERVE_ARGS[@]}" \
        > "$work/$proto-$count.heaptrack" 2> "$work/$proto-$count.log" &
    heaptrack_pid=$!
    # The process heaptrack runs (its own script's command line holds the
    # same words, so anchored at the binary); the cleanup stops it if this
    # script stops early, and heaptrack with it.
    for i in $(seq 100); do
        tern_pid="$(pgrep -f "^$TERN serve --listen 127.0.0.1:$port " | head -1 || true)"
        [[ -n "$tern_pid" ]] && curl -sk -o /dev/null "https://127.0.0.1:$port/" && break
        [[ $i == 100 ]] && die "tern did not answer on $port (log: $work/$proto-$count.log)"
        sleep 0.1
    done
    pids+=("$tern_pid")
    case "$proto" in
        h1) flag=(--alpn http/1.1) ;;
        h2) flag=(--h2) ;;
        h3) flag=(--h3) ;;
        *) die "unknown protocol $proto (h1, h2 or h3)" ;;
    esac
    if [[ "$count" != 0 ]]; then
        taskset -c "$LOAD_CPU" "$BENCH_TERN" bench --plan new -n "$count" -c "$C" "${flag[@]}" \
            --ciphers "$TLS_SUITE" --groups "$TLS_GROUP" --no-progress "https://127.0.0.1:$port/" \
            > "$work/$proto-$count.bench" 2>&1 || die "tern bench failed: $work/$proto-$count.bench"
    fi
    kill -TERM "$tern_pid"
    wait "$heaptrack_pid" || true
    unset 'pids[-1]'  # gone: its number may be reused
    local data="" candidate
    for candidate in "$work/$proto-$count".zst "$work/$proto-$count".gz; do
        [[ -s "$candidate" ]] && data="$candidate" && break
    done
    [[ -n "$data" ]] || die "heaptrack wrote no data for $proto-$count"
    heaptrack_print -f "$data" -H "$work/$proto-$count.hist" > "$work/$proto-$count.txt" 2> /dev/null
    if [[ -n "${SITES:-}" ]]; then
        heaptrack_print -f "$data" -t 0 --print-allocators 0 --print-peaks 0 --print-temporary 0 \
            --flamegraph-cost-type allocations -F "$work/$proto-$count.stacks" > /dev/null 2>&1
        rustfilt < "$work/$proto-$count.stacks" > "$work/$proto-$count.dm"
    fi
}

for proto in $PROTOS; do
    serve_under "$proto" 0
    serve_under "$proto" "$N"
    echo "$proto done" >&2
done

echo "What one new connection + 100 B request allocates in tern serve (heaptrack; N=$N minus N=0, -c $C); TLS 1.3 $TLS_SUITE $TLS_GROUP; tern and its nginx backend on CPU $SERVER_CPU, load on CPU $LOAD_CPU; $(nproc) CPUs, $(uname -r)"
echo "  $(server_version tern)"
python3 "$here/alloc_sites.py" "$work" "$N" "$TOP" $PROTOS
