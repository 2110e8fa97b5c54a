# shellcheck shell=bash disable=SC2154
# (SC2154: work, cert, key, pids, server_port, TERN, SERVER_CPU are the caller's globals.)
# SRV_TERN_ARGS: more `tern serve` arguments (word-split), e.g. --http3.
# SRV_H3=1: every server also serves HTTP/3 on the UDP port of its TLS port
# (tern --http3; nginx `listen ... quic` with quic_gso on; haproxy a quic4@
# bind with limited-quic). NGINX_BIN, HAPROXY_BIN: the terminator binaries
# (default: nginx and haproxy on PATH; Debian's have no QUIC). The backend is
# always the nginx on PATH.
# Helpers for bench scripts (sourced, not run).

die() {
    echo "bench: $*" >&2
    exit 1
}

need() {
    command -v "$1" >/dev/null 2>&1 || die "$1 is not installed"
}

# Per-round counters read from /proc (proc_counters, backend_status, ...).
# shellcheck source=bench/counters.sh
source "$(dirname "${BASH_SOURCE[0]}")/counters.sh"

# wait_port PORT: until 127.0.0.1:PORT accepts (10 s at most).
wait_port() {
    local port="$1"
    for _ in $(seq 1 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.05
    done
    echo "bench: nothing listens on 127.0.0.1:$port" >&2
    return 1
}

# wait_port_slow PORT LOG NAME: like wait_port, for a server under
# valgrind, which starts slowly (up to a minute); prints LOG and dies when
# NAME never listens.
wait_port_slow() {
    local port="$1"
    for _ in $(seq 1 60); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
        sleep 1
    done
    wait_port "$port" || { cat "$2" >&2; die "$3 did not listen"; }
}

# cpu_ticks PID: utime+stime (clock ticks) of PID and its child processes
# (nginx's master and workers). Fields 14 and 15 of /proc/PID/stat; the
# command name (field 2) may hold spaces, so cut after its closing paren.
cpu_ticks() {
    local total=0 pid stat
    for pid in "$1" $(pgrep -P "$1" || true); do
        stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || continue
        stat="${stat##*) }"
        # After the paren: state is field 3, so utime/stime are words 12 and 13.
        read -r -a fields <<< "$stat"
        total=$((total + fields[11] + fields[12]))
    done
    echo "$total"
}

# rss_kib PID: VmRSS of PID and its children (nginx's workers), KiB.
rss_kib() {
    local total=0 pid kib
    for pid in "$1" $(pgrep -P "$1" || true); do
        kib="$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)"
        total=$((total + kib))
    done
    echo "$total"
}

# monotonic_s: seconds on CLOCK_MONOTONIC, the clock of Python's
# time.monotonic() (the flood scripts stamp what they sent with it).
monotonic_s() {
    python3 -c 'import time; print(time.monotonic())'
}

# load_priority: sets LOAD_WRAP and LOAD_PRIORITY_NOTE from LOAD_PRIORITY
# (fifo, the default, or normal). The flood scripts have two CPUs: the
# server's, and one the attacker shares with the well-behaved load. At a
# real-time priority the load generator's own work never waits behind the
# attacker's, so the latency it measures is the server's doing, as when an
# attack comes from other machines; the attacker still gets every cycle the
# load leaves, and each script prints the attack's pace while it measured.
load_priority() {
    case "${LOAD_PRIORITY:-fifo}" in
        fifo)
            if chrt -f 50 true 2> /dev/null; then
                LOAD_WRAP="chrt -f 50"
                LOAD_PRIORITY_NOTE="load at SCHED_FIFO 50 (chrt -f 50) above the attacker on its CPU"
            else
                echo "warning: chrt -f 50 was refused: the load runs at normal priority and waits for CPU behind the attacker" >&2
                LOAD_WRAP=""
                LOAD_PRIORITY_NOTE="load at normal priority, sharing its CPU with the attacker (chrt -f refused)"
            fi
            ;;
        normal)
            LOAD_WRAP=""
            LOAD_PRIORITY_NOTE="load at normal priority, sharing its CPU with the attacker"
            ;;
        *) die "LOAD_PRIORITY must be fifo or normal" ;;
    esac
}

# keepalive_load PORT [BENCH_ARGS...]: "p99_ms failed completed" of LOAD_S
# seconds of keepalive load from `tern bench` (C connections, on LOAD_CPU),
# run under $LOAD_WRAP when set (the flood scripts give it a real-time
# priority there).
keepalive_load() {
    local port="$1"
    shift
    ${LOAD_WRAP:-} taskset -c "$LOAD_CPU" "$TERN" bench "$@" -z "${LOAD_S}s" -c "$C" -k -o json \
        "https://127.0.0.1:$port/" 2> /dev/null |
        python3 -c 'import json,sys; s=json.load(sys.stdin)["targets"][0]["summary"]; print(s["percentiles_ms"]["99"], s["failed"], s["completed"])'
}

# hey_ok, hey_errors, hey_rate (filters of hey's text output on stdin):
# the 200 responses from its status line ("  [200]  N responses"; a
# latency-histogram bucket of 200 reads "[200]" too), the requests under
# "Error distribution" (hey lists failures only there), and Requests/sec.
hey_ok() {
    awk '$1 == "[200]" && $3 == "responses" {print $2; exit}'
}
hey_errors() {
    awk '/^Error distribution/ {e=1} e && /\[[0-9]+\]/ {gsub(/[][]/, "", $1); s+=$1} END {print s+0}'
}
hey_rate() {
    awk '/Requests\/sec/ {print $2; exit}'
}

# record FILE WORKLOAD SERVER RUN REQUESTS RATE TICKS_BEFORE TICKS_AFTER ERRORS BACKEND_TICKS
# [NAME=VALUE...]
# One result row (TSV, read by table.py); a progress line on stderr. Fields
# after the ninth are NAME=VALUE counters of the round (bench/h2.sh), added
# at the end of the row and of the progress line.
record() {
    local file="$1"
    shift
    local row extra=""
    [[ $# -gt 9 ]] && extra="$(printf ' %s' "${@:10}" | tr '\t' ' ')"
    printf -v row '%s\t' "$@"
    printf '%s\n' "${row%$'\t'}" >> "$file"
    printf 'run %s %-9s %-7s requests=%s rate=%s cpu_ticks=%s errors=%s backend_ticks=%s%s\n' \
        "$3" "$1" "$2" "$4" "$5" "$(($7 - $6))" "$8" "$9" "$extra" >&2
}

# crypto_floor_us CPU KEY: µs of one signature (KEY=ecdsa: P-256, rsa: RSA-2048)
# plus one X25519 on CPU, from `openssl speed`: the least CPU a full handshake
# can cost a server.
crypto_floor_us() {
    local cpu="$1" key="$2" sign_alg out
    case "$key" in
        rsa) sign_alg=rsa2048 ;;
        *) sign_alg=ecdsap256 ;;
    esac
    out="$(taskset -c "$cpu" openssl speed -seconds 2 "$sign_alg" ecdhx25519 2>/dev/null)"
    printf '%s\n' "$out" | awk '
        /^rsa 2048 bits/ { sign = 1e6 / $6 }
        /ecdsa \(nistp256\)/ { sign = 1e6 / $(NF - 1) }
        /ecdh \(X25519\)/ { kx = 1e6 / $NF }
        END { printf "%.0f\n", sign + kx }'
}

# free_port: a TCP port on 127.0.0.1 that nothing listens on right now.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# tls_params PORT OFFER [ALPN]: "TLSv1.3 TLS_AES_128_GCM_SHA256 X25519 ECDSA-256
# alpn=h2" as negotiated by `openssl s_client` offering:
#   default  what an OpenSSL 3 client offers by default, as wrk and h2load do
#   others   TLS 1.2 and 1.3, AES-256-GCM and ChaCha20 before AES-128-GCM,
#            P-256 before X25519: a server that still answers with the pinned
#            suite and group is pinned, whatever the client prefers.
tls_params() {
    local port="$1" offer="$2" alpn="${3:-}" out
    local args=(-connect "127.0.0.1:$port" -servername localhost)
    [[ "$offer" == others ]] && args+=(-groups P-256:X25519
        -ciphersuites TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256)
    [[ -n "$alpn" ]] && args+=(-alpn "$alpn")
    # tr: an h2 server's first frames reach stdout as binary.
    out="$(openssl s_client "${args[@]}" </dev/null 2>&1 | tr -d '\0')" || true
    printf '%s\n' "$out" | awk -F'[:,] *' '
        /^(New|Reused), / { proto = $2; cipher = $NF }
        /Server Temp Key/ { group = $2 }
        /Peer signature type/ { sig = $2 }
        /Server public key is/ { split($0, w, " "); bits = w[5] }
        /ALPN protocol:/ { alpn = $2 }
        /No ALPN negotiated/ { alpn = "none" }
        END {
            sub(/^Cipher is /, "", cipher); sub(/^RSA-PSS$/, "RSA", sig)
            printf "%s %s %s %s-%s alpn=%s\n", proto ? proto : "?", cipher ? cipher : "?",
                group ? group : "?", sig ? sig : "?", bits ? bits : "?", alpn ? alpn : "?"
        }'
}

# check_negotiation ALPN SERVER...: prints, for each server (ports from the
# global associative array server_port), what a default OpenSSL client and a
# client preferring other parameters negotiated; returns 1 and warns loudly on
# stderr and stdout when a server negotiated anything but EXPECTED_TLS or the
# servers differ.
check_negotiation() {
    local alpn="$1" server first="" bad=0 seen plain others
    shift
    for server in "$@"; do
        plain="$(tls_params "${server_port[$server]}" default "$alpn")"
        others="$(tls_params "${server_port[$server]}" others "$alpn")"
        echo "- $server: $plain (default OpenSSL client); $others (client preferring AES-256-GCM, P-256)"
        for seen in "$plain" "$others"; do
            [[ "$seen" == "$EXPECTED_TLS "* ]] || bad=1
        done
        # The certificate type must match too; the ALPN answer of hitch (an
        # L4 terminator) is compared like the rest.
        [[ -z "$first" ]] && first="$plain"
        [[ "$plain" == "$first" ]] || bad=1
    done
    if [[ $bad -ne 0 ]]; then
        local banner="!!!!!!!! WARNING: the servers did NOT all negotiate $EXPECTED_TLS with the same key type and ALPN: their figures are not comparable !!!!!!!!"
        echo
        echo "$banner"
        echo "$banner" >&2
        return 1
    fi
}

# --- servers under test -------------------------------------------------------
# Every server gets the same conditions: one worker (process or thread) pinned
# to SERVER_CPU, the same certificate, TLS 1.3 only with one suite and one
# group, access logs off, the same forwarding fields added (an L4 terminator,
# hitch, adds none). The pinned parameters:
TLS_SUITE=TLS_AES_128_GCM_SHA256
TLS_GROUP=X25519
EXPECTED_TLS="TLSv1.3 $TLS_SUITE $TLS_GROUP"

# Knobs read by start_backend and start_server (set them before calling):
#   SRV_MAX_CONNS  connections a server must hold at once      (default 4096)
#   SRV_IDLE_S     idle keepalive timeout in seconds            (default 60)
#   SRV_POOL       idle backend connections nginx keeps         (default 256)
#                  (tern's pool follows demand: tern gets no tuning)
#   SRV_ALPN       "http/1.1" or "h2" (h2 and http/1.1 offered) (default http/1.1)
#   SRV_CLIENT_CA  PEM of CAs: require a client certificate they issued
#                  (tern --client-auth required, nginx ssl_verify_client on,
#                  haproxy verify required; hitch cannot and refuses to start)
#   SRV_MODERN     1: instead of TLS 1.3 with the pinned suite and group, the
#                  "modern" policy every server can hold: TLS 1.2 and 1.3,
#                  every ECDHE AEAD suite, groups X25519, P-256, P-384
#                  (bench/tlsfuzzer.sh)
# and the globals: work (scratch folder), SERVER_CPU, TERN (for tern),
# cert, key (PEM paths), pids (array of started PIDs, killed on exit).

# srv_policy: the TLS policy of start_server in each server's words, from
# SRV_MODERN: pol_openssl_versions (nginx), pol_min_ver (haproxy),
# pol_suites (TLS 1.3, OpenSSL), pol_ciphers12 (TLS 1.2, OpenSSL; empty:
# none), pol_groups (OpenSSL), pol_tern (tern's flags).
srv_policy() {
    if [[ -n "${SRV_MODERN:-}" ]]; then
        pol_openssl_versions="TLSv1.2 TLSv1.3"
        pol_min_ver=TLSv1.2
        pol_suites=TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256
        pol_ciphers12=ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305
        pol_groups=X25519:P-256:P-384
        # tern's default versions and suites are that policy already.
        pol_tern=(--groups X25519,secp256r1,secp384r1)
    else
        pol_openssl_versions=TLSv1.3
        pol_min_ver=TLSv1.3
        pol_suites=$TLS_SUITE
        pol_ciphers12=""
        pol_groups=$TLS_GROUP
        pol_tern=(--tls-versions TLSv1.3 --ciphers "$TLS_SUITE" --groups "$TLS_GROUP")
    fi
}

# make_cert KEY: a self-signed certificate for localhost/127.0.0.1 in
# $work/cert.pem, $work/key.pem (and $work/both.pem for haproxy and hitch).
# KEY: ecdsa (P-256) or rsa (2048).
make_cert() {
    local key_args
    case "$1" in
        ecdsa) key_args=(-newkey ec -pkeyopt ec_paramgen_curve:P-256) ;;
        rsa) key_args=(-newkey rsa:2048) ;;
        *) die "KEY must be ecdsa or rsa" ;;
    esac
    openssl req -x509 "${key_args[@]}" -nodes -days 30 \
        -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
        -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
    cat "$work/cert.pem" "$work/key.pem" > "$work/both.pem"
    cert="$work/cert.pem"
    key="$work/key.pem"
}

# bench_defaults SERVERS [BACKEND_CPU]: the settings every comparison
# script takes from the environment, with their defaults (DURATION=10
# seconds, RUNS=3, the release tern, the servers compared), and the strict
# layout: servers on CPU 0, load on CPU 1.
bench_defaults() {
    DURATION="${DURATION:-10}"
    RUNS="${RUNS:-3}"
    TERN="${TERN:-$root/target/release/tern}"
    SERVERS="${SERVERS:-$1}"
    BACKEND_CPU="${BACKEND_CPU:-${2:-load}}"
    SERVER_CPU=0
    LOAD_CPU=1
}

# quic_new_conn_defaults [TOOL...]: the settings of the scripts that set a
# new QUIC connection against a new TCP+TLS one through one tern
# (bench_defaults' layout, the backend on the server's CPU, the load from
# BENCH_TERN, TLS 1.3 AES-128-GCM X25519, tern serving HTTP/3 too), with
# nginx, openssl, python3, taskset and each TOOL checked for.
quic_new_conn_defaults() {
    bench_defaults tern server
    BENCH_TERN="${BENCH_TERN:-$TERN}"
    TLS_SUITE=TLS_AES_128_GCM_SHA256
    TLS_GROUP=X25519
    SRV_H3=1
    local tool
    for tool in nginx openssl python3 taskset "$@"; do need "$tool"; done
    [[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"
}

# nginx_main DIR ERROR_LOG CONNECTIONS: the main context every nginx here
# starts with: one worker in the foreground, run as root (it reads the
# scratch folder), pid file in DIR.
nginx_main() {
    printf '%s\n' "user root;" "worker_processes 1;" "daemon off;" "pid $1/nginx.pid;" \
        "error_log $2 warn;" "events { worker_connections $3; }"
}

# started PORT LOG: keeps the server just started in the background ($!)
# as STARTED_PID (stopped at exit) and waits until PORT listens; prints LOG
# when it never does.
started() {
    STARTED_PID=$!
    pids+=("$STARTED_PID")
    wait_port "$1" || { cat "$2" >&2; return 1; }
}

# www_backend CPU: a 100-byte index.html in $work/www, served by
# start_backend on a free port pinned to CPU. Sets backend_port and
# backend_pid.
www_backend() {
    mkdir -p "$work/www"
    head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/index.html"
    backend_port="$(free_port)"
    start_backend "$backend_port" "$1"
    backend_pid=$STARTED_PID
}

# The lines every nginx `http` block here starts with: no access log,
# temporary files under DIR/tmp, keepalive connections never closed for
# their request count.
nginx_http_common() {
    local dir="$1"
    printf '    %s\n' "access_log off;" \
        "client_body_temp_path $dir/tmp;" "proxy_temp_path $dir/tmp;" \
        "fastcgi_temp_path $dir/tmp;" "uwsgi_temp_path $dir/tmp;" \
        "scgi_temp_path $dir/tmp;" "keepalive_requests 1000000;"
}

# start_backend PORT CPU: nginx serving $work/www on 127.0.0.1:PORT, one
# worker pinned to CPU. Sets STARTED_PID.
start_backend() {
    local port="$1" cpu="$2" dir="$work/backend"
    mkdir -p "$dir/tmp"
    cat > "$dir/nginx.conf" <<CONF
$(nginx_main "$dir" "$dir/error.log" $((${SRV_MAX_CONNS:-4096} + 1024)))
http {
$(nginx_http_common "$dir")
    keepalive_timeout ${SRV_IDLE_S:-60}s;
    server {
        listen 127.0.0.1:$port backlog=4096;
        root $work/www;
        location / { index index.html; }
        # Connections accepted and open (backend_status): what the server
        # in front opened, with no tracer on it.
        location = /bench-status { stub_status; }
    }
}
CONF
    taskset -c "$cpu" nginx -e "$dir/error.log" -c "$dir/nginx.conf" &
    started "$port" "$dir/error.log"
}

# hitch_conf FILE PORT BACKEND_PORT: a hitch configuration (one worker,
# the pinned TLS parameters, $work/both.pem) in FILE.
hitch_conf() {
    # hitch refuses to run as root; it reads the key before dropping to nobody.
    cat > "$1" <<CONF
frontend = "[127.0.0.1]:$2"
backend = "[127.0.0.1]:$3"
pem-file = "$work/both.pem"
workers = 1
backlog = 4096
user = "nobody"
daemon = off
tls-protos = TLSv1.3
ciphersuites = "$TLS_SUITE"
ecdh-curve = "$TLS_GROUP"
alpn-protos = "http/1.1"
log-level = 1
CONF
}

# haproxy_conf FILE PORT BACKEND_PORT: start_server's haproxy configuration
# (one thread, the SRV_* settings and srv_policy's TLS, X-Forwarded-For and
# -Proto, backend connections reused), for a caller that runs haproxy itself
# (bench/instructions.sh, under callgrind). Needs srv_policy run first.
haproxy_conf() {
    local port="$2" backend="$3"
    local conns="${SRV_MAX_CONNS:-4096}" idle="${SRV_IDLE_S:-60}"
    local alpn="${SRV_ALPN:-http/1.1}" dir
    dir="$(dirname "$1")"
    local hap_alpn=http/1.1 quic_global="" quic_bind=""
    [[ "$alpn" == h2 ]] && hap_alpn=h2,http/1.1
    if [[ -n "${SRV_H3:-}" ]]; then
        # limited-quic: QUIC over OpenSSL's own TLS (no 0-RTT).
        quic_global="limited-quic"
        quic_bind="bind quic4@127.0.0.1:$port ssl crt $work/both.pem alpn h3 ssl-min-ver TLSv1.3 ciphersuites $TLS_SUITE curves $TLS_GROUP"
    fi
    # maxconn: haproxy wants two descriptors per connection (client and
    # server side) under the open-file limit; "no strict-limits" lets it
    # run when idle connections (one descriptor each) need more than half.
    cat > "$1" <<CONF
global
    nbthread 1
    $quic_global
    ${SRV_HAPROXY_EXPOSE_FDS:+stats socket $dir/stats.sock mode 600 level admin expose-fd listeners}
    maxconn $((conns + 1024))
    no strict-limits
defaults
    mode http
    timeout connect 5s
    timeout client ${idle}s
    timeout server ${idle}s
    timeout http-keep-alive ${idle}s
    timeout http-request 10s
    http-reuse always
frontend fe
    bind 127.0.0.1:$port ssl crt $work/both.pem alpn $hap_alpn ssl-min-ver $pol_min_ver ciphersuites $pol_suites curves $pol_groups${pol_ciphers12:+ ciphers $pol_ciphers12}${SRV_CLIENT_CA:+ ca-file $SRV_CLIENT_CA verify required}
    $quic_bind
    option forwardfor
    http-request set-header X-Forwarded-Proto https
    default_backend be
backend be
    server s1 127.0.0.1:$backend
CONF
}

# start_server NAME PORT BACKEND_PORT: start tern, nginx, haproxy or hitch on
# 127.0.0.1:PORT in front of 127.0.0.1:BACKEND_PORT, pinned to SERVER_CPU.
# Sets STARTED_PID (the process whose children are counted too); returns 1,
# with the server's log on stderr, if it does not listen.
# tern_serve_args PORT BACKEND_PORT: the arguments start_server gives
# `tern serve` (same SRV_* settings), in the array TERN_SERVE_ARGS.
tern_serve_args() {
    local port="$1" backend="$2"
    local conns="${SRV_MAX_CONNS:-4096}" idle="${SRV_IDLE_S:-60}"
    local tern_alpn=http/1.1
    [[ "${SRV_ALPN:-http/1.1}" == h2 ]] && tern_alpn=h2,http/1.1
    local -a extra=()
    read -r -a extra <<< "${SRV_TERN_ARGS:-}${SRV_H3:+ --http3}${SRV_CLIENT_CA:+ --client-auth required --client-ca $SRV_CLIENT_CA}"
    srv_policy
    TERN_SERVE_ARGS=(serve --listen "127.0.0.1:$port"
        --backend "127.0.0.1:$backend" --cert "$cert" --key "$key"
        --workers 1 --access-log off
        "${pol_tern[@]}" --alpn "$tern_alpn"
        --forwarded x-forwarded-for,x-forwarded-proto
        --max-connections "$((conns + 1024))"
        --idle-timeout "${idle}s" --backend-response-timeout "${idle}s"
        "${extra[@]}")
}

# tern_config_file FILE BACKEND_PORT EXTRA LISTEN...: writes FILE, a `tern
# serve --config` file with the listener settings tern_serve_args gives as
# flags (same SRV_* variables, SRV_H3 included; SRV_TERN_ARGS does not apply: with --config
# tern refuses listener flags), one [[listener]] table per LISTEN address,
# each ending with EXTRA (TOML lines of that listener: edge rules, its
# [listener.response_headers] table...). For settings that exist only in
# TOML (header rules), e.g. bench/edge-rules.toml.
tern_config_file() {
    local file="$1" backend="$2" extra="$3" listen
    local conns="${SRV_MAX_CONNS:-4096}" idle="${SRV_IDLE_S:-60}"
    local alpn='"http/1.1"'
    [[ "${SRV_ALPN:-http/1.1}" == h2 ]] && alpn='"h2", "http/1.1"'
    shift 3
    printf 'workers = 1\naccess_log = "off"\n' > "$file"
    for listen in "$@"; do
        cat >> "$file" <<TOML
[[listener]]
listen = "$listen"
backends = ["127.0.0.1:$backend"]
cert = "$cert"
key = "$key"
tls_versions = ["TLSv1.3"]
ciphers = ["$TLS_SUITE"]
groups = ["$TLS_GROUP"]
alpn = [$alpn]
forwarded = ["x-forwarded-for", "x-forwarded-proto"]
max_connections = $((conns + 1024))
idle_timeout = "${idle}s"
backend_response_timeout = "${idle}s"
${SRV_H3:+http3 = true}
$extra
TOML
    done
}

start_server() {
    local name="$1" port="$2" backend="$3" dir="$work/$1"
    local conns="${SRV_MAX_CONNS:-4096}" idle="${SRV_IDLE_S:-60}" pool="${SRV_POOL:-256}"
    local alpn="${SRV_ALPN:-http/1.1}"
    mkdir -p "$dir/tmp"
    srv_policy
    case "$name" in
        tern)
            [[ -x "$TERN" ]] || { echo "tern: no binary at $TERN (cargo build --release -p tern)" >&2; return 1; }
            tern_serve_args "$port" "$backend"
            taskset -c "$SERVER_CPU" "$TERN" "${TERN_SERVE_ARGS[@]}" 2> "$dir/log" &
            ;;
        nginx)
            local h2="" h3_listen=""
            [[ "$alpn" == h2 ]] && h2=" http2"
            [[ -n "${SRV_H3:-}" ]] && h3_listen="listen 127.0.0.1:$port quic reuseport; quic_gso on;"
            cat > "$dir/nginx.conf" <<CONF
$(nginx_main "$dir" "$dir/log" $((conns + 1024)))
http {
$(nginx_http_common "$dir")
    keepalive_timeout ${idle}s;
    upstream backend {
        server 127.0.0.1:$backend;
        keepalive $pool;
    }
    server {
        listen 127.0.0.1:$port ssl$h2 backlog=4096;
        $h3_listen
        ssl_certificate $cert;
        ssl_certificate_key $key;
        ssl_protocols $pol_openssl_versions;
        ssl_ecdh_curve $pol_groups;
        ssl_conf_command Ciphersuites $pol_suites;
        ${pol_ciphers12:+ssl_ciphers $pol_ciphers12;}
        ssl_session_cache shared:SSL:10m;
        ${SRV_CLIENT_CA:+ssl_client_certificate $SRV_CLIENT_CA; ssl_verify_client on;}
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_read_timeout ${idle}s;
            proxy_set_header Connection "";
            proxy_set_header X-Forwarded-For \$remote_addr;
            proxy_set_header X-Forwarded-Proto https;
        }
    }
}
CONF
            taskset -c "$SERVER_CPU" "${NGINX_BIN:-nginx}" -e "$dir/log" -c "$dir/nginx.conf" &
            ;;
        haproxy)
            haproxy_conf "$dir/haproxy.cfg" "$port" "$backend"
            # SRV_HAPROXY_MASTER=1: master-worker mode (-W), which reloads on SIGUSR2.
            taskset -c "$SERVER_CPU" "${HAPROXY_BIN:-haproxy}" ${SRV_HAPROXY_MASTER:+-W} -f "$dir/haproxy.cfg" -db 2> "$dir/log" &
            ;;
        hitch)
            [[ "$alpn" == http/1.1 ]] || { echo "hitch: an L4 terminator in front of an HTTP/1.1 backend cannot serve h2; skipped" >&2; return 1; }
            [[ -z "${SRV_CLIENT_CA:-}" ]] || { echo "hitch: no client-certificate verification; skipped" >&2; return 1; }
            [[ -z "${SRV_MODERN:-}" ]] || { echo "hitch: SRV_MODERN is not written for hitch; skipped" >&2; return 1; }
            hitch_conf "$dir/hitch.conf" "$port" "$backend"
            taskset -c "$SERVER_CPU" hitch --config="$dir/hitch.conf" 2> "$dir/log" > /dev/null &
            ;;
        *)
            echo "unknown server $name (tern, nginx, haproxy, hitch)" >&2
            return 1
            ;;
    esac
    started "$port" "$dir/log"
}

# quic_capable NAME: whether server NAME can serve HTTP/3 here (tern
# always; nginx and haproxy only as QUIC builds, NGINX_BIN and HAPROXY_BIN:
# Debian's have none); says why not on stderr.
quic_capable() {
    case "$1" in
        nginx) [[ "$("${NGINX_BIN:-nginx}" -V 2>&1)" == *--with-http_v3_module* ]] ||
            { echo "nginx (${NGINX_BIN:-nginx}) has no HTTP/3 module; skipped (set NGINX_BIN)" >&2; return 1; } ;;
        haproxy) [[ "$("${HAPROXY_BIN:-haproxy}" -vv 2>&1)" == *+QUIC* ]] ||
            { echo "haproxy (${HAPROXY_BIN:-haproxy}) was built without QUIC; skipped (set HAPROXY_BIN)" >&2; return 1; } ;;
        hitch) echo "hitch has no HTTP/3; skipped" >&2; return 1 ;;
    esac
}

# server_version NAME: one line naming the server's version and TLS library.
server_version() {
    case "$1" in
        tern) echo "$("$TERN" --version 2>/dev/null || echo 'tern ?') (rustls, aws-lc-rs), binary $TERN built $(date -u -r "$TERN" +%FT%TZ)" ;;
        nginx) echo "$("${NGINX_BIN:-nginx}" -v 2>&1 | sed 's/^nginx version: //') ($("${NGINX_BIN:-nginx}" -V 2>&1 | awk '/built with OpenSSL/ {print "OpenSSL " $4; exit}'))" ;;
        haproxy) echo "haproxy $("${HAPROXY_BIN:-haproxy}" -v 2>&1 | awk 'NR==1 {print $3}') ($("${HAPROXY_BIN:-haproxy}" -vv 2>&1 | awk -F' : ' '/^Running on (OpenSSL|SSL library) version/ {print $2; exit}' | awk '{print $1, $2}'))" ;;
        hitch) echo "$(hitch --version 2>&1 | head -1) ($(openssl version | awk '{print $1, $2}') at run time)" ;;
        *) echo "$1 ?" ;;
    esac
}

# start_fault_origin: bench/fault_origin.py on a free port ($origin_port)
# of CPU $SERVER_CPU, stopped with the rest at exit.
start_fault_origin() {
    origin_port="$(free_port)"
    taskset -c "$SERVER_CPU" python3 "$(dirname "${BASH_SOURCE[0]}")/fault_origin.py" "$origin_port" > "$work/origin.out" &
    pids+=($!)
    wait_port "$origin_port"
}

# pids_of PID: PID and its children (nginx's and hitch's workers).
pids_of() {
    # shellcheck disable=SC2046 # a list of PIDs
    echo "$1" $(pgrep -P "$1" || true)
}

# switches PID...: "voluntary nonvoluntary" context switches of every
# thread of the PIDs.
switches() {
    local pid v=0 n=0 a b
    for pid in "$@"; do
        for status in /proc/"$pid"/task/*/status; do
            read -r a b < <(awk '/^voluntary_ctxt_switches/ {v=$2} /^nonvoluntary_ctxt_switches/ {n=$2} END {print v+0, n+0}' "$status" 2>/dev/null || echo "0 0")
            v=$((v + a))
            n=$((n + b))
        done
    done
    echo "$v $n"
}

# bench_workdir NAME: a scratch folder $work (/tmp/NAME.XXXXXX) and the list
# $pids of processes to stop; at exit every one of them is killed and the
# folder removed (KEEP=1 keeps it and says where).
bench_workdir() {
    work="$(mktemp -d "/tmp/$1.XXXXXX")"
    pids=()
    trap bench_cleanup EXIT
}

bench_cleanup() {
    local pid
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    if [[ -z "${KEEP:-}" ]]; then rm -rf "$work"; else echo "kept $work" >&2; fi
}

# start_servers BACKEND_PORT SERVER...: starts each server that is
# installed on its own free port in front of 127.0.0.1:BACKEND_PORT; fills
# server_port[NAME], server_pid[NAME] and active (the servers that listen);
# dies when none does.
start_servers() {
    local backend="$1" server
    shift
    declare -gA server_pid=() server_port=()
    active=()
    for server in "$@"; do
        local bin="$server"
        [[ "$server" == nginx ]] && bin="${NGINX_BIN:-nginx}"
        [[ "$server" == haproxy ]] && bin="${HAPROXY_BIN:-haproxy}"
        if [[ "$server" != tern ]] && ! command -v "$bin" >/dev/null 2>&1; then
            echo "$server is not installed; skipped" >&2
            continue
        fi
        server_port[$server]="$(free_port)"
        if start_server "$server" "${server_port[$server]}" "$backend"; then
            # shellcheck disable=SC2034 # read by the scripts that source this
            server_pid[$server]=$STARTED_PID
            active+=("$server")
        else
            echo "$server did not start; skipped" >&2
        fi
    done
    [[ ${#active[@]} -gt 0 ]] || die "no server started"
}

# grpc_server_cmd NAME PORT BACKEND_PORT: writes NAME's config (tern, nginx
# or haproxy) in $work/NAME for gRPC on 127.0.0.1:PORT in front of an h2c
# gRPC server on 127.0.0.1:BACKEND_PORT, and sets GRPC_CMD to the command
# that runs it in the foreground (the caller adds taskset or valgrind):
# one worker, TLS 1.3 $TLS_SUITE $TLS_GROUP only, ALPN h2, access logs off,
# HTTP/2 over cleartext to the backend with connections kept (tern
# `protocol = "h2c"`, nginx `grpc_pass grpc://` with upstream keepalive,
# haproxy `proto h2`), tern's request IDs off (nginx and haproxy make
# none). The layout of bench/grpc.sh and bench/grpc-instructions.sh.
grpc_server_cmd() {
    local name="$1" port="$2" backend="$3" dir="$work/$1"
    mkdir -p "$dir/tmp"
    case "$name" in
        tern)
            [[ -x "$TERN" ]] || { echo "tern: no binary at $TERN (cargo build --release -p tern)" >&2; return 1; }
            cat > "$dir/tern.toml" <<TOML
workers = 1
access_log = "off"
[[upstream]]
name = "grpc"
protocol = "h2c"
servers = ["127.0.0.1:$backend"]
[[listener]]
listen = "127.0.0.1:$port"
upstream = "grpc"
cert = "$cert"
key = "$key"
tls_versions = ["TLSv1.3"]
ciphers = ["$TLS_SUITE"]
groups = ["$TLS_GROUP"]
alpn = ["h2"]
request_id_header = "off"
idle_timeout = "60s"
backend_response_timeout = "60s"
TOML
            GRPC_CMD=("$TERN" serve --config "$dir/tern.toml")
            ;;
        nginx)
            cat > "$dir/nginx.conf" <<CONF
$(nginx_main "$dir" "$dir/log" 4096)
http {
$(nginx_http_common "$dir")
    upstream grpc {
        server 127.0.0.1:$backend;
        keepalive 512;
    }
    server {
        listen 127.0.0.1:$port ssl http2 backlog=4096;
        ssl_certificate $cert;
        ssl_certificate_key $key;
        ssl_protocols TLSv1.3;
        ssl_ecdh_curve $TLS_GROUP;
        ssl_conf_command Ciphersuites $TLS_SUITE;
        location / {
            grpc_pass grpc://grpc;
            grpc_read_timeout 60s;
        }
    }
}
CONF
            GRPC_CMD=("${NGINX_BIN:-nginx}" -e "$dir/log" -c "$dir/nginx.conf")
            ;;
        haproxy)
            cat > "$dir/haproxy.cfg" <<CONF
global
    nbthread 1
    maxconn 4096
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    http-reuse always
frontend fe
    bind 127.0.0.1:$port ssl crt $work/both.pem alpn h2 ssl-min-ver TLSv1.3 ciphersuites $TLS_SUITE curves $TLS_GROUP
    default_backend be
backend be
    server s1 127.0.0.1:$backend proto h2
CONF
            GRPC_CMD=("${HAPROXY_BIN:-haproxy}" -f "$dir/haproxy.cfg" -db)
            ;;
        *)
            echo "unknown server $name (tern, nginx, haproxy)" >&2
            return 1
            ;;
    esac
}
