#!/usr/bin/env bash
# Compare TLS terminators (tern, nginx, haproxy, hitch) in front of one HTTP
# backend (nginx serving a 100-byte file).
#
# Every terminator: ONE worker pinned to CPU 0, the same certificate, TLS 1.3
# only with TLS_AES_128_GCM_SHA256 and X25519 only, access logs off,
# X-Forwarded-For and X-Forwarded-Proto added (hitch is an L4 terminator: TLS
# off-load and bytes to the backend, no HTTP work and no pooling, so one
# backend connection per client connection). Load generators on CPU 1.
# Layouts (BACKEND_CPU):
#   load    (default) the backend shares CPU 1 with the load generator
#   server  strict: the backend runs on CPU 0 with the server, so the server's
#           CPU pays for the backend's work too, for every server alike
# Workloads:
#   handshake  full TLS handshake + 1 request per connection (hey -disable-keepalive;
#              hey never resumes sessions)
#   keepalive  100-byte responses over kept-alive connections (wrk -c50),
#              measured over a window of DURATION s inside wrk's run once its
#              connections are up, so its handshakes are not in it (their cost
#              differs between servers far more than a request's; bench/counters.sh
#              "A load tool's run"); requests are the backend's over the window
# For each: requests/s and server CPU µs per request (utime+stime of all the
# server's processes from /proc, after minus before, divided by requests),
# median of RUNS interleaved rounds (tern, nginx, haproxy, hitch, tern, ...),
# with ratios of tern against each peer and against the best peer. Beside
# each round's CPU, what moved with it (context switches, queueing, what
# else ran on the server's CPU) and a canary per CPU, as bench/h2.sh.
#
# Usage: bench/terminators.sh   (env: DURATION=10 RUNS=3 CONNS=50 KEY=ecdsa|rsa
#          WORKLOADS="handshake keepalive"
#          TERN=target/release/tern SERVERS="tern nginx haproxy hitch" BACKEND_CPU=load|server)
# Needs: nginx (nginx-light), haproxy, hitch, wrk, hey (go install
#        github.com/rakyll/hey@latest), openssl, curl, python3, taskset, ss (iproute2).
# Only 127.0.0.1 is ever a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

DURATION="${DURATION:-10}"
RUNS="${RUNS:-3}"
CONNS="${CONNS:-50}"
# WORKLOADS="keepalive": that one only, so each server's rounds follow one
# another closely (a pair of rounds DURATION s apart, not 2 x DURATION).
WORKLOADS="${WORKLOADS:-handshake keepalive}"
for w in $WORKLOADS; do
    [[ "$w" == handshake || "$w" == keepalive ]] || die "WORKLOADS: '$w' is neither handshake nor keepalive"
done
TERN="${TERN:-$root/target/release/tern}"
SERVERS="${SERVERS:-tern nginx haproxy hitch}"
KEY="${KEY:-ecdsa}"
BACKEND_CPU="${BACKEND_CPU:-load}"
HEY="${HEY:-$(command -v hey || echo "$HOME/go/bin/hey")}"
SERVER_CPU=0
LOAD_CPU=1
case "$BACKEND_CPU" in
    load) backend_cpu=$LOAD_CPU ;;
    server) backend_cpu=$SERVER_CPU ;;
    *) die "BACKEND_CPU must be load (backend on CPU $LOAD_CPU) or server (on CPU $SERVER_CPU)" ;;
esac
# Server knobs (see lib.sh): idle backend connections kept by nginx (tern
# runs with its defaults: its pool follows demand).
SRV_POOL=256
SRV_ALPN=http/1.1

for tool in wrk openssl curl python3 taskset nginx ss; do
    need "$tool"
done
[[ " $WORKLOADS " != *" handshake "* || -x "$HEY" ]] ||
    die "hey not found (go install github.com/rakyll/hey@latest), needed for the handshake workload"

bench_workdir tern-bench

make_cert "$KEY"
case "$KEY" in
    rsa) key_name="RSA-2048" ;;
    *) key_name="ECDSA P-256" ;;
esac

# --- backend: nginx serving a 100-byte file -------------------------------------
mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/index.html"
backend_port="$(free_port)"
start_backend "$backend_port" "$backend_cpu"
backend_pid=$STARTED_PID

# --- terminators -------------------------------------------------------------------
# shellcheck disable=SC2086 # SERVERS is a list of words
start_servers "$backend_port" $SERVERS

# The 100-byte body must come back through every terminator.
for server in "${active[@]}"; do
    body="$(curl -sS -k "https://127.0.0.1:${server_port[$server]}/")"
    [[ ${#body} -eq 100 ]] || die "$server did not proxy the 100-byte body (got ${#body} bytes)"
done

# --- what each server negotiates -------------------------------------------------------
negotiation_report="$work/negotiation.md"
check_negotiation "" "${active[@]}" > "$negotiation_report" || true
cat "$negotiation_report" >&2

# --- crypto floor of a full handshake on the server CPU: one signature + one X25519
floor_us="$(crypto_floor_us "$SERVER_CPU" "$KEY")"

# wrk_errors OUTPUT: socket errors plus non-2xx responses, as one number.
wrk_errors() {
    printf '%s\n' "$1" | awk '
        /Socket errors/ { gsub(/,/, ""); s += $4 + $6 + $8 + $10 }
        /Non-2xx/ { s += $NF }
        END { print s + 0 }'
}

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
results="$work/results.tsv"
: > "$results"
# Go offers X25519MLKEM768 first since 1.24; plain X25519 like the others (the
# servers accept nothing else anyway).
export GODEBUG=tlsmlkem=0
for run in $(seq 1 "$RUNS"); do
    for server in "${active[@]}"; do
        port="${server_port[$server]}"
        pid="${server_pid[$server]}"

        if [[ " $WORKLOADS " == *" handshake "* ]]; then
            round_begin "$pid" "$backend_pid"
            before="$(cpu_ticks "$pid")"
            backend_before="$(cpu_ticks "$backend_pid")"
            # -host: hey otherwise sends SNI "127.0.0.1:PORT" (not a DNS name); every
            # server gets the same valid name.
            out="$(taskset -c "$LOAD_CPU" "$HEY" -z "${DURATION}s" -c "$CONNS" -disable-keepalive \
                -host localhost "https://127.0.0.1:$port/")"
            after="$(cpu_ticks "$pid")"
            backend_ticks=$(($(cpu_ticks "$backend_pid") - backend_before))
            round_end "$pid" "$backend_pid"
            requests="$(printf '%s\n' "$out" | hey_ok)"
            errors="$(printf '%s\n' "$out" | hey_errors)"
            rate="$(printf '%s\n' "$out" | hey_rate)"
            record "$results" handshake "$server" "$run" "${requests:-0}" "$rate" "$before" "$after" "$errors" "$backend_ticks" "$ROUND_FIELDS"
        fi

        [[ " $WORKLOADS " == *" keepalive "* ]] || continue
        # A window of DURATION s inside a longer wrk run, once its CONNS
        # connections are up: no handshake in it (bench/counters.sh, "A load
        # tool's run"); requests are the backend's over the window.
        # "Connection: keep-alive" with the space: wrk ignores a header without one.
        load_start "$work/wrk.out" taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"$((DURATION + LOAD_MARGIN_S))s" \
            -H "Connection: keep-alive" "https://127.0.0.1:$port/"
        load_wait_settled "$port" "$CONNS"
        round_begin "$pid" "$backend_pid"
        before="$(cpu_ticks "$pid")"
        backend_before="$(cpu_ticks "$backend_pid")"
        window_begin "$backend_port"
        sleep "$DURATION"
        after="$(cpu_ticks "$pid")"
        backend_ticks=$(($(cpu_ticks "$backend_pid") - backend_before))
        window_end "$backend_port"
        round_end "$pid" "$backend_pid"
        load_finish || die "wrk failed against $server: $(cat "$work/wrk.out")"
        out="$(cat "$work/wrk.out")"
        record "$results" keepalive "$server" "$run" "$WINDOW_REQUESTS" "$WINDOW_RATE" "$before" "$after" "$(wrk_errors "$out")" "$backend_ticks" "$ROUND_FIELDS"
    done
done

# --- report ----------------------------------------------------------------------
{
    echo "## TLS terminators, one worker on CPU $SERVER_CPU, load on CPU $LOAD_CPU, backend on CPU $backend_cpu (BACKEND_CPU=$BACKEND_CPU)"
    echo
    echo "Negotiated (\`openssl s_client\`; hey and wrk get the same: every server accepts only $EXPECTED_TLS):"
    echo
    cat "$negotiation_report"
    echo
    python3 "$here/table.py" "$results" "$(getconf CLK_TCK)" "$floor_us"
    echo
    echo "Conditions:"
    echo
    echo "- CPU: $(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}'), $(nproc) cores;" \
        "flags: $(grep -o -w -E 'aes|vaes|avx2|avx512f|sha_ni|pclmulqdq' /proc/cpuinfo | sort -u | tr '\n' ' ')"
    echo "- crypto floor of a handshake on CPU $SERVER_CPU: ${floor_us} µs ($key_name sign + X25519, \`openssl speed\`)"
    echo "- kernel: $(uname -r); load average before the runs: $load_before"
    for server in "${active[@]}"; do
        echo "- $server: $(server_version "$server")"
    done
    echo "- tree at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'); $(openssl version); wrk $(wrk --version 2>&1 | awk 'NR==1 {print $2}'); hey (GODEBUG=tlsmlkem=0)"
    echo "- runs: $RUNS interleaved, ${DURATION}s each, $CONNS connections; certificate $key_name (self-signed)"
    echo "- handshake: GODEBUG=tlsmlkem=0 taskset -c $LOAD_CPU hey -z ${DURATION}s -c $CONNS -disable-keepalive -host localhost https://127.0.0.1:PORT/"
    echo "- keepalive: taskset -c $LOAD_CPU wrk -t1 -c$CONNS -d$((DURATION + LOAD_MARGIN_S))s -H \"Connection: keep-alive\" https://127.0.0.1:PORT/, measured over a ${DURATION}-s window inside it opened ${LOAD_SETTLE_S} s after its $CONNS connections were up (no handshake in it); requests are the backend's over the window (nginx stub_status)"
    echo "- every server: taskset -c $SERVER_CPU, one worker, TLSv1.3 only, $TLS_SUITE only, $TLS_GROUP only, access log off; configs in bench/lib.sh (start_server)"
    echo "- tern: --workers 1 --tls-versions TLSv1.3 --ciphers $TLS_SUITE --groups $TLS_GROUP --alpn http/1.1 --forwarded x-forwarded-for,x-forwarded-proto --access-log off (backend pool: its default)"
    echo "- nginx: worker_processes 1, upstream keepalive $SRV_POOL; haproxy: nbthread 1, http-reuse always; hitch: workers 1 (no pooling: one backend connection per client connection)"
    echo "- backend: nginx serving a 100-byte file on 127.0.0.1:$backend_port, one worker pinned to CPU $backend_cpu"
}
