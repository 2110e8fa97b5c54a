#!/usr/bin/env bash
# Automatic certificates against a real ACME CA, all on loopback: Pebble
# (Let's Encrypt's test CA) with pebble-challtestsrv as its DNS server
# (every name resolves to 127.0.0.1), and `tern serve --acme NAME`.
#
# Exits 0 once `openssl s_client`, trusting only Pebble's root, verifies a
# certificate for NAME served by tern; prints how long issuance took and,
# last, the certificate's issuer. Exits non-zero after TIMEOUT_S seconds.
#
# Usage: bench/acme-pebble.sh   (env: NAME=tern.pebble.test
#          CHALLENGE=tls-alpn-01|http-01 TIMEOUT_S=60 TERN=target/release/tern)
# Needs: pebble and pebble-challtestsrv (go install
#   github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.1, same for
#   cmd/pebble-challtestsrv), openssl, python3, curl. Only 127.0.0.1 is
#   ever a target; everything stops by itself and the scratch folder is
#   removed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

NAME="${NAME:-tern.pebble.test}"
CHALLENGE="${CHALLENGE:-tls-alpn-01}"
TIMEOUT_S="${TIMEOUT_S:-60}"
TERN="${TERN:-$root/target/release/tern}"
gopath="$(go env GOPATH 2>/dev/null || echo "$HOME/go")"
export PATH="$PATH:$HOME/go/bin:$gopath/bin"
for tool in pebble pebble-challtestsrv openssl python3 curl; do need "$tool"; done
[[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"
case "$CHALLENGE" in tls-alpn-01 | http-01) ;; *) die "CHALLENGE is tls-alpn-01 or http-01" ;; esac

bench_workdir tern-acme-pebble

# Pebble's own HTTPS: a throw-away CA and a leaf for 127.0.0.1.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -subj /CN=wfe-test-ca -keyout "$work/wfe-ca.key" -out "$work/wfe-ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=pebble \
    -keyout "$work/wfe.key" -out "$work/wfe.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$work/wfe.ext"
openssl x509 -req -in "$work/wfe.csr" -CA "$work/wfe-ca.pem" -CAkey "$work/wfe-ca.key" \
    -CAcreateserial -days 1 -extfile "$work/wfe.ext" -out "$work/wfe.pem" 2>/dev/null

tls_port="$(free_port)"
http_port="$(free_port)"
acme_port="$(free_port)"
mgmt_port="$(free_port)"
dns_port="$(free_port)"
dns_mgmt_port="$(free_port)"
cat >"$work/pebble.json" <<JSON
{"pebble": {"listenAddress": "127.0.0.1:$acme_port", "managementListenAddress": "127.0.0.1:$mgmt_port",
  "certificate": "$work/wfe.pem", "privateKey": "$work/wfe.key",
  "httpPort": $http_port, "tlsPort": $tls_port, "ocspResponderURL": "",
  "externalAccountBindingRequired": false, "retryAfter": {"authz": 1, "order": 1}}}
JSON

pebble-challtestsrv -dnsserver "127.0.0.1:$dns_port" -management "127.0.0.1:$dns_mgmt_port" \
    -http01 "" -https01 "" -tlsalpn01 "" -doh "" -defaultIPv4 127.0.0.1 -defaultIPv6 "" \
    >"$work/challtestsrv.log" 2>&1 &
pids+=("$!")
# PEBBLE_VA_NOSLEEP: validate at once, not after a random 0-15 s.
PEBBLE_VA_NOSLEEP=1 pebble -config "$work/pebble.json" -dnsserver "127.0.0.1:$dns_port" \
    >"$work/pebble.log" 2>&1 &
pids+=("$!")
wait_port "$acme_port" || { cat "$work/pebble.log" >&2; exit 1; }
wait_port "$mgmt_port"
curl -sS --fail --cacert "$work/wfe-ca.pem" "https://127.0.0.1:$mgmt_port/roots/0" >"$work/root.pem"

extra=()
[[ "$CHALLENGE" == http-01 ]] && extra=(--http-listen "127.0.0.1:$http_port")
start="$(date +%s.%N)"
"$TERN" serve --listen "127.0.0.1:$tls_port" --workers 1 --access-log off \
    --acme "$NAME" --acme-directory "https://127.0.0.1:$acme_port/dir" \
    --acme-ca-root "$work/wfe-ca.pem" --acme-state-dir "$work/state" --acme-retry 1s \
    "${extra[@]}" >"$work/tern.log" 2>&1 &
pids+=("$!")
wait_port "$tls_port" || { cat "$work/tern.log" >&2; exit 1; }

deadline=$((SECONDS + TIMEOUT_S))
while ((SECONDS < deadline)); do
    if out="$(timeout 10 openssl s_client -connect "127.0.0.1:$tls_port" -servername "$NAME" \
        -CAfile "$work/root.pem" -verify_return_error -verify_hostname "$NAME" </dev/null 2>&1)" \
        && grep -q "Verify return code: 0 (ok)" <<<"$out"; then
        took="$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")"
        echo "tern obtained a certificate for $NAME from Pebble over $CHALLENGE in ${took} s (verified by openssl s_client against Pebble's root)"
        openssl x509 -noout -issuer <<<"$out"
        exit 0
    fi
    sleep 0.5
done
echo "bench: no verified certificate for $NAME within ${TIMEOUT_S} s; tern said:" >&2
tail -n 20 "$work/tern.log" >&2
exit 1
