# shellcheck shell=bash
# Helpers for bench scripts (sourced, not run).

die() {
    echo "bench: $*" >&2
    exit 1
}

need() {
    command -v "$1" >/dev/null 2>&1 || die "$1 is not installed"
}

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

# negotiation PORT: "TLSv1.3 TLS_AES_256_GCM_SHA384 X25519" as seen by an
# X25519-only OpenSSL client.
negotiation() {
    local out
    out="$(openssl s_client -connect "127.0.0.1:$1" -tls1_3 -groups X25519 </dev/null 2>&1)" || true
    local proto cipher group
    proto="$(printf '%s\n' "$out" | awk -F', ' '/^(New|Reused), / {print $2; exit}')"
    cipher="$(printf '%s\n' "$out" | awk '/Cipher is/ {print $NF; exit}')"
    group="$(printf '%s\n' "$out" | awk -F'[:,] *' '/Server Temp Key/ {print $2; exit}')"
    echo "${proto:-?} ${cipher:-?} ${group:-?}"
}

# record FILE WORKLOAD SERVER RUN REQUESTS RATE TICKS_BEFORE TICKS_AFTER ERRORS
record() {
    local file="$1"
    shift
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$file"
    printf 'run %s %-9s %-6s requests=%s rate=%s cpu_ticks=%s errors=%s\n' \
        "$3" "$1" "$2" "$4" "$5" "$(($7 - $6))" "$8" >&2
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
