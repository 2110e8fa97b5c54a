#!/usr/bin/env bash
# What one gRPC unary call costs a server in instructions (callgrind) or in
# system calls (strace -c -f): counts, not times, so they read the same on a
# busy machine, for A/B work on the gRPC path (bench/grpc.sh's strict figure
# is CPU time on an idle machine).
#
# The layout of bench/grpc.sh (bench/lib.sh's grpc_server_cmd): SERVER
# (tern by default, or haproxy) with one worker, TLS 1.3 AES-128-GCM X25519,
# ALPN h2, access log off, in front of grpc-go's interop server over h2c
# with connections kept. Load: ghz, grpc.testing.TestService/UnaryCall with
# 100 bytes each way, CONNS connections and CONC calls in flight. WARM
# calls fill pools and caches, then the counters start, N calls run, and
# the counters stop. The handshakes of the measured load (CONNS of them,
# ghz opens new connections per run) are in the count: compare runs with
# the same N and CONNS.
#
# TOOL=callgrind (default): SERVER runs under valgrind; prints user-space
# instructions per call, a split by part (the backend session's
# connection task, the client connection, crypto, HPACK, allocator...)
# and the TOP functions by their own and inclusive count (KEEP=1 keeps the
# callgrind output for callgrind_annotate).
# TOOL=strace: SERVER runs normally; `strace -c -f -p PID` is attached for
# the measured calls only; prints system calls per call by kind, and the
# context switches of SERVER per call (/proc/PID/status).
#
# Usage: bench/grpc-instructions.sh   (env: TOOL=callgrind|strace
#          SERVER=tern|haproxy N=20000 WARM=2000 CONNS=10 CONC=50 TOP=30
#          TERN=target/release/tern GHZ=~/go/bin/ghz
#          INTEROP_SERVER=~/go/grpc-interop/bin/server)
# e.g.   bench/grpc-instructions.sh
#        SERVER=haproxy bench/grpc-instructions.sh
#        TOOL=strace N=50000 bench/grpc-instructions.sh
# Needs: valgrind (callgrind) or strace, ghz (go install
# github.com/bojand/ghz/cmd/ghz@v0.93.0), grpc-go's interop server (.ci/run
# installs it), openssl, python3; haproxy for SERVER=haproxy. Only
# 127.0.0.1 is ever a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

TOOL="${TOOL:-callgrind}"
SERVER="${SERVER:-tern}"
N="${N:-20000}"
WARM="${WARM:-2000}"
CONNS="${CONNS:-10}"
CONC="${CONC:-50}"
TOP="${TOP:-30}"
TERN="${TERN:-$root/target/release/tern}"
GHZ="${GHZ:-$(command -v ghz || echo "$HOME/go/bin/ghz")}"
INTEROP_SERVER="${INTEROP_SERVER:-$HOME/go/grpc-interop/bin/server}"
case "$TOOL" in
    callgrind) for tool in valgrind callgrind_control callgrind_annotate; do need "$tool"; done ;;
    strace) need strace ;;
    *) die "TOOL must be callgrind or strace" ;;
esac
case "$SERVER" in
    tern | haproxy) ;;
    *) die "SERVER must be tern or haproxy (nginx forks its worker: not counted here)" ;;
esac
for tool in openssl python3; do need "$tool"; done
[[ -x "$GHZ" ]] || die "ghz not found (go install github.com/bojand/ghz/cmd/ghz@v0.93.0)"
[[ -x "$INTEROP_SERVER" ]] || die "no grpc-go interop server at $INTEROP_SERVER (go install google.golang.org/grpc/interop/server@v1.85.0)"

bench_workdir tern-grpc-instructions
make_cert ecdsa
backend_port="$(free_port)"
"$INTEROP_SERVER" -port="$backend_port" > "$work/interop.log" 2>&1 &
pids+=("$!")
wait_port "$backend_port" || die "the interop server did not start"

port="$(free_port)"
grpc_server_cmd "$SERVER" "$port" "$backend_port" || die "$SERVER: no command"
if [[ "$TOOL" == callgrind ]]; then
    valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out.%p" \
        "${GRPC_CMD[@]}" 2> "$work/server.log" &
else
    "${GRPC_CMD[@]}" 2> "$work/server.log" &
fi
server_pid=$!
pids+=("$server_pid")
wait_port_slow "$port" "$work/server.log" "$SERVER"

payload="$(head -c 100 /dev/zero | tr '\0' 'x' | base64 -w0)"
# Go offers X25519MLKEM768 first since 1.24; plain X25519 like the server.
export GODEBUG=tlsmlkem=0
# calls COUNT: COUNT UnaryCalls; dies unless every one succeeded.
calls() {
    local out ok
    out="$("$GHZ" --skipTLS --proto "$here/grpc/test.proto" --call grpc.testing.TestService.UnaryCall \
        -d "{\"response_size\": 100, \"payload\": {\"body\": \"$payload\"}}" \
        -n "$1" --connections "$CONNS" -c "$CONC" -O json "127.0.0.1:$port")"
    ok="$(python3 -c 'import json,sys; print(json.load(sys.stdin).get("statusCodeDistribution", {}).get("OK", 0))' <<< "$out")"
    [[ "$ok" == "$1" ]] || die "$SERVER: $ok of $1 UnaryCalls succeeded: $(head -c 2000 <<< "$out")"
}
# ctx_switches PID: voluntary + involuntary context switches of PID's threads.
ctx_switches() {
    cat /proc/"$1"/task/*/status 2> /dev/null \
        | awk '/^(non)?voluntary_ctxt_switches:/ {n += $2} END {print n + 0}'
}

calls "$WARM"
echo "SERVER=$SERVER TOOL=$TOOL N=$N CONNS=$CONNS CONC=$CONC (ghz UnaryCall, 100 B each way, h2c backend; $CONNS handshakes in the count)"
if [[ "$TOOL" == strace ]]; then
    strace -c -f -p "$server_pid" -o "$work/strace.txt" &
    strace_pid=$!
    # Attached once the server has a tracer.
    for _ in $(seq 1 200); do
        [[ "$(awk '/^TracerPid:/ {print $2}' "/proc/$server_pid/status")" != 0 ]] && break
        sleep 0.05
    done
    switches_before="$(ctx_switches "$server_pid")"
    calls "$N"
    switches_after="$(ctx_switches "$server_pid")"
    kill -INT "$strace_pid"
    wait "$strace_pid" 2> /dev/null || true
    python3 - "$work/strace.txt" "$N" "$((switches_after - switches_before))" <<'PY'
import sys
path, n, switches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = []
for line in open(path):
    f = line.split()
    # % time, seconds, usecs/call, calls, [errors], syscall
    if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
        rows.append((int(f[3]), f[-1]))
total = sum(c for c, _ in rows)
print(f"system calls per call: {total / n:.2f} ({total} for {n} calls); "
      f"context switches per call (without strace's own): {switches / n:.2f}")
for calls, name in sorted(rows, reverse=True):
    print(f"  {name:<16} {calls / n:6.2f}")
PY
    exit 0
fi

callgrind_control -z "$server_pid" > /dev/null
calls "$N"
callgrind_control -d "$server_pid" > /dev/null
dump="$(ls -t "$work"/callgrind.out.* | head -1)"
total="$(awk '/^summary:/ {print $2} /^totals:/ {t = $2} END {if (t) print t}' "$dump" | head -1)"
echo "instructions per call: $(python3 -c "print(f'{$total / $N:.0f}')") ($total for $N calls)"
echo
# Parts by each function's own instructions (a function in one part only:
# the first pattern it matches), then the tasks by inclusive count.
callgrind_annotate --auto=no --threshold=100 "$dump" 2> /dev/null | sed -n '/file:function/,$p' | sed 1d \
    | python3 "$here/callgrind_parts.py" "$N"
echo
echo "Top functions by their own instructions (callgrind_annotate):"
callgrind_annotate --auto=no "$dump" 2> /dev/null | sed -n '/file:function/,$p' | sed -n "2,$((TOP + 1))p"
echo
echo "Top functions by inclusive instructions:"
callgrind_annotate --auto=no --inclusive=yes "$dump" 2> /dev/null | sed -n '/file:function/,$p' | sed -n "2,$((TOP + 1))p"
[[ -z "${KEEP:-}" ]] || echo "callgrind output: $dump"
