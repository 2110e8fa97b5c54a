#!/usr/bin/env bash
# The training load of a profile-guided (PGO) build of tern: an instrumented
# `tern serve` (built with -Cprofile-generate, bench/pgo-build.sh) answers
# every protocol and plan the benchmarks measure, then stops on SIGTERM
# (so the LLVM runtime writes its .profraw at exit), and the raw profiles
# are merged into one .profdata for -Cprofile-use.
#
# The server: one worker, TLS 1.3 AES-128-GCM X25519, h2 and http/1.1 by
# ALPN, --http3, in front of nginx serving 100 B (/100) and 1 MiB (/1m),
# its other settings the defaults (bench/lib.sh's tern_serve_args). The
# loads, in turn, each bounded in requests and in time (LOAD_TIMEOUT
# seconds), loopback only, by `tern bench` (BENCH_TERN, an ordinary release
# binary: the client is not trained) and, when installed, h2load (the
# client of bench/instructions.sh and bench/h2.sh):
#   HTTP/1.1 keepalive, new connection per request, resumed; HTTP/2
#   multiplexed (10 streams) keepalive and new; HTTP/3 keepalive,
#   multiplexed, new and resumed; 1 MiB over HTTP/1.1, HTTP/2, HTTP/3.
# SCALE multiplies every request count (default 1: ~25,000 requests, a few
# minutes under the instrumented binary on a loaded 2-core host). A load
# with failed requests is reported and the training goes on (the profile
# still counts what ran); a load that times out is stopped.
#
# Usage: bench/pgo-train.sh INSTRUMENTED_TERN OUT.profdata
#          (env: BENCH_TERN=target/release/tern SCALE=1 LOAD_TIMEOUT=180
#           LLVM_PROFDATA=... (default: the one of rustc's llvm-tools))
# Needs: nginx, openssl, python3, llvm-tools (rustup component add
# llvm-tools); h2load optional.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

[[ $# -eq 2 ]] || die "usage: bench/pgo-train.sh INSTRUMENTED_TERN OUT.profdata"
TERN="$1"
OUT="$2"
BENCH_TERN="${BENCH_TERN:-$root/target/release/tern}"
SCALE="${SCALE:-1}"
LOAD_TIMEOUT="${LOAD_TIMEOUT:-180}"
LLVM_PROFDATA="${LLVM_PROFDATA:-$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | awk '/^host:/ {print $2}')/bin/llvm-profdata}"
for tool in nginx openssl python3 timeout; do need "$tool"; done
[[ -x "$TERN" ]] || die "no tern binary at $TERN"
[[ -x "$BENCH_TERN" ]] || die "no tern binary at $BENCH_TERN (BENCH_TERN)"
[[ -x "$LLVM_PROFDATA" ]] || die "no llvm-profdata at $LLVM_PROFDATA (rustup component add llvm-tools)"
# An instrumented binary carries the profile runtime's symbols.
grep -q __llvm_profile_write_file "$TERN" ||
    die "$TERN is not instrumented (build it with RUSTFLAGS=-Cprofile-generate=DIR)"

bench_workdir tern-pgo-train
make_cert ecdsa
mkdir -p "$work/www" "$work/profraw"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/100"
head -c $((1024 * 1024)) /dev/zero | tr '\0' 'x' > "$work/www/1m"
backend_port="$(free_port)"
start_backend "$backend_port" 0
port="$(free_port)"
SRV_ALPN=h2
SRV_H3=1
tern_serve_args "$port" "$backend_port"
# %p: one file per process; the workers are threads of this one.
LLVM_PROFILE_FILE="$work/profraw/tern-%p.profraw" "$TERN" "${TERN_SERVE_ARGS[@]}" 2> "$work/tern.log" &
tern_pid=$!
pids+=("$tern_pid")
wait_port_slow "$port" "$work/tern.log" tern

# bench_load NAME COUNT CONNS PATH [tern bench flags...]
bench_load() {
    local name="$1" count=$(($2 * SCALE)) conns="$3" path="$4" start
    shift 4
    start="$(monotonic_s)"
    timeout "$LOAD_TIMEOUT" "$BENCH_TERN" bench "$@" -n "$count" -c "$conns" -k \
        --ciphers "$TLS_SUITE" --groups "$TLS_GROUP" --no-progress -o json \
        "https://127.0.0.1:$port/$path" > "$work/load.json" 2> "$work/load.err" || true
    python3 - "$work/load.json" "$name" "$count" "$start" "$(monotonic_s)" <<'PY'
import json, sys
name, count, start, end = sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
try:
    s = json.load(open(sys.argv[1]))["targets"][0]["summary"]
    done = f"{s['completed']} completed, {s['failed']} failed"
except (OSError, ValueError, KeyError, IndexError) as e:
    done = f"no report ({e}): timed out or failed"
print(f"{name:<34} {count:>6} requests: {done} ({end - start:.0f} s)")
PY
}

# h2load NAME COUNT CONNS STREAMS [h2load flags...]
h2load_run() {
    local name="$1" count=$(($2 * SCALE)) conns="$3" streams="$4" out
    shift 4
    out="$(timeout "$LOAD_TIMEOUT" h2load -n "$count" -c "$conns" -m "$streams" "$@" \
        "https://127.0.0.1:$port/100" 2>&1 || true)"
    printf '%-34s %6s requests: %s\n' "$name" "$count" \
        "$(printf '%s\n' "$out" | grep '^requests:' || echo 'no summary: timed out or failed')"
}

echo "training $TERN ($("$TERN" --version 2>/dev/null || echo '?')); load: $BENCH_TERN bench, SCALE=$SCALE"
bench_load "HTTP/1.1 keepalive 100 B" 4000 20 100
bench_load "HTTP/1.1 new connection 100 B" 800 10 100 --plan new
bench_load "HTTP/1.1 resumed 100 B" 800 10 100 --plan resumed
bench_load "HTTP/2 keepalive 10 streams 100 B" 4000 20 100 --h2 --streams 10
bench_load "HTTP/2 new connection 100 B" 300 10 100 --h2 --plan new
bench_load "HTTP/3 keepalive 100 B" 4000 20 100 --h3
bench_load "HTTP/3 keepalive 10 streams 100 B" 2000 10 100 --h3 --streams 10
bench_load "HTTP/3 new connection 100 B" 800 10 100 --h3 --plan new
bench_load "HTTP/3 resumed 100 B" 400 10 100 --h3 --plan resumed
bench_load "HTTP/1.1 keepalive 1 MiB" 150 8 1m
bench_load "HTTP/2 keepalive 1 MiB" 150 8 1m --h2
bench_load "HTTP/3 keepalive 1 MiB" 100 8 1m --h3
if command -v h2load > /dev/null; then
    h2load_run "h2load HTTP/2 -m 10 100 B" 4000 50 10
    h2load_run "h2load HTTP/1.1 100 B" 2000 20 1 --h1
fi

kill -TERM "$tern_pid"
# The profile is written as tern's main returns, after its shutdown grace.
for _ in $(seq 1 600); do
    [[ -d "/proc/$tern_pid" ]] || break
    sleep 0.1
done
[[ -d "/proc/$tern_pid" ]] && die "tern did not exit within 60 s of SIGTERM: no profile"
wait "$tern_pid" 2> /dev/null || true
shopt -s nullglob
raw=("$work"/profraw/*.profraw)
[[ ${#raw[@]} -gt 0 ]] || { cat "$work/tern.log" >&2; die "no .profraw written"; }
"$LLVM_PROFDATA" merge -o "$OUT" "${raw[@]}"
echo "merged ${#raw[@]} raw profile(s) into $OUT ($(du -k "$OUT" | cut -f1) KiB)"
"$LLVM_PROFDATA" show "$OUT" | sed -n '/^Total functions/p;/^Maximum function count/p'
