#!/usr/bin/env bash
# TLS conformance of tern, nginx and haproxy side by side (issue 31): the
# same tlsfuzzer scripts against each, with one RSA-2048 certificate and
# the same "modern" policy (bench/lib.sh SRV_MODERN: TLS 1.2 and 1.3, every
# ECDHE AEAD suite, groups X25519, P-256, P-384; renegotiation off, as each
# server has it by default). Prints a Markdown table, one row per script:
# PASS, FAIL n/m (n of m conversations failed), ERROR (the script stopped
# before its summary, e.g. its sanity conversation failed) or TIMEOUT; then
# the scripts that pass against nginx or haproxy but not against tern,
# which are tern's to fix or to list among rustls's deviations in
# vendor/README.md.
#
# The scripts: SCRIPTS (names without .py), by default every one that
# applies to such a server (none about SSLv2/3, CBC, RSA key exchange,
# finite-field DHE, DSA/EdDSA/ML-DSA certificates, client certificates or
# timing side channels). TLS 1.2 scripts that take them get
# `-d -C TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256` (an ECDHE AEAD suite:
# their default is TLS_RSA_WITH_AES_128_CBC_SHA, which no server here
# offers); every script that takes it gets `-n N` (N=0: all of its
# conversations rather than a random subset, so each server meets the
# same ones).
#
# tlsfuzzer itself: TLSFUZZER, a checkout of github.com/tlsfuzzer/tlsfuzzer
# (vendor/tlsfuzzer holds only the five scripts CI runs: enough for
# SCRIPTS naming those, as tests/scripts.rs does), and tlslite-ng from
# PyPI (`pip install tlslite-ng==0.9.0b2`, as .ci/run does).
#
# Usage: bench/tlsfuzzer.sh   (env: TLSFUZZER=~/tlsfuzzer SCRIPTS="..."
#          N=0 TIMEOUT=600 TERN=target/debug/tern SERVERS="tern nginx haproxy")
# Needs: nginx, haproxy, openssl, python3 with tlslite-ng and ecdsa. Only
# 127.0.0.1 is ever a target; everything stops by itself. A debug build of
# tern is enough: nothing here is timed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

TLSFUZZER="${TLSFUZZER:-$HOME/tlsfuzzer}"
N="${N:-0}"
TIMEOUT="${TIMEOUT:-600}"
TERN="${TERN:-$root/target/debug/tern}"
SERVERS="${SERVERS:-tern nginx haproxy}"
SCRIPTS="${SCRIPTS:-
test-tls13-ccs test-tls13-certificate-compression test-tls13-connection-abort
test-tls13-conversation test-tls13-count-tickets test-tls13-crfg-curves
test-tls13-ecdhe-curves test-tls13-empty-alert test-tls13-finished
test-tls13-finished-plaintext test-tls13-hrr test-tls13-invalid-ciphers
test-tls13-keyshare-omitted test-tls13-keyupdate
test-tls13-large-number-of-extensions test-tls13-legacy-version
test-tls13-lengths test-tls13-multiple-ccs-messages test-tls13-nociphers
test-tls13-obsolete-curves test-tls13-pkcs-signature
test-tls13-record-layer-limits test-tls13-record-padding
test-tls13-rsa-signatures test-tls13-rsapss-signatures
test-tls13-serverhello-random test-tls13-session-resumption
test-tls13-shuffled-extentions test-tls13-signature-algorithms
test-tls13-symetric-ciphers test-tls13-unencrypted-alert
test-tls13-unrecognised-groups test-tls13-version-negotiation
test-tls13-zero-content-type test-tls13-zero-length-data
test-aes-gcm-nonces test-alpn-negotiation test-ccs test-chacha20
test-client-hello-max-size test-clienthello-md5 test-connection-abort
test-conversation test-downgrade-protection test-ecdhe-padded-shared-secret
test-ecdhe-rsa-key-exchange test-ecdhe-rsa-key-exchange-with-bad-messages
test-ecdhe-rsa-key-share-random test-empty-extensions
test-extended-master-secret-extension test-extensions test-fallback-scsv
test-fuzzed-ciphertext test-fuzzed-finished test-fuzzed-plaintext
test-heartbeat test-hello-request-by-client test-invalid-cipher-suites
test-invalid-client-hello test-invalid-client-hello-w-record-overflow
test-invalid-compression-methods test-invalid-content-type
test-invalid-server-name-extension test-invalid-server-name-extension-resumption
test-invalid-session-id test-invalid-version test-large-hello
test-large-number-of-extensions test-legacy-renegotiation test-lengths
test-message-duplication test-message-skipping test-no-heartbeat
test-no-mlkem-in-old-tls test-ocsp-stapling test-point-extension
test-record-layer-fragmentation test-record-size-limit
test-renegotiation-changed-clienthello test-renegotiation-disabled
test-resumption-with-wrong-ciphers test-serverhello-random
test-session-ticket-resumption test-sessionID-resumption test-sig-algs
test-signature-algorithms test-ssl-death-alert test-sslv2hello-protocol
test-truncating-of-client-hello test-truncating-of-finished
test-unsupported-curve-fallback test-version-numbers test-x25519
test-zero-length-data
}"
SERVER_CPU="${SERVER_CPU:-0}"
SRV_MODERN=1
SRV_ALPN=http/1.1

for tool in openssl python3 nginx; do
    need "$tool"
done
[[ -d "$TLSFUZZER/scripts" && -d "$TLSFUZZER/tlsfuzzer/_apps" ]] \
    || die "no tlsfuzzer checkout at $TLSFUZZER (TLSFUZZER=...)"
python3 -c 'import tlslite, ecdsa' 2>/dev/null \
    || die "python3 cannot import tlslite-ng (pip install tlslite-ng==0.9.0b2 ecdsa)"

bench_workdir tern-tlsfuzzer
make_cert rsa
mkdir -p "$work/www" "$work/out"
echo "tlsfuzzer" > "$work/www/index.html"
backend_port="$(free_port)"
start_backend "$backend_port" "$SERVER_CPU"
# shellcheck disable=SC2086 # SERVERS is a list
start_servers "$backend_port" $SERVERS

# script_args NAME: the options NAME takes that this run gives it (from
# its getopt string in tlsfuzzer/_apps).
script_args() {
    local app="$TLSFUZZER/tlsfuzzer/_apps/${1//-/_}.py" opts
    opts="$(grep -A2 'getopt.getopt(' "$app" 2>/dev/null | tr -d '\n ' | grep -o '"[^"]*"' | head -1 | tr -d '"')"
    local -a args=()
    [[ "$opts" == *n:* ]] && args+=(-n "$N")
    if [[ "$1" != test-tls13-* ]]; then
        local flag_d='d($|[^:])'
        [[ "$opts" =~ $flag_d ]] && args+=(-d)
        [[ "$opts" == *C:* ]] && args+=(-C TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)
    fi
    # (not echo: it would take -n for its own)
    printf '%s ' "${args[@]}"
}

# run_one NAME SERVER: runs the script against the server; its output in
# $work/out/NAME.SERVER, its verdict in $work/out/NAME.SERVER.verdict.
run_one() {
    local name="$1" server="$2" out="$work/out/$1.$2" status=0
    local -a args
    read -r -a args <<< "$(script_args "$name")"
    timeout "$TIMEOUT" python3 "$TLSFUZZER/scripts/$name.py" \
        -h 127.0.0.1 -p "${server_port[$server]}" "${args[@]}" > "$out" 2>&1 || status=$?
    local fail total
    fail="$(awk '/^FAIL: / {print $2}' "$out" | tail -1)"
    total="$(awk '/^TOTAL: / {print $2}' "$out" | tail -1)"
    if [[ $status -eq 124 ]]; then
        echo "TIMEOUT" > "$out.verdict"
    elif [[ -z "$fail" ]]; then
        echo "ERROR" > "$out.verdict"
    elif [[ "$fail" == 0 && $status -eq 0 ]]; then
        echo "PASS" > "$out.verdict"
    else
        echo "FAIL $fail/$total" > "$out.verdict"
    fi
}

for name in $SCRIPTS; do
    [[ -f "$TLSFUZZER/scripts/$name.py" ]] || { echo "no script $name; skipped" >&2; continue; }
    runs=()
    for server in "${active[@]}"; do
        run_one "$name" "$server" &
        runs+=($!)
    done
    # (a bare `wait` would wait for the servers too)
    wait "${runs[@]}"
    printf '%s' "$name" >&2
    for server in "${active[@]}"; do
        printf ' %s=%s' "$server" "$(cat "$work/out/$name.$server.verdict")" >&2
    done
    echo >&2
done

echo "## tlsfuzzer against ${active[*]} (bench/tlsfuzzer.sh, $(date -u +%F))"
echo
for server in "${active[@]}"; do
    echo "- $server: $(server_version "$server")"
done
tlsfuzzer_rev='14555fe (vendor/tlsfuzzer)'
[[ -d "$TLSFUZZER/.git" ]] && tlsfuzzer_rev="$(git -C "$TLSFUZZER" rev-parse --short HEAD)"
echo "- tlsfuzzer $tlsfuzzer_rev at $TLSFUZZER, tlslite-ng $(python3 -c 'import tlslite; print(tlslite.__version__)')"
echo "- one RSA-2048 certificate; TLS 1.2 and 1.3, ECDHE AEAD suites, X25519/P-256/P-384 on every server; -n $N"
echo
printf '| script |'
printf ' %s |' "${active[@]}"
echo
printf '|---|'
printf -- '---|%.0s' "${active[@]}"
echo
declare -A passes=()
behind=()
for name in $SCRIPTS; do
    [[ -f "$work/out/$name.${active[0]}.verdict" ]] || continue
    printf '| %s |' "$name"
    other_passes=0
    for server in "${active[@]}"; do
        verdict="$(cat "$work/out/$name.$server.verdict")"
        printf ' %s |' "$verdict"
        if [[ "$verdict" == PASS ]]; then
            passes[$server]=$((${passes[$server]:-0} + 1))
            [[ "$server" != tern ]] && other_passes=1
        fi
    done
    echo
    if [[ $other_passes -eq 1 && -f "$work/out/$name.tern.verdict" \
        && "$(cat "$work/out/$name.tern.verdict")" != PASS ]]; then
        behind+=("$name")
    fi
done
echo
for server in "${active[@]}"; do
    echo "- $server passes ${passes[$server]:-0} scripts"
done
echo
if [[ ${#behind[@]} -eq 0 ]]; then
    echo "No script passes against a peer but fails against tern."
else
    echo "Pass against a peer but not against tern (failed conversations below):"
    for name in "${behind[@]}"; do
        echo "- $name:"
        awk '/^FAILED:/ {f = 1; next} f && /^\t/ {print "    " $0} f && !/^\t/ {f = 0}' \
            "$work/out/$name.tern" | head -20
    done
fi
