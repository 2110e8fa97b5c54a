#!/usr/bin/env bash
# Backends killed and restored under load: tern, nginx and haproxy in one
# run, each in front of the same group of BACKENDS origins.
#
# The origins are nginx processes (one each, `master_process off`, so one
# SIGKILL takes one down at once, mid-request) serving 100 bytes at /ok on
# 127.0.0.1, on CPU 0 with the server under test (one worker); the load runs
# on CPU 1. For each server: a keepalive load (`tern bench -k -c C`, HTTP/1.1,
# DURATION seconds) on /ok while a churn loop kills one origin (SIGKILL), waits
# DOWN_S, starts it again on the same port, waits UP_S, and moves on to the
# next origin. Before it, the same load for STEADY_S seconds without churn
# gives the server's p99 at rest. Reported per server: requests, failed
# requests (any error or non-2xx the client saw), p99 at rest and under
# churn, origin kills. TLS 1.3 TLS_AES_128_GCM_SHA256 X25519, ECDSA P-256,
# access logs off.
#
# Each server is set up the way its documentation says to ride out a dead
# server, as close to the others as it allows:
#   tern     servers = [...], max_fails = 1, fail_timeout = "2s"; a connect
#            failure is retried on the next server, and so is a request
#            whose pooled connection the origin closed without answering.
#   nginx    server ... max_fails=1 fail_timeout=2s; proxy_next_upstream
#            error timeout (its default: retry on another server).
#   haproxy  server ... check inter 1s fall 1 rise 1 (haproxy's passive
#            checks need active ones), option redispatch, retries 2,
#            retry-on conn-failure empty-response.
#
# Usage: bench/backend-churn.sh   (env: DURATION=20 STEADY_S=5 C=16
#          BACKENDS=3 DOWN_S=2 UP_S=2 TERN=target/release/tern
#          SERVERS="tern nginx haproxy")
# Needs: nginx, haproxy (optional), curl, openssl, python3, taskset. Only
# 127.0.0.1 is ever a target; everything stops by itself and the scratch
# folder is removed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

DURATION="${DURATION:-20}"
STEADY_S="${STEADY_S:-5}"
C="${C:-16}"
BACKENDS="${BACKENDS:-3}"
DOWN_S="${DOWN_S:-2}"
UP_S="${UP_S:-2}"
TERN="${TERN:-$root/target/release/tern}"
SERVERS="${SERVERS:-tern nginx haproxy}"
SERVER_CPU=0
LOAD_CPU=1
for tool in nginx curl openssl python3 taskset; do need "$tool"; done
[[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"

bench_workdir tern-backend-churn
make_cert ecdsa
mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' x > "$work/www/ok"

declare -a origin_port=() origin_pid=()

# start_origin I: origin I on origin_port[I] (a fresh port the first time).
start_origin() {
    local i="$1" dir="$work/origin$1"
    [[ -n "${origin_port[$i]:-}" ]] || origin_port[i]="$(free_port)"
    mkdir -p "$dir/tmp"
    cat > "$dir/nginx.conf" <<CONF
user root;
worker_processes 1;
master_process off;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
$(nginx_http_common "$dir")
    keepalive_timeout 60s;
    server {
        listen 127.0.0.1:${origin_port[$i]} backlog=4096 reuseport;
        root $work/www;
    }
}
CONF
    taskset -c "$SERVER_CPU" nginx -e "$dir/error.log" -c "$dir/nginx.conf" &
    origin_pid[i]=$!
    pids+=("${origin_pid[$i]}")
    wait_port "${origin_port[$i]}" || { cat "$dir/error.log" >&2; return 1; }
}

# kill_origin I: SIGKILL, and wait until its port is closed.
kill_origin() {
    kill -KILL "${origin_pid[$1]}" 2> /dev/null || true
    wait "${origin_pid[$1]}" 2> /dev/null || true
}

for i in $(seq 0 $((BACKENDS - 1))); do start_origin "$i" || die "origin $i did not start"; done

# start_front NAME PORT: the server under test on 127.0.0.1:PORT in front of
# every origin, pinned to SERVER_CPU. Sets STARTED_PID.
start_front() {
    local name="$1" port="$2" dir="$work/$1" i
    mkdir -p "$dir/tmp"
    case "$name" in
        tern)
            {
                echo "workers = 1"
                echo "access_log = \"off\""
                echo "[[upstream]]"
                echo "name = \"origins\""
                printf 'servers = ['
                for i in $(seq 0 $((BACKENDS - 1))); do printf '"127.0.0.1:%s", ' "${origin_port[$i]}"; done
                echo ']'
                echo "max_fails = 1"
                echo "fail_timeout = \"2s\""
                echo "[[listener]]"
                echo "listen = \"127.0.0.1:$port\""
                echo "upstream = \"origins\""
                echo "cert = \"$cert\""
                echo "key = \"$key\""
                echo "tls_versions = [\"TLSv1.3\"]"
                echo "ciphers = [\"$TLS_SUITE\"]"
                echo "groups = [\"$TLS_GROUP\"]"
                echo "alpn = [\"http/1.1\"]"
                echo "backend_pool_size = 256"
            } > "$dir/tern.toml"
            taskset -c "$SERVER_CPU" "$TERN" serve --config "$dir/tern.toml" 2> "$dir/log" &
            ;;
        nginx)
            local servers=""
            for i in $(seq 0 $((BACKENDS - 1))); do
                servers+="server 127.0.0.1:${origin_port[$i]} max_fails=1 fail_timeout=2s; "
            done
            cat > "$dir/nginx.conf" <<CONF
$(nginx_main "$dir" "$dir/log" 8192)
http {
$(nginx_http_common "$dir")
    upstream origins { $servers keepalive 256; }
    server {
        listen 127.0.0.1:$port ssl backlog=4096;
        ssl_certificate $cert;
        ssl_certificate_key $key;
        ssl_protocols TLSv1.3;
        ssl_ecdh_curve $TLS_GROUP;
        ssl_conf_command Ciphersuites $TLS_SUITE;
        location / {
            proxy_pass http://origins;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_next_upstream error timeout;
        }
    }
}
CONF
            taskset -c "$SERVER_CPU" nginx -e "$dir/log" -c "$dir/nginx.conf" &
            ;;
        haproxy)
            local servers=""
            for i in $(seq 0 $((BACKENDS - 1))); do
                servers+="    server s$i 127.0.0.1:${origin_port[$i]} check inter 1s fall 1 rise 1"$'\n'
            done
            cat > "$dir/haproxy.cfg" <<CONF
global
    nbthread 1
    maxconn 8192
    no strict-limits
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s
    timeout http-request 10s
    http-reuse always
    option redispatch
    retries 2
    retry-on conn-failure empty-response
frontend fe
    bind 127.0.0.1:$port ssl crt $work/both.pem alpn http/1.1 ssl-min-ver TLSv1.3 ciphersuites $TLS_SUITE curves $TLS_GROUP
    default_backend be
backend be
$servers
CONF
            taskset -c "$SERVER_CPU" haproxy -f "$dir/haproxy.cfg" -db 2> "$dir/log" &
            ;;
    esac
    started "$port" "$dir/log"
}

# load SECONDS PORT OUT: the keepalive load, JSON into OUT.
load() {
    taskset -c "$LOAD_CPU" "$TERN" bench -z "$1s" -c "$C" -k -o json \
        "https://127.0.0.1:$2/ok" > "$3" 2> /dev/null
}

# figures JSON: "completed failed p99_ms"
figures() {
    python3 -c 'import json,sys
s = json.load(open(sys.argv[1]))["targets"][0]["summary"]
print(s["completed"], s["failed"], s["percentiles_ms"].get("99", float("nan")))' "$1"
}

results="$work/results.tsv"
for server in $SERVERS; do
    if ! command -v "$server" > /dev/null 2>&1 && [[ $server != tern ]]; then
        echo "$server: not installed, skipped" >&2
        continue
    fi
    port="$(free_port)"
    start_front "$server" "$port" || { echo "$server did not start; skipped" >&2; continue; }
    front_pid=$STARTED_PID
    load "$STEADY_S" "$port" "$work/steady.json" || true
    read -r _ _ steady_p99 < <(figures "$work/steady.json")
    load "$DURATION" "$port" "$work/churn.json" &
    load_pid=$!
    kills=0
    next=0
    end=$(($(date +%s) + DURATION - DOWN_S - 1))
    sleep 1
    while (($(date +%s) < end)); do
        kill_origin "$next"
        kills=$((kills + 1))
        sleep "$DOWN_S"
        start_origin "$next" || die "origin $next did not start again"
        sleep "$UP_S"
        next=$(((next + 1) % BACKENDS))
    done
    wait "$load_pid" || true
    read -r completed failed churn_p99 < <(figures "$work/churn.json")
    echo "$server: $kills kills, $failed of $((completed + failed)) requests failed, p99 ${steady_p99} ms at rest, ${churn_p99} ms under churn" >&2
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$server" "$kills" "$completed" "$failed" "$steady_p99" "$churn_p99" >> "$results"
    kill "$front_pid" 2> /dev/null || true
    wait "$front_pid" 2> /dev/null || true
done
[[ -s "$results" ]] || die "no server ran"

echo
echo "backend churn: $BACKENDS origins (nginx, 100 B), one killed (SIGKILL) for ${DOWN_S}s then restored, next after ${UP_S}s, during tern bench -k -c $C for ${DURATION}s (HTTP/1.1 keepalive); p99 at rest from ${STEADY_S}s without churn; TLS 1.3 $TLS_SUITE $TLS_GROUP; one worker on CPU $SERVER_CPU with the origins, load on CPU $LOAD_CPU; $(nproc) CPUs, $(uname -r); load average $(cut -d' ' -f1-3 /proc/loadavg)"
for server in $SERVERS; do
    grep -q "^$server	" "$results" && echo "- $(server_version "$server")"
done
echo
echo "| server | origin kills | requests | failed | failed % | p99 at rest (ms) | p99 under churn (ms) |"
echo "|---|---|---|---|---|---|---|"
while IFS=$'\t' read -r server kills completed failed steady churn; do
    python3 -c 'import sys
s, k, c, f, st, ch = sys.argv[1:]
c, f = int(c), int(f)
print(f"| {s} | {k} | {c + f} | {f} | {100 * f / max(c + f, 1):.3f} | {float(st):.2f} | {float(ch):.2f} |")' \
        "$server" "$kills" "$completed" "$failed" "$steady" "$churn"
done < "$results"
