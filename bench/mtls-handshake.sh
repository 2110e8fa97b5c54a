#!/usr/bin/env bash
# Full TLS handshakes with client-certificate verification (mTLS) through
# tern, nginx and haproxy in one run: server CPU per handshake (issue 31;
# target: tern at or below 0.5x the best peer, as for plain full handshakes).
#
# Layout as bench/terminators.sh with BACKEND_CPU=server (strict): every
# terminator ONE worker pinned to CPU 0 with its backend (nginx serving a
# 100-byte file) on CPU 0 too; the load on CPU 1. The same server
# certificate (KEY=ecdsa|rsa), TLS 1.3 only with TLS_AES_128_GCM_SHA256 and
# X25519, access logs off, and a client certificate REQUIRED from one CA
# (tern --client-auth required --client-ca, nginx ssl_verify_client on,
# haproxy verify required; hitch has no client-certificate verification).
# Workloads, each a full handshake + one GET per connection, no resumption:
#   mtls-ecdsa  the client presents an ECDSA P-256 certificate
#   mtls-rsa    the client presents an RSA-2048 certificate
#   plain       no client certificate asked for (the servers restarted
#               without SRV_CLIENT_CA): what verification adds
# The client is `openssl s_time -new -tls1_3` (hey, wrk and h2load cannot
# present a client certificate), PAR processes at once on CPU 1; each
# counts its connections. Figures: server CPU µs per handshake
# (utime+stime of the server's processes, /proc, after minus before,
# divided by handshakes), median of RUNS interleaved rounds, ratios of tern
# against each peer and the best peer (bench/table.py).
#
# Usage (one command, on an idle machine, release build first:
#        cargo build --release -p tern):
#   bench/mtls-handshake.sh
#   env: DURATION=10 RUNS=3 PAR=4 KEY=ecdsa|rsa TERN=target/release/tern
#        SERVERS="tern nginx haproxy"
# Needs: nginx (nginx-light), haproxy, openssl, curl, python3, taskset.
# Only 127.0.0.1 is ever a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

bench_defaults "tern nginx haproxy"
PAR="${PAR:-4}"
KEY="${KEY:-ecdsa}"
SRV_POOL=256
SRV_ALPN=http/1.1

for tool in openssl curl python3 taskset nginx; do
    need "$tool"
done

bench_workdir tern-mtls

make_cert "$KEY"
case "$KEY" in
    rsa) key_name="RSA-2048" ;;
    *) key_name="ECDSA P-256" ;;
esac

# --- a client CA and one client certificate per key type ---------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj "/CN=tern bench client CA" -keyout "$work/clientca.key" -out "$work/clientca.pem" 2>/dev/null
client_cert() { # NAME KEY_ARGS...
    local name="$1"
    shift
    openssl req -newkey "$@" -nodes -subj "/CN=bench $name" \
        -keyout "$work/client-$name.key" -out "$work/client-$name.csr" 2>/dev/null
    openssl x509 -req -in "$work/client-$name.csr" -CA "$work/clientca.pem" \
        -CAkey "$work/clientca.key" -CAcreateserial -days 30 \
        -extfile <(printf 'extendedKeyUsage=clientAuth\n') \
        -out "$work/client-$name.pem" 2>/dev/null
}
client_cert ecdsa ec -pkeyopt ec_paramgen_curve:P-256
client_cert rsa rsa:2048

# --- backend on the servers' CPU (strict layout) --------------------------------------
www_backend "$SERVER_CPU"

# handshakes PORT CLIENT: full TLS 1.3 handshakes (+ GET /) completed in
# DURATION seconds by PAR `openssl s_time` on LOAD_CPU, presenting
# client-CLIENT.pem (none for CLIENT=none). Prints "handshakes rate".
handshakes() {
    local port="$1" client="$2" i total=0 out
    local -a cert_args=()
    [[ "$client" == none ]] || cert_args=(-cert "$work/client-$client.pem" -key "$work/client-$client.key")
    for i in $(seq 1 "$PAR"); do
        taskset -c "$LOAD_CPU" openssl s_time -connect "127.0.0.1:$port" -new -tls1_3 \
            -ciphersuites "$TLS_SUITE" -www / -time "$DURATION" "${cert_args[@]}" \
            > "$work/s_time.$i" 2>&1 &
    done
    # In the process substitution the caller reads from: its only children
    # are these s_time processes.
    wait
    for i in $(seq 1 "$PAR"); do
        out="$(awk '/connections in .* real seconds/ {print $1; exit}' "$work/s_time.$i")"
        total=$((total + ${out:-0}))
    done
    echo "$total $(python3 -c "print(f'{$total / $DURATION:.1f}')")"
}
# run_round RESULTS WORKLOAD CLIENT: one measurement per active server.
run_round() {
    local results="$1" workload="$2" client="$3" run="$4" server port pid before after got backend_before
    for server in "${active[@]}"; do
        port="${server_port[$server]}"
        pid="${server_pid[$server]}"
        before="$(cpu_ticks "$pid")"
        backend_before="$(cpu_ticks "$backend_pid")"
        read -r got rate < <(handshakes "$port" "$client")
        after="$(cpu_ticks "$pid")"
        record "$results" "$workload" "$server" "$run" "$got" "$rate" "$before" "$after" 0 \
            $(($(cpu_ticks "$backend_pid") - backend_before))
    done
}

stop_servers() {
    local server
    for server in "${active[@]}"; do
        kill "${server_pid[$server]}" 2>/dev/null || true
        wait "${server_pid[$server]}" 2>/dev/null || true
    done
}

results="$work/results.tsv"
: > "$results"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
floor_us="$(crypto_floor_us "$SERVER_CPU" "$KEY")"

# --- mTLS servers ---------------------------------------------------------------------
SRV_CLIENT_CA="$work/clientca.pem"
# shellcheck disable=SC2086 # SERVERS is a list of words
start_servers "$backend_port" $SERVERS
for server in "${active[@]}"; do
    # Refused without a certificate, served with one.
    # (nginx answers 400 over HTTP instead of refusing the handshake: -f.)
    if curl -sSf -k -o /dev/null "https://127.0.0.1:${server_port[$server]}/" 2>/dev/null; then
        die "$server served a client without a certificate: mTLS is not on"
    fi
    body="$(curl -sS -k --cert "$work/client-ecdsa.pem" --key "$work/client-ecdsa.key" \
        "https://127.0.0.1:${server_port[$server]}/")"
    [[ ${#body} -eq 100 ]] || die "$server did not serve the 100-byte body to a client with a certificate"
done
negotiation_report="$work/negotiation.md"
{
    for server in "${active[@]}"; do
        echo "- $server: $(openssl s_client -connect "127.0.0.1:${server_port[$server]}" -tls1_3 \
            -cert "$work/client-rsa.pem" -key "$work/client-rsa.key" </dev/null 2>/dev/null \
            | awk '/^New, / {v=$2; c=$NF} /^Peer signature type/ {s=$NF} /^Server Temp Key/ {g=$4} END {print v, c, g, "server signature " s}')"
    done
} > "$negotiation_report"
cat "$negotiation_report" >&2
mtls_servers=("${active[@]}")
for run in $(seq 1 "$RUNS"); do
    run_round "$results" mtls-ecdsa ecdsa "$run"
    run_round "$results" mtls-rsa rsa "$run"
done
stop_servers

# --- the same servers without client certificates ----------------------------------------
unset SRV_CLIENT_CA
# shellcheck disable=SC2086
start_servers "$backend_port" $SERVERS
for run in $(seq 1 "$RUNS"); do
    run_round "$results" plain none "$run"
done

# --- report --------------------------------------------------------------------------------
{
    echo "## Full handshakes with client-certificate verification, one worker and the backend on CPU $SERVER_CPU, load on CPU $LOAD_CPU"
    echo
    echo "Negotiated with a client certificate (\`openssl s_client -tls1_3\`; version, suite, group):"
    echo
    cat "$negotiation_report"
    echo
    python3 "$here/table.py" "$results" "$(getconf CLK_TCK)" "$floor_us"
    echo
    echo "Conditions:"
    echo
    echo "- CPU: $(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}'), $(nproc) cores"
    echo "- crypto floor of a server handshake on CPU $SERVER_CPU: ${floor_us} µs ($key_name sign + X25519, \`openssl speed\`); verifying the client's signature and chain comes on top"
    echo "- kernel: $(uname -r); load average before the runs: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
    for server in "${mtls_servers[@]}"; do
        echo "- $server: $(server_version "$server")"
    done
    echo "- tree at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'); $(openssl version)"
    echo "- runs: $RUNS interleaved, ${DURATION}s each; load: $PAR x taskset -c $LOAD_CPU openssl s_time -connect 127.0.0.1:PORT -new -tls1_3 -ciphersuites $TLS_SUITE -www / -time $DURATION [-cert client.pem -key client.key]"
    echo "- server certificate $key_name (self-signed); client certificates ECDSA P-256 and RSA-2048 from one ECDSA P-256 CA (one level, no CRL)"
    echo "- every server: taskset -c $SERVER_CPU, one worker, TLSv1.3 only, $TLS_SUITE, $TLS_GROUP, access log off; client certificate required (configs in bench/lib.sh, SRV_CLIENT_CA)"
    echo "- backend: nginx serving a 100-byte file, one worker on CPU $SERVER_CPU (its CPU is not in the server's figure)"
}
