#!/usr/bin/env bash
# Out of file descriptors: tern, nginx and haproxy in one run.
#
# For each server in turn (one worker pinned to CPU 0, the backend too; the
# load on CPU 1): a keepalive load (`tern bench -k`, C connections, LOAD_S
# seconds) starts; once its connections are up, the server's open-file limit
# is lowered with prlimit(1) to what it has open plus SLACK, and FLOOD idle
# TCP connections are opened and held HOLD_S seconds: the server runs out of
# descriptors (accept(2) fails with EMFILE). Reported per server: failed
# requests of the load's existing connections while descriptors ran out,
# whether a new client was served while they were out (it should wait, not
# be served or crash the server), and how long after the flood closed a new
# client was served again (recovery). The figure, last: failed requests on
# existing connections and recovery time, per server.
#
# Usage: bench/fd-exhaustion.sh   (env: C=8 LOAD_S=8 FLOOD=300 HOLD_S=3 SLACK=16
#          TERN=target/release/tern SERVERS="tern nginx haproxy")
# Needs: nginx (also the backend), haproxy (optional), openssl, python3,
# taskset, prlimit, curl. Only 127.0.0.1 is ever a target; everything stops
# by itself and the scratch folder is removed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

C="${C:-8}"
LOAD_S="${LOAD_S:-8}"
FLOOD="${FLOOD:-300}"
HOLD_S="${HOLD_S:-3}"
SLACK="${SLACK:-16}"
TERN="${TERN:-$root/target/release/tern}"
SERVERS="${SERVERS:-tern nginx haproxy}"
SERVER_CPU=0
LOAD_CPU=1
for tool in nginx openssl python3 taskset prlimit curl timeout; do need "$tool"; done
[[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"

bench_workdir tern-fd-exhaustion
make_cert ecdsa
mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/index.html"
backend_port="$(free_port)"
start_backend "$backend_port" "$SERVER_CPU"
read -r -a wanted <<< "$SERVERS"
start_servers "$backend_port" "${wanted[@]}"

# server_procs PID: PID and its children (nginx's worker holds the sockets).
server_procs() { echo "$1" $(pgrep -P "$1" || true); }

# open_fds PID: descriptors open in PID and its children.
open_fds() {
    local p total=0
    for p in $(server_procs "$1"); do
        total=$((total + $(find "/proc/$p/fd" -mindepth 1 -maxdepth 1 2> /dev/null | wc -l)))
    done
    echo "$total"
}

# served PORT: 0 when a new client gets a 200 within 1 s.
served() {
    [[ "$(curl -sk -o /dev/null -w '%{http_code}' --max-time 1 "https://127.0.0.1:$1/")" == 200 ]]
}

results="$work/results.tsv"
for server in "${active[@]}"; do
    port="${server_port[$server]}"
    pid="${server_pid[$server]}"
    served "$port" || die "$server does not serve before the test"
    before="$(open_fds "$pid")"
    taskset -c "$LOAD_CPU" "$TERN" bench -z "${LOAD_S}s" -c "$C" -k -o json \
        "https://127.0.0.1:$port/" > "$work/load.$server.json" 2> /dev/null &
    load_pid=$!
    # The load's connections are up once the server has C more descriptors
    # (a loaded machine can take seconds to start the load: a limit lowered
    # before they are up would shut the load's own connections out).
    for _ in $(seq 1 200); do
        (($(open_fds "$pid") >= before + C)) && break
        sleep 0.05
    done
    (($(open_fds "$pid") >= before + C)) || die "$server: the load's $C connections did not come up"
    declare -A saved=() limit=()
    for p in $(server_procs "$pid"); do
        saved[$p]="$(prlimit --pid "$p" --nofile --output SOFT,HARD --noheadings | awk '{print $1":"$2}')"
        n="$(find "/proc/$p/fd" -mindepth 1 -maxdepth 1 | wc -l)"
        limit[$p]=$((n + SLACK))
        prlimit --pid "$p" --nofile="${limit[$p]}:${limit[$p]}"
    done
    ready="$work/ready.$server"
    rm -f "$ready"
    # The flood: idle TCP connections (the backlog holds the ones the
    # server cannot accept), closed together after HOLD_S seconds.
    taskset -c "$LOAD_CPU" python3 -c '
import socket, sys, time
port, n, hold, ready = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
open(ready, "w").write("ready\n")
time.sleep(hold)
for c in conns: c.close()
' "$port" "$FLOOD" "$HOLD_S" "$ready" &
    flood_pid=$!
    for _ in $(seq 1 100); do [[ -s "$ready" ]] && break; sleep 0.05; done
    # Out once the process holding the sockets is at its limit.
    for _ in $(seq 1 40); do
        at_limit=no
        for p in "${!limit[@]}"; do
            (($(find "/proc/$p/fd" -mindepth 1 -maxdepth 1 | wc -l) >= limit[$p])) && at_limit=yes
        done
        [[ $at_limit == yes ]] && break
        sleep 0.05
    done
    if served "$port"; then new_while_out=served; else new_while_out=waited; fi
    wait "$flood_pid"
    closed_at="$(date +%s.%N)"
    recovered=""
    for _ in $(seq 1 100); do
        if served "$port"; then
            recovered="$(python3 -c "import sys; print(f'{$(date +%s.%N) - $closed_at:.2f}')")"
            break
        fi
        sleep 0.05
    done
    for p in "${!saved[@]}"; do prlimit --pid "$p" --nofile="${saved[$p]}" 2> /dev/null || true; done
    unset saved limit
    wait "$load_pid" || true
    read -r completed failed < <(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["targets"][0]["summary"]; print(s["completed"], s["failed"])' "$work/load.$server.json")
    alive=yes
    kill -0 "$pid" 2> /dev/null || alive=no
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$server" "$completed" "$failed" "$new_while_out" "${recovered:-never}" "$alive" >> "$results"
    echo "$server: $completed requests, $failed failed; a new client while out of descriptors: $new_while_out; served again ${recovered:-never} s after the flood closed" >&2
done

echo
echo "descriptor exhaustion: open-file limit lowered to open+$SLACK, $FLOOD idle connections held ${HOLD_S}s, during a keepalive load tern bench -z ${LOAD_S}s -c $C -k; one worker on CPU $SERVER_CPU, load on CPU $LOAD_CPU; $(nproc) CPUs, $(uname -r)"
for server in "${active[@]}"; do echo "  $server: $(server_version "$server")"; done
echo "| server | requests on existing connections | failed | new client while out | served again after (s) | still running |"
echo "|---|---|---|---|---|---|"
awk -F'\t' '{printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6}' "$results"
awk -F'\t' '{printf "%s%s %s failed, recovered in %s s", (NR > 1 ? ", " : "out of descriptors: "), $1, $3, $5} END {print ""}' "$results"
