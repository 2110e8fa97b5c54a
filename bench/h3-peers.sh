#!/usr/bin/env bash
# HTTP/3 through tern, nginx and haproxy side by side, with HTTP/2 through
# the same servers for reference: what each server's CPU pays per request
# over QUIC, for a small (100 B) and a large (1 MiB) response.
#
# Debian's nginx 1.22 and haproxy 2.6 have no QUIC: give QUIC builds with
# NGINX_BIN (nginx >= 1.25 with --with-http_v3_module) and HAPROXY_BIN
# (haproxy >= 2.8 built with USE_QUIC=1; over OpenSSL, also
# USE_QUIC_OPENSSL_COMPAT=1, which this script turns on with limited-quic).
# docs/benchmarks-history.md says how the ones of its runs were built.
#
# Every server: one worker pinned to CPU 0 with the nginx backend, the same
# certificate, TLS 1.3 TLS_AES_128_GCM_SHA256 X25519 only (pinned on both
# sides), access logs off, UDP GSO on (tern's default; nginx quic_gso on;
# haproxy's default), HTTP/2 on its TCP port and HTTP/3 on the same UDP
# port (configs in lib.sh, start_server with SRV_H3=1). The load, on CPU 1:
# `tern bench` over HTTP/3, then over HTTP/2, C connections with one
# request at a time each, every server a target of one run (interleaved
# rounds, ROUNDS of them, DURATION seconds per target per run). Server CPU
# per request is utime+stime from /proc of the processes owning each
# server's listening socket. RUNS runs; the figures, last: each server's
# HTTP/3 CPU per request against the best peer's, and against its own
# HTTP/2, medians over the runs.
#
# Usage: bench/h3-peers.sh   (env: NGINX_BIN=... HAPROXY_BIN=... DURATION=5
#          ROUNDS=3 RUNS=3 C=20 TERN=target/release/tern SERVERS="tern nginx haproxy"
#          BENCH_TERN=...: the tern that runs the load, default TERN; set it
#          to compare two tern servers under one client)
# Needs: nginx (the backend), openssl, python3, taskset. Only 127.0.0.1 is
# ever a target; everything stops by itself.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

DURATION="${DURATION:-5}"
ROUNDS="${ROUNDS:-3}"
RUNS="${RUNS:-3}"
C="${C:-20}"
TERN="${TERN:-$root/target/release/tern}"
BENCH_TERN="${BENCH_TERN:-$TERN}"
SERVERS="${SERVERS:-tern nginx haproxy}"
SERVER_CPU=0
LOAD_CPU=1
TLS_SUITE=TLS_AES_128_GCM_SHA256
TLS_GROUP=X25519
SRV_ALPN=h2
SRV_POOL=256
SRV_H3=1
for tool in nginx openssl python3 taskset; do need "$tool"; done
[[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"
[[ -x "$BENCH_TERN" ]] || die "no tern binary at $BENCH_TERN (BENCH_TERN)"

# A server without QUIC would fail every HTTP/3 request: leave it out, say so.
wanted=()
for server in $SERVERS; do
    quic_capable "$server" && wanted+=("$server")
done
[[ ${#wanted[@]} -gt 0 ]] || die "no server with HTTP/3"

bench_workdir tern-h3-peers
make_cert ecdsa
mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/100"
head -c $((1024 * 1024)) /dev/zero | tr '\0' 'x' > "$work/www/1m"
backend_port="$(free_port)"
start_backend "$backend_port" "$SERVER_CPU"
start_servers "$backend_port" "${wanted[@]}"

results="$work/results.tsv"
for run in $(seq 1 "$RUNS"); do
    for size in 100 1m; do
        for proto in h3 h2; do
            urls=()
            for server in "${active[@]}"; do urls+=("https://127.0.0.1:${server_port[$server]}/$size"); done
            compare=()
            [[ ${#urls[@]} -gt 1 ]] && compare=(--compare --rounds "$ROUNDS")
            json="$work/run$run-$size-$proto.json"
            taskset -c "$LOAD_CPU" "$BENCH_TERN" bench "--$proto" "${compare[@]}" -z "${DURATION}s" \
                -c "$C" -m 1 -k --ciphers "$TLS_SUITE" --groups "$TLS_GROUP" --sni localhost --host localhost \
                --no-progress -o json "${urls[@]}" > "$json"
            python3 - "$json" "$run" "$size" "$proto" "${active[*]}" >> "$results" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
names = sys.argv[5].split()
for name, t in zip(names, report["targets"]):
    s, cpu = t["summary"], t["server_cpu"] or {}
    neg = s["negotiated"][0] if s["negotiated"] else {}
    print("\t".join(str(x) for x in [
        sys.argv[2], sys.argv[3], sys.argv[4], name, s["completed"], s["failed"], round(s["rps"]),
        s["percentiles_ms"]["50"], s["percentiles_ms"]["99"], cpu.get("us_per_request"),
        neg.get("alpn"), neg.get("cipher"), neg.get("group")]))
PY
            echo "run $run, /$size over $proto done" >&2
        done
    done
done

echo
echo "HTTP/3 (and HTTP/2) through ${active[*]}: tern bench --h3|--h2 --rounds $ROUNDS -z ${DURATION}s -c $C -m 1, every server a target of the same run; TLS 1.3 $TLS_SUITE $TLS_GROUP; one worker and the nginx backend on CPU $SERVER_CPU, load on CPU $LOAD_CPU; $(nproc) CPUs, $(uname -r)"
for server in "${active[@]}"; do echo "  $server: $(server_version "$server")"; done
echo "  load: $BENCH_TERN bench ($("$BENCH_TERN" --version 2>/dev/null || echo "tern ?"))"
python3 - "$results" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
print("| run | response | protocol | server | requests | failed | req/s | p50 ms | p99 ms | server CPU µs/request | negotiated |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    cpu = "?" if r[9] == "None" else f"{float(r[9]):.1f}"
    print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} | {r[6]} | {float(r[7]):.2f} | {float(r[8]):.2f} | {cpu} | {r[10]} {r[11]} {r[12]} |")

def cpu(run, size, proto, server):
    for r in rows:
        if (r[0], r[1], r[2], r[3]) == (run, size, proto, server) and r[9] != "None" and r[5] == "0":
            return float(r[9])
    return None

runs = sorted({r[0] for r in rows})
servers = list(dict.fromkeys(r[3] for r in rows))
figures = []
for size in ("100", "1m"):
    parts = []
    for server in servers:
        vs_peer, vs_h2 = [], []
        for run in runs:
            mine = cpu(run, size, "h3", server)
            peers = [c for c in (cpu(run, size, "h3", p) for p in servers if p != server) if c]
            h2 = cpu(run, size, "h2", server)
            if mine and peers:
                vs_peer.append(mine / min(peers))
            if mine and h2:
                vs_h2.append(mine / h2)
        peer = f"{statistics.median(vs_peer):.2f}x the best peer" if vs_peer else "no peer"
        own = f"{statistics.median(vs_h2):.2f}x its HTTP/2" if vs_h2 else "no HTTP/2 figure"
        parts.append(f"{server} {peer}, {own}")
    figures.append(f"/{size}: " + "; ".join(parts))
print("HTTP/3 server CPU per request (medians of runs): " + " | ".join(figures))
PY
