#!/usr/bin/env bash
# A/B of two tern binaries: interleaved rounds (A, B, A, B, ...), each a
# fresh `tern serve --workers 1` on CPU 0 in front of an nginx backend on CPU
# 0 (the strict layout), load on CPU 1; prints the server CPU µs per request
# of every round (utime+stime of tern from /proc / requests).
#
# Usage: A=/tmp/tern-old B=/tmp/tern-new bench/ab.sh
#        (env: MODE=h1 (wrk -t1 -c50) | h2 (h2load -c50 -m10) | handshake (a full
#        TLS handshake + 1 request per connection: hey -c50 -disable-keepalive, as
#        bench/terminators.sh), ROUNDS=4, D=5 seconds)
# Needs: nginx (nginx-light), wrk, h2load or hey, openssl, taskset. Only 127.0.0.1 is a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

[[ -x "${A:-}" && -x "${B:-}" ]] || die "set A and B to two tern binaries"
MODE="${MODE:-h1}"
ROUNDS="${ROUNDS:-4}"
D="${D:-5}"
SERVER_CPU=0
LOAD_CPU=1
SRV_POOL=512
SRV_ALPN=http/1.1
case "$MODE" in
    h1) need wrk ;;
    h2) need h2load; SRV_ALPN=h2 ;;
    handshake)
        HEY="${HEY:-$(command -v hey || echo "$HOME/go/bin/hey")}"
        [[ -x "$HEY" ]] || die "MODE=handshake needs hey (go install github.com/rakyll/hey@latest)"
        # Go's client offers X25519MLKEM768 first otherwise; the servers are pinned to X25519.
        export GODEBUG=tlsmlkem=0 ;;
    *) die "MODE must be h1, h2 or handshake" ;;
esac

bench_workdir tern-ab
make_cert ecdsa
mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/index.html"
backend_port="$(free_port)"
start_backend "$backend_port" "$SERVER_CPU"

for round in $(seq "$ROUNDS"); do
    for which in A B; do
        TERN="${!which}"
        port="$(free_port)"
        start_server tern "$port" "$backend_port"
        pid=$STARTED_PID
        before="$(cpu_ticks "$pid")"
        if [[ "$MODE" == h2 ]]; then
            n="$(taskset -c "$LOAD_CPU" h2load -c 50 -m 10 -D "$D" "https://127.0.0.1:$port/" 2>&1 \
                | awk '/^requests:/ { print $8 }')"
        elif [[ "$MODE" == handshake ]]; then
            n="$(taskset -c "$LOAD_CPU" "$HEY" -z "${D}s" -c 50 -disable-keepalive \
                -host localhost "https://127.0.0.1:$port/" | hey_ok)"
        else
            n="$(taskset -c "$LOAD_CPU" wrk -t1 -c50 -d"${D}s" "https://127.0.0.1:$port/" 2>&1 \
                | awk '/requests in/ { print $1 }')"
        fi
        after="$(cpu_ticks "$pid")"
        kill "$pid"
        wait "$pid" 2>/dev/null || true
        python3 -c "print('$which round $round: %.2f us/req (%s requests)' % (($after - $before) * 1e4 / $n, $n))"
    done
done
