#!/usr/bin/env bash
# gRPC unary calls through tern, nginx (grpc_pass) and haproxy (proto h2)
# in front of grpc-go's interop server (h2c), in one interleaved run: server
# CPU per call, calls/s and latency, with ratios of tern to each peer.
#
# Every server: ONE worker pinned to CPU 0, the same ECDSA P-256
# certificate, TLS 1.3 only, TLS_AES_128_GCM_SHA256 only, X25519 only, ALPN
# h2, access logs off, HTTP/2 to the backend over cleartext (tern
# `protocol = "h2c"`, nginx `grpc_pass grpc://` with upstream keepalive,
# haproxy `proto h2`). The interop server (google.golang.org/grpc/interop/
# server, the one tests/upstreams/grpc.rs runs) on CPU 0 with the server in
# the strict layout (BACKEND_CPU=server, the default) or on CPU 1 with the
# load (BACKEND_CPU=load). Load: ghz on CPU 1, CONNS connections, CONC
# concurrent calls, DURATION seconds, grpc.testing.TestService/UnaryCall
# with a 100-byte payload each way (bench/grpc/test.proto: the fields of
# grpc's own test.proto that the call uses).
# Reported: median of RUNS rounds of calls/s, server CPU µs per call
# (utime+stime of all its processes from /proc / calls), p99, and the
# backend's CPU per call (not part of the server's figure).
#
# Usage: bench/grpc.sh   (env: DURATION=10 RUNS=3 CONNS=10 CONC=50
#          TERN=target/release/tern SERVERS="tern nginx haproxy"
#          BACKEND_CPU=server|load GHZ=~/go/bin/ghz
#          INTEROP_SERVER=~/go/grpc-interop/bin/server)
# Needs: ghz (go install github.com/bojand/ghz/cmd/ghz@v0.93.0), grpc-go's
# interop server (.ci/run installs it), nginx (nginx-light), haproxy,
# openssl, python3, taskset. Only 127.0.0.1 is ever a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

bench_defaults "tern nginx haproxy" server
CONNS="${CONNS:-10}"
CONC="${CONC:-50}"
GHZ="${GHZ:-$(command -v ghz || echo "$HOME/go/bin/ghz")}"
INTEROP_SERVER="${INTEROP_SERVER:-$HOME/go/grpc-interop/bin/server}"
case "$BACKEND_CPU" in
    load) backend_cpu=$LOAD_CPU ;;
    server) backend_cpu=$SERVER_CPU ;;
    *) die "BACKEND_CPU must be server (backend on CPU $SERVER_CPU) or load (on CPU $LOAD_CPU)" ;;
esac
for tool in openssl python3 taskset; do need "$tool"; done
[[ -x "$GHZ" ]] || die "ghz not found (go install github.com/bojand/ghz/cmd/ghz@v0.93.0)"
[[ -x "$INTEROP_SERVER" ]] || die "no grpc-go interop server at $INTEROP_SERVER (go install google.golang.org/grpc/interop/server@v1.85.0)"

bench_workdir tern-grpc
make_cert ecdsa
backend_port="$(free_port)"
taskset -c "$backend_cpu" "$INTEROP_SERVER" -port="$backend_port" > "$work/interop.log" 2>&1 &
backend_pid=$!
pids+=("$backend_pid")
wait_port "$backend_port" || die "the interop server did not start"

# start_grpc_server NAME PORT: NAME in front of the interop server on
# 127.0.0.1:PORT, pinned to CPU 0; sets STARTED_PID.
start_grpc_server() {
    local name="$1" port="$2"
    grpc_server_cmd "$name" "$port" "$backend_port" || return 1
    taskset -c "$SERVER_CPU" "${GRPC_CMD[@]}" 2> "$work/$name/log" &
    started "$port" "$work/$name/log"
}

declare -A server_pid=() server_port=()
active=()
for server in $SERVERS; do
    if [[ "$server" != tern ]] && ! command -v "$server" > /dev/null 2>&1; then
        echo "$server is not installed; skipped" >&2
        continue
    fi
    server_port[$server]="$(free_port)"
    if start_grpc_server "$server" "${server_port[$server]}"; then
        server_pid[$server]=$STARTED_PID
        active+=("$server")
    else
        echo "$server did not start; skipped" >&2
    fi
done
[[ ${#active[@]} -gt 0 ]] || die "no server started"

payload="$(head -c 100 /dev/zero | tr '\0' 'x' | base64 -w0)"
# --skipTLS: TLS without checking the certificate (ghz's --insecure is
# plaintext).
call_args=(--skipTLS --proto "$here/grpc/test.proto" --call grpc.testing.TestService.UnaryCall
    -d "{\"response_size\": 100, \"payload\": {\"body\": \"$payload\"}}")
# Go offers X25519MLKEM768 first since 1.24; plain X25519 like the servers.
export GODEBUG=tlsmlkem=0
for server in "${active[@]}"; do
    out="$("$GHZ" "${call_args[@]}" -n 20 -c 1 -O json "127.0.0.1:${server_port[$server]}")"
    ok="$(python3 -c 'import json,sys; print(json.load(sys.stdin).get("statusCodeDistribution", {}).get("OK", 0))' <<< "$out")"
    [[ "$ok" == 20 ]] || die "$server: 20 UnaryCalls did not all succeed: $out"
done

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
results="$work/results.tsv"
: > "$results"
for run in $(seq 1 "$RUNS"); do
    for server in "${active[@]}"; do
        pid="${server_pid[$server]}"
        before="$(cpu_ticks "$pid")"
        backend_before="$(cpu_ticks "$backend_pid")"
        out="$(taskset -c "$LOAD_CPU" "$GHZ" "${call_args[@]}" --connections "$CONNS" -c "$CONC" \
            -z "${DURATION}s" -O json "127.0.0.1:${server_port[$server]}")"
        after="$(cpu_ticks "$pid")"
        backend_after="$(cpu_ticks "$backend_pid")"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$server" "$run" "$before" "$after" "$backend_before" \
            "$backend_after" "$(python3 -c '
import json, sys
r = json.load(sys.stdin)
codes = r.get("statusCodeDistribution", {})
ok = codes.get("OK", 0)
p99 = next((d["latency"] for d in r.get("latencyDistribution") or [] if d["percentage"] == 99), 0)
print(ok, sum(codes.values()) - ok, r.get("rps", 0), p99 / 1e6, sep="\t")' <<< "$out")" >> "$results"
        echo "run $run $server: $(tail -1 "$results" | cut -f7-)" >&2
        python3 -c 'import json,sys; e=json.load(sys.stdin).get("errorDistribution"); e and print("errors:", e)' \
            <<< "$out" | sed "s/^/run $run $server /" | tee -a "$work/errors.txt" >&2
    done
done

echo "## gRPC unary calls (100 B each way), ghz --connections $CONNS -c $CONC, ${DURATION}s x $RUNS interleaved runs; server on CPU $SERVER_CPU, ghz on CPU $LOAD_CPU, interop server on CPU $backend_cpu (BACKEND_CPU=$BACKEND_CPU)"
echo
python3 - "$results" "$(getconf CLK_TCK)" <<'PY'
import statistics, sys
from collections import defaultdict
tick_us = 1e6 / int(sys.argv[2])
rows = defaultdict(list)
order = []
for line in open(sys.argv[1]):
    server, _run, before, after, b_before, b_after, ok, failed, rps, p99_ms = line.rstrip("\n").split("\t")
    if server not in order:
        order.append(server)
    ok = int(ok)
    rows[server].append({
        "cpu": (int(after) - int(before)) * tick_us / ok if ok else None,
        "backend": (int(b_after) - int(b_before)) * tick_us / ok if ok else None,
        "rps": float(rps), "p99": float(p99_ms), "failed": int(failed),
    })
def med(server, key):
    xs = [r[key] for r in rows[server] if r[key] is not None]
    return statistics.median(xs) if xs else None
print("| server | calls/s | server CPU µs/call | p99 ms | failed | backend CPU µs/call |")
print("|---|---|---|---|---|---|")
for s in order:
    print(f"| {s} | {med(s, 'rps'):.0f} | {med(s, 'cpu'):.1f} | {med(s, 'p99'):.2f} | "
          f"{sum(r['failed'] for r in rows[s])} | {med(s, 'backend'):.1f} |")
print()
print("Server CPU µs/call of each round: " + "; ".join(
    f"{s} " + " / ".join(f"{r['cpu']:.1f}" for r in rows[s] if r["cpu"] is not None) for s in order))
if "tern" in order and len(order) > 1:
    mine = med("tern", "cpu")
    peers = {s: med(s, "cpu") for s in order if s != "tern"}
    best = min(peers, key=peers.get)
    each = ", ".join(f"{mine / c:.2f} x {s}" for s, c in peers.items())
    print()
    print(f"tern CPU per call = {each}; **{mine / peers[best]:.2f} x the best peer** ({best})")
for s in order:
    if any(r["failed"] for r in rows[s]):
        print(f"!!!! WARNING: {s} had failed calls", file=sys.stderr)
        print(f"!!!! WARNING: {s} had failed calls")
PY
if [[ -s "$work/errors.txt" ]]; then
    echo
    echo "Failed calls (ghz's error distribution, per run):"
    echo
    sed 's/^/- /' "$work/errors.txt"
fi
echo
echo "Conditions:"
echo
echo "- CPU: $(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}'), $(nproc) cores; kernel $(uname -r); load average before the runs: $load_before"
for server in "${active[@]}"; do
    echo "- $server: $(server_version "$server")"
done
echo "- tree at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'); $("$GHZ" --version 2>&1 | head -1 | sed 's/^/ghz /'); interop server $INTEROP_SERVER"
echo "- load: GODEBUG=tlsmlkem=0 taskset -c $LOAD_CPU ghz --skipTLS --proto bench/grpc/test.proto --call grpc.testing.TestService.UnaryCall -d '{response_size: 100, payload: 100 B}' --connections $CONNS -c $CONC -z ${DURATION}s 127.0.0.1:PORT"
echo "- every server: taskset -c $SERVER_CPU, one worker, TLSv1.3 only, $TLS_SUITE only, $TLS_GROUP only, ALPN h2, access log off, h2c to the backend; tern request IDs off (nginx and haproxy make none)"
