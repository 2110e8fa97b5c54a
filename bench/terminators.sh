#!/usr/bin/env bash
# Compare TLS terminators (tern, nginx) in front of one HTTP backend.
#
# Each terminator: ONE worker pinned to CPU 0, same ECDSA P-256 certificate,
# TLS 1.3, X25519. Load generators pinned to CPU 1 (with the backend).
# Workloads:
#   handshake  full TLS handshake + 1 request per connection (hey -disable-keepalive;
#              hey never resumes sessions)
#   keepalive  100-byte responses over kept-alive connections (wrk -c50)
# For each: requests/s and terminator CPU µs per request (utime+stime of the
# terminator's processes from /proc, after minus before, divided by requests),
# median of RUNS interleaved runs (tern, nginx, tern, nginx, ...).
#
# Usage: bench/terminators.sh            (env: DURATION=10 RUNS=3 CONNS=50
#                                          TERN=target/release/tern SERVERS="tern nginx" KEY=ecdsa|rsa)
# Needs: nginx (nginx-light), wrk, hey (go install github.com/rakyll/hey@latest),
#        openssl, python3, taskset. Only 127.0.0.1 is ever a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

DURATION="${DURATION:-10}"
RUNS="${RUNS:-3}"
CONNS="${CONNS:-50}"
TERN="${TERN:-$root/target/release/tern}"
SERVERS="${SERVERS:-tern nginx}"
KEY="${KEY:-ecdsa}"
HEY="${HEY:-$(command -v hey || echo "$HOME/go/bin/hey")}"
# Free ports by default: other people's servers may sit on any fixed one.
BACKEND_PORT="${BACKEND_PORT:-$(free_port)}"
TERN_PORT="${TERN_PORT:-$(free_port)}"
NGINX_PORT="${NGINX_PORT:-$(free_port)}"
# TLS 1.3 suite pinned on both servers so OpenSSL clients (wrk) and Go (hey) negotiate the same.
TERN_CIPHERS="TLS_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
SERVER_CPU=0
LOAD_CPU=1

work="$(mktemp -d /tmp/tern-bench.XXXXXX)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    if [[ -z "${KEEP:-}" ]]; then rm -rf "$work"; else echo "kept $work" >&2; fi
}
trap cleanup EXIT

for tool in nginx wrk openssl python3 taskset; do
    need "$tool"
done
[[ -x "$HEY" ]] || die "hey not found (go install github.com/rakyll/hey@latest)"

# --- certificate: ECDSA P-256 (KEY=ecdsa) or RSA-2048 (KEY=rsa), self-signed --
case "$KEY" in
    ecdsa) key_args=(-newkey ec -pkeyopt ec_paramgen_curve:P-256); key_name="ECDSA P-256" ;;
    rsa) key_args=(-newkey rsa:2048); key_name="RSA-2048" ;;
    *) die "KEY must be ecdsa or rsa" ;;
esac
openssl req -x509 "${key_args[@]}" -nodes -days 30 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null

# --- backend: nginx serving a 100-byte file, on the load CPU ------------------
mkdir -p "$work/www" "$work/backend" "$work/front"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/index.html"
cat > "$work/backend/nginx.conf" <<CONF
user root;
worker_processes 1;
daemon off;
pid $work/backend/nginx.pid;
error_log $work/backend/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $work/backend/tmp;
    proxy_temp_path $work/backend/tmp;
    fastcgi_temp_path $work/backend/tmp;
    uwsgi_temp_path $work/backend/tmp;
    scgi_temp_path $work/backend/tmp;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$BACKEND_PORT;
        root $work/www;
        location / { index index.html; }
    }
}
CONF
taskset -c "$LOAD_CPU" nginx -e "$work/backend/error.log" -c "$work/backend/nginx.conf" &
pids+=($!)
wait_port "$BACKEND_PORT"

# --- terminators ---------------------------------------------------------------
start_nginx() {
    cat > "$work/front/nginx.conf" <<CONF
user root;
worker_processes 1;
daemon off;
pid $work/front/nginx.pid;
error_log $work/front/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $work/front/tmp;
    proxy_temp_path $work/front/tmp;
    fastcgi_temp_path $work/front/tmp;
    uwsgi_temp_path $work/front/tmp;
    scgi_temp_path $work/front/tmp;
    keepalive_requests 1000000;
    upstream backend {
        server 127.0.0.1:$BACKEND_PORT;
        keepalive 256;
    }
    server {
        listen 127.0.0.1:$NGINX_PORT ssl;
        ssl_certificate $work/cert.pem;
        ssl_certificate_key $work/key.pem;
        ssl_protocols TLSv1.3 TLSv1.2;
        ssl_ecdh_curve X25519:prime256v1;
        # One TLS 1.3 suite, the one Go and rustls pick by default, on both servers.
        ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
        ssl_session_cache shared:SSL:10m;
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header X-Forwarded-For \$remote_addr;
            proxy_set_header X-Forwarded-Proto https;
        }
    }
}
CONF
    taskset -c "$SERVER_CPU" nginx -e "$work/front/error.log" -c "$work/front/nginx.conf" &
    pids+=($!)
    server_pid[nginx]=$!
    wait_port "$NGINX_PORT"
}

start_tern() {
    [[ -x "$TERN" ]] || { echo "tern: $TERN not built (cargo build --release -p tern); skipped" >&2; return 1; }
    taskset -c "$SERVER_CPU" "$TERN" serve --listen "127.0.0.1:$TERN_PORT" \
        --backend "127.0.0.1:$BACKEND_PORT" --cert "$work/cert.pem" --key "$work/key.pem" \
        --workers 1 --access-log off --ciphers "$TERN_CIPHERS" 2> "$work/tern.stderr" &
    pids+=($!)
    server_pid[tern]=$!
    wait_port "$TERN_PORT" || { cat "$work/tern.stderr" >&2; return 1; }
}

declare -A server_pid=() server_port=([tern]=$TERN_PORT [nginx]=$NGINX_PORT) negotiated=()
active=()
for server in $SERVERS; do
    if "start_$server"; then active+=("$server"); fi
done
[[ ${#active[@]} -gt 0 ]] || die "no terminator started"

# --- what each server negotiates with an X25519-only TLS 1.3 client -----------
for server in "${active[@]}"; do
    negotiated[$server]="$(negotiation "${server_port[$server]}")"
    # The 100-byte body must come back through the terminator.
    body="$(curl -sS -k "https://127.0.0.1:${server_port[$server]}/")"
    [[ ${#body} -eq 100 ]] || die "$server did not proxy the 100-byte body (got ${#body} bytes)"
done

# --- interleaved runs ----------------------------------------------------------
# --- crypto floor of a full handshake on the server CPU: one signature + one X25519
floor_us="$(crypto_floor_us "$SERVER_CPU" "$KEY")"

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
results="$work/results.tsv"
: > "$results"
# Go offers X25519MLKEM768 first since 1.24; force plain X25519 like the others.
export GODEBUG=tlsmlkem=0
for run in $(seq 1 "$RUNS"); do
    for server in "${active[@]}"; do
        port="${server_port[$server]}"
        pid="${server_pid[$server]}"

        before="$(cpu_ticks "$pid")"
        # -host: hey otherwise sends SNI "127.0.0.1:PORT", which rustls refuses as illegal.
        out="$(taskset -c "$LOAD_CPU" "$HEY" -z "${DURATION}s" -c "$CONNS" -disable-keepalive \
            -host localhost "https://127.0.0.1:$port/")"
        after="$(cpu_ticks "$pid")"
        requests="$(printf '%s\n' "$out" | awk '/\[200\]/ {print $2; exit}')"
        errors="$(printf '%s\n' "$out" | awk '/^Error distribution/ {e=1} e && /\[[0-9]+\]/ {gsub(/[][]/, "", $1); s+=$1} END {print s+0}')"
        rate="$(printf '%s\n' "$out" | awk '/Requests\/sec/ {print $2; exit}')"
        record "$results" handshake "$server" "$run" "${requests:-0}" "$rate" "$before" "$after" "$errors"

        before="$(cpu_ticks "$pid")"
        out="$(taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" \
            -H "Connection: keep-alive" "https://127.0.0.1:$port/")"
        after="$(cpu_ticks "$pid")"
        requests="$(printf '%s\n' "$out" | awk '/requests in/ {print $1; exit}')"
        errors="$(printf '%s\n' "$out" | awk '/Non-2xx|Socket errors/ {print}' | tr '\n' ' ')"
        rate="$(printf '%s\n' "$out" | awk '/Requests\/sec/ {print $2; exit}')"
        record "$results" keepalive "$server" "$run" "${requests:-0}" "$rate" "$before" "$after" "${errors:-0}"
    done
done

# --- report ----------------------------------------------------------------------
{
    echo "## TLS terminators, one worker on CPU $SERVER_CPU, load on CPU $LOAD_CPU"
    echo
    echo "Negotiated with \`openssl s_client -tls1_3 -groups X25519\`:"
    echo
    for server in "${active[@]}"; do
        echo "- $server: ${negotiated[$server]}"
    done
    echo
    python3 "$here/table.py" "$results" "$(getconf CLK_TCK)" "$floor_us"
    echo
    echo "Conditions:"
    echo
    echo "- CPU: $(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}'), $(nproc) cores;" \
        "flags: $(grep -o -w -E 'aes|vaes|avx2|avx512f|sha_ni|pclmulqdq' /proc/cpuinfo | sort -u | tr '\n' ' ')"
    echo "- crypto floor of a handshake on CPU $SERVER_CPU: ${floor_us} µs ($key_name sign + X25519, \`openssl speed\`)"
    echo "- kernel: $(uname -r); load average before the runs: $load_before"
    echo "- $(nginx -v 2>&1); $(openssl version); wrk $(wrk --version 2>&1 | awk 'NR==1 {print $2}'); hey (GODEBUG=tlsmlkem=0)"
    if [[ " ${active[*]} " == *" tern "* ]]; then
        echo "- tern: $("$TERN" --version 2>/dev/null || echo '?'), binary $TERN built $(date -u -r "$TERN" +%FT%TZ), tree at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
    fi
    echo "- runs: $RUNS interleaved, ${DURATION}s each, $CONNS connections; certificate $key_name (self-signed)"
    echo "- handshake: GODEBUG=tlsmlkem=0 taskset -c $LOAD_CPU hey -z ${DURATION}s -c $CONNS -disable-keepalive -host localhost https://127.0.0.1:PORT/"
    echo "- keepalive: taskset -c $LOAD_CPU wrk -t1 -c$CONNS -d${DURATION}s -H \"Connection: keep-alive\" https://127.0.0.1:PORT/"
    [[ " ${active[*]} " != *" tern "* ]] || echo "- tern: taskset -c $SERVER_CPU tern serve --listen 127.0.0.1:$TERN_PORT --backend 127.0.0.1:$BACKEND_PORT --cert cert.pem --key key.pem --workers 1 --access-log off --ciphers $TERN_CIPHERS"
    echo "- nginx: taskset -c $SERVER_CPU nginx (worker_processes 1, ssl_protocols TLSv1.3 TLSv1.2, ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256, upstream keepalive 256, access_log off)"
    echo "- backend: nginx serving a 100-byte file on 127.0.0.1:$BACKEND_PORT, pinned to CPU $LOAD_CPU"
}
