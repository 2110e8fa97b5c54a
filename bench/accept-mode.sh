#!/usr/bin/env bash
# One shared listening socket vs one SO_REUSEPORT socket per worker.
# tern with --workers 2 (both cores), backend on BACKEND (default an nginx you
# start yourself on 127.0.0.1:8081), load from this machine: hey (new
# connection per request) then wrk (keepalive). Prints tern's CPU µs per
# request for each mode, three interleaved rounds. Only 127.0.0.1 is a target.
# Usage: TERN=target/release/tern CERT=cert.pem KEY=key.pem bench/accept-mode.sh
set -euo pipefail
TERN="${TERN:-target/release/tern}"
BACKEND="${BACKEND:-127.0.0.1:8081}"
CERT="${CERT:?set CERT to a PEM certificate file}"
KEY="${KEY:?set KEY to its PEM key file}"
HEY="${HEY:-$(command -v hey || echo "$HOME/go/bin/hey")}"
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
for round in 1 2 3; do
    for mode in reuseport shared; do
        port="$(free_port)"
        "$TERN" serve --listen "127.0.0.1:$port" --backend "$BACKEND" --cert "$CERT" --key "$KEY" \
            --workers 2 --accept "$mode" --access-log off \
            --ciphers TLS_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 2>/dev/null &
        pid=$!
        wait_port "$port"
        t0="$(cpu_ticks "$pid")"
        n="$(GODEBUG=tlsmlkem=0 "$HEY" -z 6s -c 50 -disable-keepalive -host localhost "https://127.0.0.1:$port/" | hey_ok)"
        t1="$(cpu_ticks "$pid")"
        k="$(wrk -t1 -c50 -d6s "https://127.0.0.1:$port/" | awk '/requests in/ {print $1}')"
        t2="$(cpu_ticks "$pid")"
        kill "$pid"
        wait "$pid" 2>/dev/null || true
        tck="$(getconf CLK_TCK)"
        python3 -c "print('round $round $mode: handshake', $n, 'req', round(($t1-$t0)*1e6/$tck/$n, 1), 'us/req | keepalive', $k, 'req', round(($t2-$t1)*1e6/$tck/$k, 1), 'us/req')"
    done
done
