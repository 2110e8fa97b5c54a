#!/usr/bin/env bash
# Where the CPU of a new connection goes, QUIC against TCP+TLS, on a real
# run (issue 26: a new QUIC connection at <= 1.3x a new TCP+TLS one).
# callgrind (bench/instructions.sh) counts instructions but runs aws-lc
# without SHA-NI/ADX and says nothing of cache misses; this samples the
# real thing with `perf record -e cpu-clock` (no PMU needed).
#
# For MODE h3 (a new QUIC connection + one 100 B HTTP/3 request) and h1 (a
# new TCP+TLS connection + one 100 B HTTP/1.1 request): tern serve (one
# worker on CPU 0, access log off, TLS 1.3 AES-128-GCM X25519, its other
# defaults) in front of nginx serving 100 bytes; `tern bench --plan new
# -n N -c C` (BENCH_TERN) on CPU 1 after WARM unmeasured connections;
# perf samples tern's process over the measured load. Prints, per mode,
# the samples (at FREQ Hz) per connection, split into kernel, malloc
# (glibc malloc/free and their helpers), memcpy/memset, crypto (aws-lc),
# rustls, quinn, h3, tokio and the rest, then the TOP symbols.
#
# PLAN=keepalive profiles N requests over C kept-alive connections instead
# (the same split for the keepalive HTTP/1.1 and HTTP/3 100 B loads; N and
# the figures are then per request, not per connection). PLAN=resumed: each
# connection resumes a TLS session (tern bench --plan resumed), figures per
# connection, to compare two builds' resumed handshakes.
#
# RATE=R runs the loads open loop at R connections (or requests) a second
# (`tern bench --rate`; C then caps what is in flight, e.g. C=64): at low
# rates the worker parks between connections and each one's work runs
# alone, which moves QUIC's figure more than TCP+TLS's (BENCHMARKS.md,
# "A new QUIC connection at 1,000/s"). Every run also prints tern's parks
# (voluntary context switches of its threads, from /proc: the worker's
# nearly all) per connection.
#
# CALLERS=1 records DWARF call graphs too (perf record --call-graph
# dwarf: larger files, so use a lower FREQ, e.g. 1999) and adds, per mode,
# the kernel's samples by system call and malloc's by the code that called
# it (bench/perf_callers.py).
#
# Samples are CPU time: read them on an idle machine, or only as shares
# on a busy one.
#
# Usage: bench/new-conn-profile.sh   (env: N=4000 WARM=200 C=10 FREQ=4999
#          TOP=25 MODES="h3 h1" PLAN=new|keepalive|resumed RATE= CALLERS=
#          TERN=target/release/tern BENCH_TERN=...)
# Needs: perf, nginx, openssl, python3, taskset. Only 127.0.0.1 is a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

N="${N:-4000}"
WARM="${WARM:-200}"
C="${C:-10}"
FREQ="${FREQ:-4999}"
TOP="${TOP:-25}"
MODES="${MODES:-h3 h1}"
PLAN="${PLAN:-new}"
[[ "$PLAN" == new || "$PLAN" == keepalive || "$PLAN" == resumed ]] || die "PLAN: new, keepalive or resumed, not $PLAN"
TERN="${TERN:-$root/target/release/tern}"
BENCH_TERN="${BENCH_TERN:-$TERN}"
for tool in perf nginx openssl python3 taskset; do need "$tool"; done
[[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"
TLS_SUITE=TLS_AES_128_GCM_SHA256
TLS_GROUP=X25519

bench_workdir tern-new-conn-profile
make_cert ecdsa
mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/index.html"
backend_port="$(free_port)"
start_backend "$backend_port" 0

# load MODE PORT COUNT: COUNT requests (with PLAN=new, each on a new
# connection); fails unless every one succeeded.
load() {
    local -a flags=()
    [[ "$1" == h3 ]] && flags=(--h3)
    [[ -z "${RATE:-}" ]] || flags+=(--rate "$RATE")
    taskset -c 1 "$BENCH_TERN" bench "${flags[@]}" --plan "$PLAN" -n "$3" -c "$C" -k \
        --ciphers "$TLS_SUITE" --groups "$TLS_GROUP" --no-progress -o json \
        "https://127.0.0.1:$2/" > "$work/load.json" 2> "$work/load.err"
    python3 - "$work/load.json" "$3" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["targets"][0]["summary"]
if s["completed"] != int(sys.argv[2]) or s["failed"]:
    sys.exit(f"load: {s['completed']} completed, {s['failed']} failed")
PY
}

for mode in $MODES; do
    port="$(free_port)"
    SRV_ALPN=http/1.1
    SRV_H3=
    [[ "$mode" == h3 ]] && SRV_H3=1
    [[ "$mode" == h3 || "$mode" == h1 ]] || die "MODES: h3 or h1, not $mode"
    tern_serve_args "$port" "$backend_port"
    taskset -c 0 "$TERN" "${TERN_SERVE_ARGS[@]}" 2> "$work/tern-$mode.log" &
    tern_pid=$!
    pids+=("$tern_pid")
    wait_port_slow "$port" "$work/tern-$mode.log" "tern"
    load "$mode" "$port" "$WARM" || die "$mode warm-up failed: $(cat "$work/load.err")"
    graph=()
    [[ -z "${CALLERS:-}" ]] || graph=(--call-graph dwarf,16384)
    perf record -q "${graph[@]}" -e cpu-clock -F "$FREQ" -o "$work/perf-$mode.data" -p "$tern_pid" 2> "$work/perf-$mode.err" &
    perf_pid=$!
    # perf writes its file's header once it is attached.
    for _ in $(seq 1 100); do [[ -s "$work/perf-$mode.data" ]] && break; sleep 0.05; done
    cpu0="$(awk '{print $14 + $15}' "/proc/$tern_pid/stat")"
    read -r parks0 _ < <(switches "$tern_pid")
    load "$mode" "$port" "$N" || die "$mode load failed: $(cat "$work/load.err")"
    cpu1="$(awk '{print $14 + $15}' "/proc/$tern_pid/stat")"
    read -r parks1 _ < <(switches "$tern_pid")
    kill -INT "$perf_pid"
    wait "$perf_pid" || true
    kill "$tern_pid"
    wait "$tern_pid" 2> /dev/null || true
    unit=connection
    if [[ "$PLAN" == new ]]; then
        echo "== $mode: a new connection + one 100 B request, $N connections, perf cpu-clock at $FREQ Hz"
    elif [[ "$PLAN" == resumed ]]; then
        echo "== $mode: a resumed connection + one 100 B request, $N connections, perf cpu-clock at $FREQ Hz"
    else
        unit=request
        echo "== $mode: 100 B requests over $C kept-alive connections, $N requests (figures per request), perf cpu-clock at $FREQ Hz"
    fi
    # The same run's CPU from /proc (every thread, perf's overhead in it): a
    # check on perf's total that does not depend on sampling.
    awk -v t="$((cpu1 - cpu0))" -v hz="$(getconf CLK_TCK)" -v n="$N" -v u="$unit" \
        'BEGIN { printf "  /proc: %.1f us of tern CPU per %s\n", t * 1e6 / hz / n, u }'
    awk -v p="$((parks1 - parks0))" -v n="$N" -v u="$unit" -v r="${RATE:-}" \
        'BEGIN { printf "  parks: %.2f per %s (%s)\n", p / n, u, r == "" ? "closed loop" : "open loop at " r "/s" }'
    perf report -i "$work/perf-$mode.data" --no-children --sort dso,sym -n --stdio -g none 2> /dev/null \
        | python3 "$here/perf_parts.py" "$N" "$FREQ" "$TOP" "$unit"
    if [[ -n "${CALLERS:-}" ]]; then
        perf script -i "$work/perf-$mode.data" -F ip,sym,dso --no-inline 2> /dev/null \
            | python3 "$here/perf_callers.py" "$N" "$FREQ" "$TOP" "$unit"
    fi
done
