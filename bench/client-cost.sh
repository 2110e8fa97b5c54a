#!/usr/bin/env bash
# Client CPU per request: tern bench against wrk (HTTP/1.1 keepalive),
# h2load (HTTP/2, 10 streams per connection) and hey (a new connection and a
# full TLS handshake per request), all against the same nginx on loopback,
# interleaved, ROUNDS times. Target: tern costs no more CPU per request than
# each peer.
#
# CPU is utime+stime of the client process (GNU time), divided by the
# requests it completed. The server runs on CPU 0, the client on CPU 1;
# every client gets one thread. TLS 1.3, X25519, AES-128-GCM and ECDSA P-256
# are pinned on the server so every client negotiates the same thing (tern's
# disclosure line is printed to prove it).
#
# Usage: bench/client-cost.sh            (needs: nginx, wrk, h2load, hey, python3, GNU time)
# Env:   TERN (default target/release/tern), ROUNDS (3), DURATION (8s),
#        N_H2 (200000), N_NEW (4000), CONNS (50)
set -euo pipefail

TERN=${TERN:-target/release/tern}
HEY=${HEY:-$(command -v hey || echo /root/go/bin/hey)}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8s}
N_H2=${N_H2:-200000}
N_NEW=${N_NEW:-4000}
CONNS=${CONNS:-50}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}

for tool in nginx wrk h2load python3 taskset; do
  command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 2; }
done
[ -x "$TERN" ] || { echo "missing tern binary at $TERN (cargo build --release -p tern)" >&2; exit 2; }
[ -x "$HEY" ] || { echo "missing hey (go install github.com/rakyll/hey@latest)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "missing GNU time (apt-get install -y time)" >&2; exit 2; }

work=$(mktemp -d)
trap 'kill "$(cat "$work/nginx.pid" 2>/dev/null)" 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
url="https://127.0.0.1:$port/"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -keyout "$work/key.pem" -out "$work/cert.pem" -days 2 -subj /CN=127.0.0.1 2>/dev/null
body=$(printf 'x%.0s' $(seq 100))
cat > "$work/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log $work/error.log;
worker_rlimit_nofile 65536;
events { worker_connections 16384; }
http {
  access_log off;
  keepalive_requests 10000000;
  http2_max_requests 10000000;
  server {
    listen 127.0.0.1:$port ssl http2;
    ssl_certificate $work/cert.pem;
    ssl_certificate_key $work/key.pem;
    ssl_protocols TLSv1.3;
    ssl_ecdh_curve X25519;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
    ssl_session_tickets off;
    location / { return 200 "$body"; }
  }
}
EOF
taskset -c "$SERVER_CPU" nginx -c "$work/nginx.conf" -p "$work" &
for _ in $(seq 50); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done

# run NAME COUNT_COMMAND -- CLIENT...: prints "µs/request requests".
run() {
  local name=$1; shift
  taskset -c "$CLIENT_CPU" /usr/bin/time -f "%U %S" -o "$work/time" "$@" > "$work/out" 2>"$work/err" || {
    echo "$name failed:" >&2; cat "$work/err" >&2; return 1; }
  local n
  case $name in
    tern*) n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["targets"][0]["summary"]["completed"])' "$work/out")
           python3 -c 'import json,sys; n=json.load(open(sys.argv[1]))["targets"][0]["summary"]["negotiated"][0]; print("   ", n["version"], n["cipher"], n["group"], n["server_key"], n["alpn"], file=sys.stderr)' "$work/out";;
    wrk)   n=$(awk '/requests in/ {print $1}' "$work/out");;
    h2load) n=$(awk '/^requests:/ {print $8}' "$work/out");;
    hey)   n=$(awk '$1 == "[200]" && $3 == "responses" {print $2; exit}' "$work/out");; # as lib.sh's hey_ok (this script is self-contained)
  esac
  python3 - "$work/time" "$n" <<'PY'
import sys
u, s = map(float, open(sys.argv[1]).read().split()[-2:])
n = int(sys.argv[2])
print(f"{(u + s) * 1e6 / max(n, 1):.2f} {n}")
PY
}

declare -A samples
add() { samples[$1]="${samples[$1]:-} $2"; }
# median "1.0 2.0 3.0": the list is split into arguments on purpose.
# shellcheck disable=SC2086
median() { python3 -c 'import sys,statistics; print(f"{statistics.median(map(float, sys.argv[1:])):.2f}")' $1; }

echo "client cost per request, µs of client CPU (utime+stime); server nginx $(nginx -v 2>&1 | cut -d/ -f2) on CPU $SERVER_CPU, clients on CPU $CLIENT_CPU"
echo "tern: $($TERN --version)  wrk: $(wrk -v 2>&1 | head -1 | cut -d' ' -f2)  h2load: $(h2load --version | head -1)  hey: $HEY"
for round in $(seq "$ROUNDS"); do
  echo "round $round"
  r=$(run tern-h1 "$TERN" bench --cpus 1 -c "$CONNS" -z "$DURATION" --groups X25519 --no-progress -o json "$url"); echo "  tern h1 keepalive   $r"; add tern-h1 "${r%% *}"
  r=$(run wrk wrk -t1 -c "$CONNS" -d "$DURATION" "$url"); echo "  wrk                 $r"; add wrk "${r%% *}"
  r=$(run tern-h2 "$TERN" bench --cpus 1 -h2 -m 10 -c "$CONNS" -n "$N_H2" --groups X25519 --no-progress -o json "$url"); echo "  tern h2 -m 10       $r"; add tern-h2 "${r%% *}"
  r=$(run h2load h2load -t1 -c "$CONNS" -m 10 -n "$N_H2" "$url"); echo "  h2load -m 10        $r"; add h2load "${r%% *}"
  r=$(run tern-new "$TERN" bench --cpus 1 -disable-keepalive -c "$CONNS" -n "$N_NEW" --groups X25519 --no-progress -o json "$url"); echo "  tern new conn       $r"; add tern-new "${r%% *}"
  r=$(run hey "$HEY" -cpus 1 -disable-keepalive -c "$CONNS" -n "$N_NEW" "$url"); echo "  hey new conn        $r"; add hey "${r%% *}"
done

echo
echo "median µs/request over $ROUNDS rounds (ratio tern/peer; target <= 1.00)"
for pair in "tern-h1 wrk" "tern-h2 h2load" "tern-new hey"; do
  read -r -a names <<< "$pair"
  set -- "${names[@]}"
  t=$(median "${samples[$1]}"); p=$(median "${samples[$2]}")
  printf '  %-9s %8s   %-7s %8s   ratio %s\n' "$1" "$t" "$2" "$p" "$(python3 -c "print(f'{$t/$p:.2f}')")"
done
