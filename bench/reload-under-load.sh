#!/usr/bin/env bash
# Reloads and graceful stops under load: tern, nginx and haproxy in one run.
#
# Reloads: a keepalive load (`tern bench -k`, C connections, over HTTP/1.1,
# then over HTTP/2 with M streams each) runs while the server is told to
# reload RELOADS times, RELOAD_GAP_S apart (tern and nginx: SIGHUP; haproxy
# in master-worker mode: SIGUSR2). Counted: failed requests.
#
# Graceful stop: INFLIGHT requests to /slow?s=SLOW_S (the origin answers
# after SLOW_S seconds) are sent, over HTTP/1.1 (one connection each) and
# over HTTP/2 (all on one connection); once the origin holds them all, the
# server gets its graceful stop signal (tern: SIGTERM; nginx: SIGQUIT;
# haproxy: SIGUSR1; each one's documented graceful stop). Counted: in-flight
# requests that did not get their 200. The server is started afresh for each
# protocol.
#
# The origin is bench/fault_origin.py (HTTP/1.1 keepalive, TCP_NODELAY), on
# CPU 0 with the server (one worker); the clients run on CPU 1. The figure,
# last: failed requests across the reloads and in-flight requests lost, per
# server.
#
# Usage: bench/reload-under-load.sh   (env: RELOADS=10 RELOAD_GAP_S=0.5 C=8 M=10
#          INFLIGHT=20 SLOW_S=2 TERN=target/release/tern SERVERS="tern nginx haproxy")
# Needs: nginx, haproxy (optional), curl, python3, taskset. Only 127.0.0.1 is
# ever a target; everything stops by itself and the scratch folder is removed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

RELOADS="${RELOADS:-10}"
RELOAD_GAP_S="${RELOAD_GAP_S:-0.5}"
C="${C:-8}"
M="${M:-10}"
INFLIGHT="${INFLIGHT:-20}"
SLOW_S="${SLOW_S:-2}"
TERN="${TERN:-$root/target/release/tern}"
SERVERS="${SERVERS:-tern nginx haproxy}"
SERVER_CPU=0
LOAD_CPU=1
for tool in curl python3 taskset timeout; do need "$tool"; done
[[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"

bench_workdir tern-reload-under-load
make_cert ecdsa
SRV_ALPN=h2
SRV_HAPROXY_MASTER=1
start_fault_origin
read -r -a wanted <<< "$SERVERS"
start_servers "$origin_port" "${wanted[@]}"

reload_signal() { case "$1" in haproxy) echo USR2 ;; *) echo HUP ;; esac; }
stop_signal() { case "$1" in nginx) echo QUIT ;; haproxy) echo USR1 ;; *) echo TERM ;; esac; }

# origin_waiting: /slow requests the origin holds now.
origin_waiting() {
    curl -s --max-time 2 "http://127.0.0.1:$origin_port/inflight" || echo 0
}

results="$work/results.tsv"
for server in "${active[@]}"; do
    for proto in h1 h2; do
        port="${server_port[$server]}"
        pid="${server_pid[$server]}"
        proto_args=()
        [[ $proto == h2 ]] && proto_args=(--h2 -m "$M")
        load_s="$(python3 -c "print(int($RELOADS * $RELOAD_GAP_S + 3))")"
        taskset -c "$LOAD_CPU" "$TERN" bench "${proto_args[@]}" -z "${load_s}s" -c "$C" -k -o json \
            "https://127.0.0.1:$port/ok" > "$work/load.json" 2> /dev/null &
        load_pid=$!
        sleep 1
        for _ in $(seq 1 "$RELOADS"); do
            kill -s "$(reload_signal "$server")" "$pid"
            sleep "$RELOAD_GAP_S"
        done
        wait "$load_pid" || true
        read -r failed total < <(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["targets"][0]["summary"]; print(s["failed"], s["completed"] + s["failed"])' "$work/load.json")
        echo "$server $proto: $RELOADS reloads under load, $failed of $total requests failed" >&2

        # Graceful stop with INFLIGHT requests at the origin.
        if [[ $proto == h1 ]]; then
            for i in $(seq 1 "$INFLIGHT"); do
                taskset -c "$LOAD_CPU" curl -sk --http1.1 -o /dev/null -w '%{http_code}\n' --max-time 60 \
                    "https://127.0.0.1:$port/slow?s=$SLOW_S" > "$work/inflight.$i" 2> /dev/null &
            done
        else
            urls=()
            for i in $(seq 1 "$INFLIGHT"); do urls+=(-o /dev/null "https://127.0.0.1:$port/slow?s=$SLOW_S&i=$i"); done
            taskset -c "$LOAD_CPU" curl -sk --http2 --parallel --parallel-max "$INFLIGHT" --max-time 60 \
                -w '%{http_code}\n' "${urls[@]}" > "$work/inflight.h2" 2> /dev/null &
        fi
        for _ in $(seq 1 100); do
            (($(origin_waiting) >= INFLIGHT)) && break
            sleep 0.05
        done
        at_origin="$(origin_waiting)"
        kill -s "$(stop_signal "$server")" "$pid"
        stop_at="$(date +%s.%N)"
        wait_stopped=no
        for _ in $(seq 1 600); do
            if ! kill -0 "$pid" 2> /dev/null || [[ "$(ps -o stat= -p "$pid" 2> /dev/null)" == Z* ]]; then
                wait_stopped=yes
                break
            fi
            sleep 0.05
        done
        stop_s="$(python3 -c "import time; print(f'{time.time() - $stop_at:.1f}')")"
        # Every curl is done once the server is gone (or its own timeout).
        while pgrep -f "127.0.0.1:$port/slow" > /dev/null; do sleep 0.05; done
        ok="$(cat "$work"/inflight.* | grep -c '^200$' || true)"
        rm -f "$work"/inflight.*
        lost=$((INFLIGHT - ok))
        echo "$server $proto: graceful stop with $at_origin requests at the origin: $ok of $INFLIGHT got 200, stopped after ${stop_s}s ($wait_stopped)" >&2
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$server" "$proto" "$failed" "$total" "$at_origin" "$lost" "$stop_s" "$wait_stopped" >> "$results"
        # A fresh server for what follows.
        server_port[$server]="$(free_port)"
        start_server "$server" "${server_port[$server]}" "$origin_port" || die "$server did not start again"
        server_pid[$server]=$STARTED_PID
    done
done

echo
echo "reloads and graceful stops under load: $RELOADS reloads ${RELOAD_GAP_S}s apart during tern bench -k -c $C (h2: -m $M); $INFLIGHT in-flight requests of ${SLOW_S}s at the graceful stop; TLS 1.3 $TLS_SUITE $TLS_GROUP; one worker on CPU $SERVER_CPU with the origin, clients on CPU $LOAD_CPU; $(nproc) CPUs, $(uname -r)"
echo "reload: tern and nginx SIGHUP, haproxy -W SIGUSR2; graceful stop: tern SIGTERM, nginx SIGQUIT, haproxy SIGUSR1"
for server in "${active[@]}"; do echo "  $server: $(server_version "$server")"; done
echo "| server | protocol | failed across the reloads | in-flight at the stop | in-flight lost | stopped after (s) |"
echo "|---|---|---|---|---|---|"
awk -F'\t' '{printf "| %s | %s | %s of %s | %s | %s | %s%s |\n", $1, $2, $3, $4, $5, $6, $7, ($8 == "yes" ? "" : " (still running)")}' "$results"
awk -F'\t' '{f[$1] += $3; l[$1] += $6; if (!($1 in f0)) { f0[$1] = 1; order[++n] = $1 } }
    END { printf "reloads and graceful stops, failed requests / in-flight lost (h1+h2): "; for (i = 1; i <= n; i++) printf "%s%s %d / %d", (i > 1 ? ", " : ""), order[i], f[order[i]], l[order[i]]; print "" }' "$results"
