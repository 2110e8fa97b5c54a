#!/usr/bin/env bash
# The split-write trap on the backend leg: a backend that writes each
# response's head and body apart with Nagle on (bench/split_origin.py, in
# the style of Python's http.server) behind tern, nginx and haproxy, in one
# run. Through a pooled backend connection the body waits for the proxy to
# acknowledge the head, which Linux delays up to 40 ms, unless the proxy
# acknowledges at once (tern: TCP_QUICKACK).
#
# For each server: mean latency of sequential keepalive requests on one
# connection (wrk -c1), for a 100-byte body after the head (/split) and a
# chunked body of five writes (/dribble); and the backend's own latency
# through plain HTTP from the same client for comparison (wrk, like any
# client that does not acknowledge at once, pays the stall itself).
#
# Usage: bench/split-backend.sh   (env: DURATION=5 TERN=target/release/tern
#          SERVERS="tern nginx haproxy")
# Needs: nginx (nginx-light), haproxy, wrk, openssl, curl, python3, taskset.
# Only 127.0.0.1 is ever a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

DURATION="${DURATION:-5}"
TERN="${TERN:-$root/target/release/tern}"
SERVERS="${SERVERS:-tern nginx haproxy}"
SERVER_CPU=0
LOAD_CPU=1
SRV_POOL=64
SRV_ALPN=http/1.1

for tool in wrk openssl curl python3 taskset; do
    need "$tool"
done

bench_workdir tern-split

make_cert ecdsa
backend_port="$(free_port)"
taskset -c "$SERVER_CPU" python3 "$here/split_origin.py" "$backend_port" > "$work/origin.port" 2> "$work/origin.log" &
pids+=("$!")
wait_port "$backend_port" || die "the split-write origin did not start"

# shellcheck disable=SC2086 # SERVERS is a list of words
start_servers "$backend_port" $SERVERS

# wrk_mean URL: mean latency in ms of sequential requests on one connection.
wrk_mean() {
    taskset -c "$LOAD_CPU" wrk -t1 -c1 -d"${DURATION}s" --latency "$1" | awk '
        $1 == "Latency" && NF >= 2 {
            v = $2
            if (v ~ /us$/) { sub(/us$/, "", v); v /= 1000 }
            else if (v ~ /ms$/) { sub(/ms$/, "", v) }
            else if (v ~ /s$/) { sub(/s$/, "", v); v *= 1000 }
            printf "%.2f", v
            exit
        }'
}

printf '\n| path | backend directly (plain HTTP) |'
for server in "${active[@]}"; do printf ' %s |' "$server"; done
printf '\n|---|---|'
for _ in "${active[@]}"; do printf -- '---|'; done
printf '\n'
for path in /split /dribble; do
    direct="$(wrk_mean "http://127.0.0.1:$backend_port$path")"
    printf '| %s | %s ms |' "$path" "$direct"
    for server in "${active[@]}"; do
        curl -sS -k -o /dev/null "https://127.0.0.1:${server_port[$server]}$path" \
            || die "$server did not proxy $path"
        printf ' %s ms |' "$(wrk_mean "https://127.0.0.1:${server_port[$server]}$path")"
    done
    printf '\n'
done

printf '\nConditions: mean latency of wrk -t1 -c1 -d%ss (one kept-alive client connection,\n' "$DURATION"
printf 'requests back to back) on CPU %s; servers and the origin on CPU %s, one worker each,\n' "$LOAD_CPU" "$SERVER_CPU"
printf 'TLS 1.3 %s %s; the origin writes head and body apart with Nagle on\n' "$TLS_SUITE" "$TLS_GROUP"
printf '(bench/split_origin.py); kernel %s; tree at %s.\n' "$(uname -r)" \
    "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
for server in "${active[@]}"; do
    printf -- '- %s\n' "$(server_version "$server")"
done
