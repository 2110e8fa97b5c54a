#!/usr/bin/env bash
# Instructions tern executes per request, counted by valgrind's callgrind:
# exact and independent of machine load, for A/B work on a shared machine
# (and on VMs without a PMU, where `perf stat -e instructions` says "not
# supported"). Not a speed figure: under valgrind every thread runs
# serialized and slowly; read the count, and the functions that make it.
#
# tern serve (one worker, access log off, TLS 1.3 AES-128-GCM X25519, its
# other defaults, plus ARGS) runs under callgrind in front of nginx serving
# 100 bytes. A warm-up load (WARM requests) fills pools and caches; the
# counters are zeroed; the measured load (N requests) runs; the counters are
# dumped. Both loads are h2load on the same C connections (-c C, -m M
# streams each, --h1 for MODE=h1), so the handshakes of the measured load
# (C of them) are in the count: compare runs with the same N and C.
#
# MODE=h3 (tern serve --http3) and any PLAN other than keepalive load with
# `tern bench` instead (h2load has no HTTP/3 here): `--h3|--h2|(h1) --plan
# PLAN -n N -c C --streams M`, the client binary BENCH_TERN (default TERN).
# PLAN=new is a full handshake per request (TCP+TLS for h1/h2, QUIC for h3),
# PLAN=resumed a resumed one: compare MODE=h3 PLAN=new with MODE=h1 PLAN=new
# for what a new QUIC connection costs next to a new TCP+TLS one.
#
# Usage: bench/instructions.sh [ARGS...]   (env: MODE=h2|h1|h3 N=20000 WARM=2000
#          C=50 M=10 PLAN=keepalive TOP=30 TOML= REFUSED= TERN=target/release/tern
#          BENCH_TERN=... SERVER=tern ATOMICS=)
# e.g.   bench/instructions.sh --request-id-header off
#        MODE=h3 C=20 M=1 bench/instructions.sh
#        MODE=h3 PLAN=new C=20 M=1 N=2000 WARM=400 bench/instructions.sh
# TIMEOUT=SECONDS: tern bench's per-request timeout (its -t; default 20):
# on a loaded host the warm-up's first requests, behind their handshakes
# under valgrind, can take longer, and a warm-up with a failure stops the
# run.
# BODY_BYTES=N: nginx serves N bytes instead of 100 (the large-body
# check: BODY_BYTES=1048576 MODE=h1 N=200 WARM=40 C=8 M=1).
# WARM_FAILS_OK=1: a warm-up with failed requests goes on to the measured
# load (whose requests must all succeed) instead of stopping the run.
# TOML=FILE: tern reads the same settings from a config file instead
# (bench/lib.sh's tern_config_file) with FILE's lines appended to its
# listener, for rules that exist only in TOML (header rules); ARGS may then
# hold top-level flags only. Rules on vs off, the edge policy's cost:
#        TOML=bench/edge-rules.toml bench/instructions.sh
#        bench/instructions.sh --request-id-header off
# REFUSED=1: every request is expected to be answered but not served (a
# 4xx, e.g. 429 under a client_rate the load exceeds): what a refused
# request costs, e.g.
#        REFUSED=1 TOML=FILE bench/instructions.sh   (FILE: client_rate = "1/h",
#        client_burst = 0, client_rate_close_after = 0)
# SERVER=hitch (MODE=h1 keepalive only): hitch 1.7 (one worker, the same
# TLS parameters, bench/lib.sh's hitch_conf) instead of tern, for what an
# L4 terminator's user space does per request. hitch's worker is a forked
# child that callgrind_control cannot reach (valgrind 3.19 gives forked
# children no vgdb channel), so two runs are counted, WARM+N and WARM+N+N
# requests, and the first is subtracted from the second.
# SERVER=haproxy (PLAN=keepalive, MODE=h2 or h1): Debian's haproxy (one
# thread, bench/lib.sh's haproxy_conf, as bench/h2.sh runs it) under the
# same h2load load, for what a peer's user space does per request: instructions,
# and with VALGRIND_OPTS=--cache-sim=yes or --branch-sim=yes its simulated
# misses, beside tern's. (Its TLS is OpenSSL's; each figure includes its C
# handshakes, as tern's does.)
# ATOMICS=1 (tern, haproxy): also counts the atomic read-modify-write
# instructions executed per request (lock-prefixed, xchg with memory,
# mfence: each costs tens of cycles where a plain one costs one), by
# object and by function (bench/callgrind_atomics.py; callgrind records
# every instruction's count).
# Prints instructions per request, the TOP functions by their own
# instructions per request (bench/callgrind_own.py) and the TOP by
# inclusive count, and the count split by layer (bench/callgrind_layers.py:
# TLS read and write, AES-GCM, heads, tokio, tern's futures...; KEEP=1
# keeps the callgrind output for callgrind_annotate).
# Needs: valgrind, nginx, h2load, openssl, python3. Only 127.0.0.1 is a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

MODE="${MODE:-h2}"
N="${N:-20000}"
WARM="${WARM:-2000}"
C="${C:-50}"
M="${M:-10}"
TOP="${TOP:-30}"
PLAN="${PLAN:-keepalive}"
TERN="${TERN:-$root/target/release/tern}"
BENCH_TERN="${BENCH_TERN:-$TERN}"
SERVER="${SERVER:-tern}"
case "$SERVER" in
    tern) ;;
    hitch)
        need hitch
        [[ "$MODE" == h1 && "$PLAN" == keepalive && -z "${TOML:-}" && $# -eq 0 ]] ||
            die "SERVER=hitch: MODE=h1 PLAN=keepalive only, no ARGS or TOML"
        ;;
    haproxy)
        need haproxy
        [[ "$PLAN" == keepalive && "$MODE" != h3 && -z "${TOML:-}" && $# -eq 0 ]] ||
            die "SERVER=haproxy: PLAN=keepalive, MODE=h2 or h1, no ARGS or TOML"
        ;;
    *) die "SERVER must be tern, haproxy or hitch" ;;
esac
cg_opts=()
[[ -n "${ATOMICS:-}" ]] && cg_opts=(--dump-instr=yes)
for tool in valgrind callgrind_control callgrind_annotate nginx h2load openssl python3; do need "$tool"; done
[[ "$SERVER" != tern || -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"
case "$MODE" in
    h2) SRV_ALPN=h2; load_flags=(-m "$M"); bench_flags=(--h2 --streams "$M") ;;
    h1) SRV_ALPN=http/1.1; load_flags=(--h1); bench_flags=() ;;
    h3) SRV_ALPN=h2; SRV_H3=1; bench_flags=(--h3 --streams "$M") ;;
    *) die "MODE must be h2, h1 or h3" ;;
esac
case "$PLAN" in
    keepalive | new | resumed) ;;
    *) die "PLAN must be keepalive, new or resumed" ;;
esac
# The load tool: h2load, or tern bench where h2load cannot (HTTP/3, a
# connection per request).
loader=h2load
[[ "$MODE" == h3 || "$PLAN" != keepalive ]] && loader=tern
[[ "$loader" != tern || -x "$BENCH_TERN" ]] || die "no tern binary at $BENCH_TERN (BENCH_TERN)"

bench_workdir tern-instructions
make_cert ecdsa
mkdir -p "$work/www"
head -c "${BODY_BYTES:-100}" /dev/zero | tr '\0' 'x' > "$work/www/index.html"
backend_port="$(free_port)"
start_backend "$backend_port" 0
port="$(free_port)"
if [[ -n "${TOML:-}" ]]; then
    [[ -r "$TOML" ]] || die "TOML=$TOML: no such file"
    tern_config_file "$work/tern.toml" "$backend_port" "$(cat "$TOML")" "127.0.0.1:$port"
    TERN_SERVE_ARGS=(serve --config "$work/tern.toml")
else
    tern_serve_args "$port" "$backend_port"
fi
if [[ "$SERVER" == tern ]]; then
    valgrind --tool=callgrind "${cg_opts[@]}" --callgrind-out-file="$work/callgrind.out.%p" \
        "$TERN" "${TERN_SERVE_ARGS[@]}" "$@" 2> "$work/tern.log" &
    cg_pid=$!
    pids+=("$cg_pid")
    wait_port_slow "$port" "$work/tern.log" "tern"
fi
if [[ "$SERVER" == haproxy ]]; then
    # The configuration every script runs it with (bench/lib.sh), under
    # callgrind (-db: in the foreground, no fork, so callgrind_control
    # reaches it).
    srv_policy
    haproxy_conf "$work/haproxy.cfg" "$port" "$backend_port"
    valgrind --tool=callgrind "${cg_opts[@]}" --callgrind-out-file="$work/callgrind.out.%p" \
        haproxy -f "$work/haproxy.cfg" -db 2> "$work/haproxy.log" &
    cg_pid=$!
    pids+=("$cg_pid")
    wait_port_slow "$port" "$work/haproxy.log" "haproxy"
fi

# load COUNT: runs COUNT requests; prints "COUNT succeeded" when all did.
load() {
    if [[ "$loader" == h2load ]]; then
        h2load -n "$1" -c "$C" "${load_flags[@]}" "https://127.0.0.1:$port/" 2>&1
        return
    fi
    "$BENCH_TERN" bench "${bench_flags[@]}" ${TIMEOUT:+-t "$TIMEOUT"} --plan "$PLAN" -n "$1" -c "$C" -k \
        --ciphers "$TLS_SUITE" --groups "$TLS_GROUP" --no-progress -o json \
        "https://127.0.0.1:$port/" > "$work/load.json" 2> "$work/load.err" || true
    python3 - "$work/load.json" <<'PY'
import json, sys
try:
    s = json.load(open(sys.argv[1]))["targets"][0]["summary"]
except (OSError, ValueError, KeyError, IndexError) as e:
    print(f"no report: {e}")
    sys.exit()
print(f"{s['completed']} completed, {s['failed']} failed")
if s["failed"] == 0:
    print(f"{s['completed']} succeeded")
PY
}
# h2load counts a 4xx as failed: refused loads are checked as done.
answered=succeeded
[[ -n "${REFUSED:-}" ]] && answered=done

# hitch_run NAME COUNT...: hitch under callgrind, WARM requests then a load
# of each COUNT, stopped; prints its worker's callgrind output file. The
# worker is forked (callgrind follows it) and valgrind 3.19 offers a
# forked child no vgdb channel, so callgrind_control cannot zero it: the
# caller subtracts one run from another.
hitch_run() {
    local dir="$work/cg-$1" hport count out
    shift
    # The worker drops to nobody and writes its own output file.
    mkdir -m 777 "$dir"
    hport="$(free_port)"
    hitch_conf "$dir/hitch.conf" "$hport" "$backend_port"
    valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out.%p" \
        hitch --config="$dir/hitch.conf" 2> "$dir/log" > /dev/null &
    local master=$!
    pids+=("$master")
    wait_port_slow "$hport" "$dir/log" "hitch" >&2
    port="$hport"
    for count in "$WARM" "$@"; do
        out="$(load "$count")"
        printf '%s\n' "$out" | grep -q "$count $answered" || { printf '%s\n' "$out" >&2; die "hitch: load failed"; }
    done
    local children
    children="$(pgrep -P "$master" || true)"
    kill "$master"
    wait "$master" 2> /dev/null || true
    # Each child writes its file as it exits.
    for _ in $(seq 1 300); do
        local alive=""
        for child in $children; do [[ -d "/proc/$child" ]] && alive=1; done
        [[ -z "$alive" ]] && break
        sleep 0.1
    done
    # Its worker's file: the one that counted the most.
    for f in "$dir"/callgrind.out.*; do
        echo "$(awk '/^totals:/ {print $2}' "$f") $f"
    done | sort -n | tail -1 | awk '{print $2}'
}

if [[ "$SERVER" == hitch ]]; then
    chmod 755 "$work"
    once="$(hitch_run once "$N")"
    twice="$(hitch_run twice "$N" "$N")"
    total=$(($(awk '/^totals:/ {print $2}' "$twice") - $(awk '/^totals:/ {print $2}' "$once")))
    echo "SERVER=hitch MODE=$MODE PLAN=$PLAN N=$N C=$C load: $loader (a run of WARM+N+N requests minus one of WARM+N)"
    echo "instructions per request: $(python3 -c "print(f'{$total / $N:.0f}')") ($total for $N requests, $C handshakes included)"
    echo
    echo "Top functions by their own instructions, per request (the same difference):"
    callgrind_annotate --threshold=100 --auto=no "$once" 2> /dev/null > "$work/once.txt"
    callgrind_annotate --threshold=100 --auto=no "$twice" 2> /dev/null |
        python3 "$here/callgrind_own.py" "$N" "$TOP" "$work/once.txt"
    echo
    echo "Top functions by inclusive instructions (the same difference):"
    callgrind_annotate --inclusive=yes --threshold=100 --auto=no "$once" 2> /dev/null > "$work/once-incl.txt"
    callgrind_annotate --inclusive=yes --threshold=100 --auto=no "$twice" 2> /dev/null |
        INCLUSIVE=1 python3 "$here/callgrind_own.py" "$N" "$TOP" "$work/once-incl.txt"
    echo
    echo "By layer (bench/callgrind_layers.py, the same difference):"
    python3 "$here/callgrind_layers.py" "$twice" "$N" hitch "$once"
    [[ -z "${KEEP:-}" ]] || echo "callgrind output: $once $twice"
    exit 0
fi
out="$(load "$WARM")"
if ! printf '%s\n' "$out" | grep -q "$WARM $answered"; then
    printf '%s\n' "$out" >&2
    cat "$work/load.err" >&2 2> /dev/null
    # The counters are zeroed after the warm-up: its failures change
    # nothing counted, only what was warmed.
    [[ -n "${WARM_FAILS_OK:-}" ]] || die "warm-up failed"
    echo "warm-up: some requests failed (WARM_FAILS_OK)" >&2
fi
callgrind_control -z "$cg_pid" > /dev/null
out="$(load "$N")"
printf '%s\n' "$out" | grep -q "$N $answered" || { printf '%s\n' "$out" >&2; cat "$work/load.err" >&2 2> /dev/null; die "load failed"; }
if [[ -n "${REFUSED:-}" ]]; then
    served="$(printf '%s\n' "$out" | awk '/^status codes:/ {gsub(/,/, ""); print $3}')"
    [[ "$served" == 0 ]] || die "REFUSED=1 but $served requests were served"
fi
callgrind_control -d "$cg_pid" > /dev/null
# The dump lands next to the final one; pick the newest part file.
dump="$(ls -t "$work"/callgrind.out.* | head -1)"
total="$(awk '/^summary:/ {print $2} /^totals:/ {t = $2} END {if (t) print t}' "$dump" | head -1)"
handshakes="$C"
[[ "$PLAN" != keepalive ]] && handshakes="$N ($PLAN)"
echo "SERVER=$SERVER MODE=$MODE PLAN=$PLAN N=$N C=$C${M:+ M=$M} load: $loader args: ${*:-(none)}${TOML:+ config: tern_config_file + $TOML}"
echo "instructions per request: $(python3 -c "print(f'{$total / $N:.0f}')") ($total for $N requests, $handshakes handshakes included)"
echo
echo "Top functions by their own instructions, per request (callees excluded; inlined code summed):"
# A dump taken mid-run (callgrind_control -d) records each call still open
# on a thread's stack (the worker's block_on, begun before the counters
# were zeroed) as "calls=0" with the whole run as its cost, and
# callgrind_annotate 3.19 books that line as the caller's own cost: clone
# and block_on at 100%, everything else below its threshold. Those lines
# carry inclusive cost only; without them the own costs add up to the total.
awk '/^calls=0 / {skip = 1; next} skip {skip = 0; next} {print}' "$dump" > "$dump.own"
callgrind_annotate --threshold=100 --auto=no "$dump.own" 2> /dev/null | python3 "$here/callgrind_own.py" "$N" "$TOP"
echo
echo "Top functions by inclusive instructions:"
callgrind_annotate --inclusive=yes --auto=no "$dump" 2> /dev/null | sed -n '/file:function/,$p' | sed -n "3,$((TOP + 2))p"
if [[ -n "${ATOMICS:-}" ]]; then
    echo
    echo "Atomic read-modify-writes (bench/callgrind_atomics.py):"
    python3 "$here/callgrind_atomics.py" "$dump" "$N" "$TOP"
fi
if [[ "$SERVER" == tern ]]; then
    echo
    echo "By layer (bench/callgrind_layers.py; the $handshakes handshakes are one):"
    python3 "$here/callgrind_layers.py" "$dump" "$N"
fi
[[ -z "${KEEP:-}" ]] || echo "callgrind output: $dump"
