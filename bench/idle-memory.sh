#!/usr/bin/env bash
# Memory per idle TLS connection: tern, nginx, haproxy (and hitch when the
# open-file limit allows it) in one run, each in front of the same backend.
#
# For each server in turn, bench/idle_conns.py (one Python asyncio process on
# CPU 1) makes WARM connections that each do one HTTP/1.1 request and close,
# waits SETTLE s and reads the server's memory (the baseline); then opens
# CONNS TLS connections that each make one HTTP/1.1 keepalive request and sit
# idle, waits SETTLE s and reads it again; then asks every held connection
# for a second request to prove the server kept it. The figure:
#   (memory with CONNS idle connections held - baseline) / CONNS, in KiB,
# with memory = VmRSS (and Pss, which shares pages fairly between nginx's or
# hitch's master and worker) summed over all the server's processes. Kernel
# socket buffers are not in it, for any server.
#
# Every server: one worker pinned to CPU 0, the same ECDSA P-256 certificate,
# TLS 1.3 only, TLS_AES_128_GCM_SHA256 only, X25519 only, access logs off,
# idle timeouts of IDLE_S (900 s) and connection limits above CONNS so none
# closes an idle connection during the run.
#
# Usage: bench/idle-memory.sh   (env: CONNS=10000 WARM=100 SETTLE=3
#          TERN=target/release/tern SERVERS="tern nginx haproxy hitch"
#          SOURCES=127.0.0.1[,127.0.0.2,...] when source ports run short)
# Needs: nginx (nginx-light), haproxy, hitch (optional), openssl, python3, taskset.
# hitch holds two descriptors per connection (client and backend), so it is
# skipped when 2 x CONNS does not fit under the open-file limit.
# Only 127.0.0.1 is ever a target. Stops by itself (each client run is
# bounded by DEADLINE seconds) and removes its scratch folder.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

CONNS="${CONNS:-10000}"
WARM="${WARM:-100}"
SETTLE="${SETTLE:-3}"
IDLE_S="${IDLE_S:-900}"
DEADLINE="${DEADLINE:-600}"
TERN="${TERN:-$root/target/release/tern}"
SERVERS="${SERVERS:-tern nginx haproxy hitch}"
SOURCES="${SOURCES:-127.0.0.1}"
SERVER_CPU=0
LOAD_CPU=1
for tool in nginx openssl python3 taskset timeout; do need "$tool"; done

# Every process started below inherits the raised limit.
ulimit -n "$(ulimit -Hn)"
fd_limit="$(ulimit -n)"
((CONNS + 512 <= fd_limit)) || die "CONNS=$CONNS does not fit under the open-file limit ($fd_limit, hard)"

# Server knobs (see lib.sh): hold CONNS, never time an idle connection out.
SRV_MAX_CONNS=$CONNS
SRV_IDLE_S=$IDLE_S
SRV_POOL=64
SRV_ALPN=http/1.1

bench_workdir tern-idlemem

make_cert ecdsa
mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/index.html"
backend_port="$(free_port)"
start_backend "$backend_port" "$LOAD_CPU"

servers=()
for server in $SERVERS; do
    if [[ "$server" == hitch ]] && ((2 * CONNS + 512 > fd_limit)); then
        echo "hitch skipped: it needs 2 x CONNS descriptors (client and backend side), over the limit $fd_limit" >&2
        continue
    fi
    servers+=("$server")
done
start_servers "$backend_port" "${servers[@]}"

negotiation_report="$work/negotiation.md"
check_negotiation "" "${active[@]}" > "$negotiation_report" || true
cat "$negotiation_report" >&2

for server in "${active[@]}"; do
    echo "$server: opening $CONNS idle connections..." >&2
    status=0
    timeout "$((DEADLINE + 30))" taskset -c "$LOAD_CPU" python3 "$here/idle_conns.py" \
        --port "${server_port[$server]}" --pid "${server_pid[$server]}" \
        --conns "$CONNS" --warm "$WARM" --settle "$SETTLE" --deadline "$DEADLINE" \
        --sources "$SOURCES" > "$work/$server.json" || status=$?
    if [[ ! -s "$work/$server.json" ]]; then
        echo "{\"failed\": \"client exited with status $status\"}" > "$work/$server.json"
    fi
    echo "$server: $(cat "$work/$server.json")" >&2
done

{
    echo "## Memory per idle TLS connection, $CONNS connections held"
    echo
    echo "Negotiated (\`openssl s_client\`):"
    echo
    cat "$negotiation_report"
    echo
    echo "Conditions:"
    echo
    echo "- $CONNS TLS connections from one Python asyncio client on CPU $LOAD_CPU (bench/idle_conns.py, $(python3 -c 'import ssl, sys; print("Python", sys.version.split()[0], ssl.OPENSSL_VERSION)')), source addresses $SOURCES, to 127.0.0.1"
    echo "- each: one HTTP/1.1 keepalive request for a 100-byte body, then idle for ${SETTLE}s before the reading; a second request afterwards proves the server kept it"
    echo "- baseline: after $WARM warm-up connections (one request each, closed) and ${SETTLE}s"
    echo "- memory: VmRSS and Pss summed over the server's processes; kernel socket memory not included"
    echo "- every server: one worker on CPU $SERVER_CPU, $EXPECTED_TLS only, ECDSA P-256 certificate, access log off, idle timeout ${IDLE_S}s, connection limit $((CONNS + 1024)); configs in bench/lib.sh (start_server)"
    echo "- open-file limit $fd_limit; kernel $(uname -r); tree at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
    for server in "${active[@]}"; do
        echo "- $server: $(server_version "$server")"
    done
    echo
    python3 - "$CONNS" "$work" "${active[@]}" <<'PY'
import json
import sys

conns, work, servers = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
print("| server | KiB per idle connection (RSS) | KiB per idle connection (Pss) | RSS before → held, MiB | held | alive after | client saw |")
print("|---|---|---|---|---|---|---|")
bad = []
for s in servers:
    r = json.load(open(f"{work}/{s}.json"))
    if "failed" in r or not r.get("conns_held"):
        print(f"| {s} | — | — | — | 0 | — | {r.get('failed', 'no connection held')} |")
        bad.append(f"{s}: {r.get('failed') or r.get('first_errors')}")
        continue
    ok = r["conns_held"] == conns and r["alive_after"] == r["conns_held"] and not r["closed_by_server"]
    if not ok:
        bad.append(f"{s}: held {r['conns_held']} of {conns}, {r['closed_by_server']} closed by the server, "
                   f"{r['alive_after']} answered again; errors {r['first_errors'] + r['second_errors']}")
    mark = "" if ok else " (INVALID)"
    print(f"| {s} | **{r['rss_kib_per_conn']:.1f}**{mark} | {r['pss_kib_per_conn']:.1f} | "
          f"{r['base_rss_kib'] / 1024:.1f} → {r['held_rss_kib'] / 1024:.1f} | {r['conns_held']} | "
          f"{r['alive_after']} | {r['negotiated']} |")
for line in bad:
    print()
    print(f"!!!!!!!! WARNING: {line}")
    print(f"!!!!!!!! WARNING: {line}", file=sys.stderr)
PY
}
