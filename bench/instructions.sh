#!/usr/bin/env bash
# Instructions tern executes per request, counted by valgrind's callgrind:
# exact and independent of machine load, for A/B work on a shared machine
# (and on VMs without a PMU, where `perf stat -e instructions` says "not
# supported"). Not a speed figure: under valgrind every thread runs
# serialized and slowly; read the count, and the functions that make it.
#
# tern serve (one worker, access log off, TLS 1.3 AES-128-GCM X25519, its
# other defaults, plus ARGS) runs under callgrind in front of nginx serving
# 100 bytes. A warm-up load (WARM requests) fills pools and caches; the
# counters are zeroed; the measured load (N requests) runs; the counters are
# dumped. Both loads are h2load on the same C connections (-c C, -m M
# streams each, --h1 for MODE=h1), so the handshakes of the measured load
# (C of them) are in the count: compare runs with the same N and C.
#
# Usage: bench/instructions.sh [ARGS...]   (env: MODE=h2|h1 N=20000 WARM=2000
#          C=50 M=10 TOP=30 TOML= TERN=target/release/tern)
# e.g.   bench/instructions.sh --request-id-header off
# TOML=FILE: tern reads the same settings from a config file instead
# (bench/lib.sh's tern_config_file) with FILE's lines appended to its
# listener, for rules that exist only in TOML (header rules); ARGS may then
# hold top-level flags only. Rules on vs off, the edge policy's cost:
#        TOML=bench/edge-rules.toml bench/instructions.sh
#        bench/instructions.sh --request-id-header off
# Prints instructions per request and the TOP functions by their own and
# by inclusive count (KEEP=1 keeps the callgrind output for callgrind_annotate).
# Needs: valgrind, nginx, h2load, openssl, python3. Only 127.0.0.1 is a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

MODE="${MODE:-h2}"
N="${N:-20000}"
WARM="${WARM:-2000}"
C="${C:-50}"
M="${M:-10}"
TOP="${TOP:-30}"
TERN="${TERN:-$root/target/release/tern}"
for tool in valgrind callgrind_control callgrind_annotate nginx h2load openssl python3; do need "$tool"; done
[[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"
case "$MODE" in
    h2) SRV_ALPN=h2; load_flags=(-m "$M") ;;
    h1) SRV_ALPN=http/1.1; load_flags=(--h1) ;;
    *) die "MODE must be h2 or h1" ;;
esac

bench_workdir tern-instructions
make_cert ecdsa
mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/index.html"
backend_port="$(free_port)"
start_backend "$backend_port" 0
port="$(free_port)"
if [[ -n "${TOML:-}" ]]; then
    [[ -r "$TOML" ]] || die "TOML=$TOML: no such file"
    tern_config_file "$work/tern.toml" "$backend_port" "$(cat "$TOML")" "127.0.0.1:$port"
    TERN_SERVE_ARGS=(serve --config "$work/tern.toml")
else
    tern_serve_args "$port" "$backend_port"
fi
valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out.%p" \
    "$TERN" "${TERN_SERVE_ARGS[@]}" "$@" 2> "$work/tern.log" &
tern_pid=$!
pids+=("$tern_pid")
# Under valgrind tern starts slowly: up to a minute.
for _ in $(seq 1 60); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2> /dev/null; then break; fi
    sleep 1
done
wait_port "$port" || { cat "$work/tern.log" >&2; die "tern did not listen"; }

load() {
    h2load -n "$1" -c "$C" "${load_flags[@]}" "https://127.0.0.1:$port/" 2>&1
}
out="$(load "$WARM")"
printf '%s\n' "$out" | grep -q "$WARM succeeded" || { printf '%s\n' "$out" >&2; die "warm-up failed"; }
callgrind_control -z "$tern_pid" > /dev/null
out="$(load "$N")"
printf '%s\n' "$out" | grep -q "$N succeeded" || { printf '%s\n' "$out" >&2; die "load failed"; }
callgrind_control -d "$tern_pid" > /dev/null
# The dump lands next to the final one; pick the newest part file.
dump="$(ls -t "$work"/callgrind.out.* | head -1)"
total="$(awk '/^summary:/ {print $2} /^totals:/ {t = $2} END {if (t) print t}' "$dump" | head -1)"
echo "MODE=$MODE N=$N C=$C${M:+ M=$M} args: ${*:-(none)}${TOML:+ config: tern_config_file + $TOML}"
echo "instructions per request: $(python3 -c "print(f'{$total / $N:.0f}')") ($total for $N requests, $C handshakes included)"
echo
echo "Top functions by their own instructions (callgrind_annotate):"
callgrind_annotate "$dump" 2> /dev/null | sed -n '/file:function/,$p' | sed -n "2,$((TOP + 1))p"
echo
echo "Top functions by inclusive instructions:"
callgrind_annotate --inclusive=yes "$dump" 2> /dev/null | sed -n '/file:function/,$p' | sed -n "2,$((TOP + 1))p"
[[ -z "${KEEP:-}" ]] || echo "callgrind output: $dump"
