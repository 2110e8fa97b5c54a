#!/usr/bin/env bash
# Binary upgrades under load: tern, nginx and haproxy in one run.
#
# Each server gets UPGRADES binary upgrades GAP_S apart under each load of
# LOADS, then is stopped; a fresh server for each load:
#   tern     `tern serve ... --upgrade` (the new process takes the listening
#            sockets over the upgrade socket; the old one drains and exits)
#   nginx    SIGUSR2 to the master (it starts the new binary, which inherits
#            the sockets), then SIGQUIT to the old master once the new one
#            has written its pid file: nginx's documented binary upgrade
#   haproxy  `haproxy -x stats.sock -sf OLD` (the new process takes the
#            listeners over the stats socket, `expose-fd listeners`, and
#            tells the old one to finish): haproxy's seamless reload
# Before each next upgrade the old process must have exited (a bounded
# wait), so every upgrade is a whole one.
#
# Loads (clients on CPU 1, server and origin on CPU 0, one worker):
#   h1   tern bench, keepalive HTTP/1.1, C connections
#   h2   tern bench --h2, C connections with M streams each
#   new  hey -disable-keepalive, C clients: a new TLS connection per request
#        (tern bench --disable-keepalive when hey is not installed)
#   h3   tern bench --h3 (tern only, with H3=1; QUIC connections do not move
#        between processes: see docs/upgrade.md)
# Counted: failed requests and refused connections. The figure, last:
# `tern: N failed`, tern's failed requests over every load run.
#
# Usage: bench/upgrade-under-load.sh   (env: UPGRADES=10 GAP_S=1 C=8 M=10
#          LOADS="h1 h2 new" H3= TERN=target/release/tern SERVERS="tern nginx haproxy")
# Needs: python3, taskset; nginx, haproxy and hey optional. Only 127.0.0.1
# is ever a target; everything stops by itself and the scratch folder is
# removed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

UPGRADES="${UPGRADES:-10}"
GAP_S="${GAP_S:-1}"
C="${C:-8}"
M="${M:-10}"
LOADS="${LOADS:-h1 h2 new}"
TERN="${TERN:-$root/target/release/tern}"
SERVERS="${SERVERS:-tern nginx haproxy}"
SERVER_CPU=0
LOAD_CPU=1
for tool in python3 taskset timeout; do need "$tool"; done
[[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"
# nginx re-executes its own argv[0] on SIGUSR2: it must be a path.
NGINX_BIN="$(command -v "${NGINX_BIN:-nginx}" || echo nginx)"
HEY="$(command -v hey || true)"
new_load="tern bench --disable-keepalive"
[[ -n "$HEY" ]] && new_load="hey -disable-keepalive"

bench_workdir tern-upgrade-under-load
make_cert ecdsa
SRV_ALPN=h2
SRV_HAPROXY_EXPOSE_FDS=1
start_fault_origin

# gone PID: true once the process has exited (or is a zombie).
gone() {
    ! kill -0 "$1" 2> /dev/null || [[ "$(ps -o stat= -p "$1" 2> /dev/null)" == Z* ]]
}

# wait_for SECONDS COMMAND...: polls COMMAND every 10 ms; false at the deadline.
wait_for() {
    local deadline
    deadline="$(python3 -c "import time; print(time.time() + $1)")"
    shift
    until "$@"; do
        python3 -c "import sys, time; sys.exit(time.time() > $deadline)" || return 1
        sleep 0.01
    done
}

tern_serving() { grep -q "upgrade: serving" "$1"; }
nginx_upgraded() { [[ -s "$1.oldbin" && -s "$1" && "$(cat "$1")" != "$2" ]]; }

# upgrade SERVER: one binary upgrade of the server whose pid is $cur_pid;
# sets cur_pid to the new process; appends the takeover time (s, launch to
# serving) to $work/takeover.$server and the old one's exit time to
# $work/drain.$server.
upgrade() {
    local server="$1" dir="$work/$1" old="$cur_pid" new start
    start="$(monotonic_s)"
    case "$server" in
        tern)
            upgrades_done=$((upgrades_done + 1))
            local log="$dir/log.up$upgrades_done"
            tern_serve_args "$port" "$origin_port"
            taskset -c "$SERVER_CPU" "$TERN" "${TERN_SERVE_ARGS[@]}" --upgrade 2> "$log" &
            new=$!
            pids+=("$new")
            wait_for 30 tern_serving "$log" || { cat "$log" >&2; die "tern --upgrade did not take over"; }
            ;;
        nginx)
            kill -USR2 "$old"
            wait_for 30 nginx_upgraded "$dir/nginx.pid" "$old" || die "nginx did not start its new binary"
            new="$(cat "$dir/nginx.pid")"
            pids+=("$new")
            kill -QUIT "$old"
            ;;
        haproxy)
            taskset -c "$SERVER_CPU" "${HAPROXY_BIN:-haproxy}" -f "$dir/haproxy.cfg" -db \
                -x "$dir/stats.sock" -sf "$old" 2>> "$dir/log" &
            new=$!
            pids+=("$new")
            ;;
    esac
    awk -v a="$(monotonic_s)" -v b="$start" "BEGIN {print a - b}" >> "$work/takeover.$server"
    wait_for 30 gone "$old" || echo "$server: the old process $old still runs after 30 s" >&2
    awk -v a="$(monotonic_s)" -v b="$start" "BEGIN {print a - b}" >> "$work/drain.$server"
    # nginx: the old master removes the .oldbin pid file as it exits.
    [[ $server != nginx ]] || wait_for 10 test ! -e "$dir/nginx.pid.oldbin" || true
    cur_pid="$new"
}

# run_load LOAD PORT SECONDS: prints "failed total refused".
run_load() {
    local load="$1" port="$2" secs="$3" url="https://127.0.0.1:$2/ok"
    case "$load" in
        new)
            if [[ -n "$HEY" ]]; then
                taskset -c "$LOAD_CPU" "$HEY" -z "${secs}s" -c "$C" -disable-keepalive "$url" > "$work/hey.out" 2>&1 || true
                local ok errors refused
                ok="$(hey_ok < "$work/hey.out")"
                errors="$(hey_errors < "$work/hey.out")"
                refused="$(awk '/^Error distribution/ {e=1} e && /refused/ {gsub(/[][]/, "", $1); s+=$1} END {print s+0}' "$work/hey.out")"
                echo "$errors $((${ok:-0} + errors)) $refused"
                return
            fi
            bench_json --disable-keepalive
            ;;
        h1) bench_json ;;
        h2) bench_json --h2 -m "$M" ;;
        h3) bench_json --h3 ;;
    esac
}

# bench_json ARGS...: tern bench against $url for $secs; "failed total refused".
bench_json() {
    taskset -c "$LOAD_CPU" "$TERN" bench "$@" -z "${secs}s" -c "$C" -k -o json "$url" 2> /dev/null |
        python3 -c 'import json,sys
t=json.load(sys.stdin)["targets"][0]; s=t["summary"]
errors=t["stats"].get("errors", {})
refused=sum(n for k, n in errors.items() if "refused" in k)
if errors: print("errors:", json.dumps(errors), file=sys.stderr)
print(s["failed"], s["completed"] + s["failed"], refused)'
}

results="$work/results.tsv"
read -r -a wanted <<< "$SERVERS"
read -r -a loads <<< "$LOADS"
[[ -n "${H3:-}" ]] && loads+=(h3)
load_s="$(python3 -c "print(int($UPGRADES * ($GAP_S + 0.5) + 4))")"
for server in "${wanted[@]}"; do
    for load in "${loads[@]}"; do
        [[ $load == h3 && $server != tern ]] && continue
        if [[ $server != tern ]] && ! command -v "$([[ $server == nginx ]] && echo "$NGINX_BIN" || echo "${HAPROXY_BIN:-haproxy}")" > /dev/null 2>&1; then
            echo "$server is not installed; skipped" >&2
            continue 2
        fi
        port="$(free_port)"
        upgrades_done=0
        SRV_TERN_ARGS="--upgrade-socket $work/tern.sock --shutdown-timeout 10s"
        SRV_H3=""
        [[ $load == h3 ]] && SRV_H3=1
        start_server "$server" "$port" "$origin_port" || die "$server did not start"
        cur_pid=$STARTED_PID
        if [[ $server == nginx ]]; then
            # nginx ignores SIGUSR2 while its master's parent is the one it
            # started with: true in the foreground (daemon off). The same
            # configuration, daemonized.
            kill "$cur_pid"
            wait_for 30 gone "$cur_pid" || die "nginx did not stop"
            sed -i 's/^daemon off;/daemon on;/' "$work/nginx/nginx.conf"
            rm -f "$work/nginx/nginx.pid"
            taskset -c "$SERVER_CPU" "$NGINX_BIN" -e "$work/nginx/log" -c "$work/nginx/nginx.conf"
            wait_for 30 test -s "$work/nginx/nginx.pid" || die "nginx did not start daemonized"
            cur_pid="$(cat "$work/nginx/nginx.pid")"
            pids+=("$cur_pid")
            wait_port "$port"
        fi
        rm -f "$work/takeover.$server" "$work/drain.$server"
        run_load "$load" "$port" "$load_s" > "$work/load.out" &
        load_pid=$!
        sleep 1
        for _ in $(seq 1 "$UPGRADES"); do
            upgrade "$server"
            sleep "$GAP_S"
        done
        wait "$load_pid" || true
        read -r failed total refused < "$work/load.out"
        takeover="$(sort -n "$work/takeover.$server" | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}')"
        drain="$(sort -n "$work/drain.$server" | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}')"
        echo "$server $load: $UPGRADES upgrades under load, $failed of $total requests failed, $refused connections refused; median takeover ${takeover}s, old process gone after ${drain}s" >&2
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$server" "$load" "$failed" "$total" "$refused" "$takeover" "$drain" >> "$results"
        kill "$cur_pid" 2> /dev/null || true
        wait_for 30 gone "$cur_pid" || true
    done
done

echo
echo "binary upgrades under load: $UPGRADES upgrades ${GAP_S}s apart (each waits for the old process to exit) during each load of $LOADS${H3:+ h3} (C=$C, h2: -m $M; new: $new_load); TLS 1.3 $TLS_SUITE $TLS_GROUP; one worker on CPU $SERVER_CPU with the origin, clients on CPU $LOAD_CPU; $(nproc) CPUs, $(uname -r)"
echo "upgrade: tern serve --upgrade; nginx SIGUSR2 then SIGQUIT to the old master; haproxy -x stats.sock -sf OLD"
for server in "${wanted[@]}"; do grep -q "^$server	" "$results" && echo "  $server: $(server_version "$server")"; done
echo "| server | load | failed | refused connections | median takeover (s) | median until the old process is gone (s) |"
echo "|---|---|---|---|---|---|"
awk -F'\t' '{printf "| %s | %s | %s of %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7}' "$results"
awk -F'\t' '$1 == "tern" {f += $3} END {printf "tern: %d failed\n", f}' "$results"
