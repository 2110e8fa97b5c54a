#!/usr/bin/env bash
# HTTP/2 terminators compared: tern, nginx, haproxy in front of one HTTP/1.1
# backend (nginx serving 100 bytes). One worker each pinned to CPU 0, load
# (h2load) and backend on CPU 1, same ECDSA P-256 certificate, TLS 1.3,
# TLS_AES_128_GCM_SHA256, X25519 (h2load is OpenSSL-based and offers it first).
# Workload: h2load -c50 -m10 (10 concurrent streams per connection) for
# DURATION seconds. Reports requests/s and server CPU µs per request
# (utime+stime from /proc), median of RUNS interleaved runs.
#
# Usage: bench/h2.sh   (env: DURATION=10 RUNS=3 TERN=target/release/tern SERVERS="tern nginx haproxy")
# Needs: nginx (nginx-light), haproxy, h2load (nghttp2-client), openssl, python3.
# Only 127.0.0.1 is ever a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

DURATION="${DURATION:-10}"
RUNS="${RUNS:-3}"
TERN="${TERN:-$root/target/release/tern}"
SERVERS="${SERVERS:-tern nginx haproxy}"
SERVER_CPU=0
LOAD_CPU=1
for tool in nginx haproxy h2load openssl python3 taskset; do need "$tool"; done
[[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"

work="$(mktemp -d /tmp/tern-h2bench.XXXXXX)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
cat "$work/cert.pem" "$work/key.pem" > "$work/haproxy.pem"

backend_port="$(free_port)"
mkdir -p "$work/www" "$work/tmp"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/index.html"
cat > "$work/backend.conf" <<CONF
user root; worker_processes 1; daemon off; pid $work/backend.pid;
error_log $work/backend.err warn;
events { worker_connections 4096; }
http { access_log off; client_body_temp_path $work/tmp; proxy_temp_path $work/tmp;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$backend_port; root $work/www; location / { index index.html; } } }
CONF
taskset -c "$LOAD_CPU" nginx -e "$work/backend.err" -c "$work/backend.conf" &
pids+=($!)
wait_port "$backend_port"

declare -A port pid
start_tern() {
    port[tern]="$(free_port)"
    taskset -c "$SERVER_CPU" "$TERN" serve --listen "127.0.0.1:${port[tern]}" \
        --backend "127.0.0.1:$backend_port" --cert "$work/cert.pem" --key "$work/key.pem" \
        --workers 1 --access-log off --backend-pool-size 512 \
        --ciphers TLS_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 2>"$work/tern.err" &
    pid[tern]=$!
    pids+=($!)
    wait_port "${port[tern]}"
}
start_nginx() {
    port[nginx]="$(free_port)"
    cat > "$work/front.conf" <<CONF
user root; worker_processes 1; daemon off; pid $work/front.pid;
error_log $work/front.err warn;
events { worker_connections 4096; }
http { access_log off; client_body_temp_path $work/tmp; proxy_temp_path $work/tmp;
  keepalive_requests 1000000; http2_max_requests 1000000;
  upstream backend { server 127.0.0.1:$backend_port; keepalive 512; }
  server { listen 127.0.0.1:${port[nginx]} ssl http2;
    ssl_certificate $work/cert.pem; ssl_certificate_key $work/key.pem;
    ssl_protocols TLSv1.3; ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For \$remote_addr; } } }
CONF
    taskset -c "$SERVER_CPU" nginx -e "$work/front.err" -c "$work/front.conf" &
    pid[nginx]=$!
    pids+=($!)
    wait_port "${port[nginx]}"
}
start_haproxy() {
    port[haproxy]="$(free_port)"
    cat > "$work/haproxy.cfg" <<CONF
global
    nbthread 1
    maxconn 4000
    ssl-default-bind-ciphersuites TLS_AES_128_GCM_SHA256
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    http-reuse always
frontend fe
    bind 127.0.0.1:${port[haproxy]} ssl crt $work/haproxy.pem alpn h2,http/1.1 ssl-min-ver TLSv1.3
    option forwardfor
    default_backend be
backend be
    server s1 127.0.0.1:$backend_port
CONF
    taskset -c "$SERVER_CPU" haproxy -f "$work/haproxy.cfg" -db &
    pid[haproxy]=$!
    pids+=($!)
    wait_port "${port[haproxy]}"
}
for s in $SERVERS; do "start_$s"; done

echo "## HTTP/2, 100-byte body, h2load -c50 -m10, ${DURATION}s x ${RUNS} interleaved runs"
echo
for s in $SERVERS; do
    echo "- $s negotiates: $(negotiation "${port[$s]}") ALPN $(echo | openssl s_client -connect "127.0.0.1:${port[$s]}" -alpn h2 2>/dev/null | awk -F': ' '/ALPN protocol/ {print $2; exit}')"
done
results="$work/results.tsv"
for run in $(seq 1 "$RUNS"); do
    for s in $SERVERS; do
        before="$(cpu_ticks "${pid[$s]}")"
        out="$(taskset -c "$LOAD_CPU" h2load -c 50 -m 10 -D "$DURATION" "https://127.0.0.1:${port[$s]}/" 2>&1)"
        after="$(cpu_ticks "${pid[$s]}")"
        done_n="$(printf '%s\n' "$out" | awk '/^requests:/ {print $8}')"
        failed="$(printf '%s\n' "$out" | awk '/^requests:/ {print $10 + $12}')"
        rate="$(printf '%s\n' "$out" | awk '/^finished in/ {print $4}')"
        printf '%s\t%s\t%s\t%s\t%s\n' "$s" "$done_n" "$rate" "$((after - before))" "$failed" >> "$results"
        echo "run $run $s requests=$done_n rate=$rate ticks=$((after - before)) failed=$failed" >&2
    done
done
python3 - "$results" "$(getconf CLK_TCK)" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
tck = int(sys.argv[2])
by = {}
for s, n, rate, ticks, failed in rows:
    n = int(n or 0)
    by.setdefault(s, []).append((float(rate or 0), int(ticks) * 1e6 / tck / n if n else float("nan"), int(failed or 0)))
print()
print("| server | req/s (median) | CPU µs/req (median) | failed | CPU / tern |")
print("|---|---|---|---|---|")
base = statistics.median(x[1] for x in by["tern"]) if "tern" in by else None
for s, xs in by.items():
    cpu = statistics.median(x[1] for x in xs)
    ratio = f"{cpu / base:.2f}" if base else "-"
    print(f"| {s} | {statistics.median(x[0] for x in xs):.0f} | {cpu:.1f} | {sum(x[2] for x in xs)} | {ratio} |")
PY
