#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 60) each, one after another,
# from its seed corpus (fuzz/corpus/TARGET, grown in a scratch copy so the
# checked-in seeds stay small). Exits non-zero on the first crash, leaving
# the crashing input in fuzz/artifacts/TARGET/. Prints each target's
# executions.
#
# Usage: fuzz/run.sh [SECONDS]     (env: TARGETS="request_head chunked ...")
# Needs: a nightly toolchain (rustup toolchain install nightly) and
# cargo-fuzz (cargo install cargo-fuzz).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
seconds="${1:-60}"
targets="${TARGETS:-request_head response_head chunked proxy_header config_toml ticket_keys server_hello h2_frames proxy_v2_ssl client_cert grpc_health cookie targets_file probe_target qpack_decode tls_records}"
cd "$here"

command -v cargo-fuzz >/dev/null 2>&1 || { echo "fuzz/run.sh: cargo-fuzz is not installed (cargo install cargo-fuzz)" >&2; exit 2; }
rustup run nightly rustc --version >/dev/null 2>&1 || { echo "fuzz/run.sh: no nightly toolchain (rustup toolchain install nightly)" >&2; exit 2; }

cargo +nightly fuzz build -O --debug-assertions >&2
scratch="$(mktemp -d /tmp/tern-fuzz.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
status=0
for target in $targets; do
    mkdir -p "$scratch/$target"
    cp -r "corpus/$target/." "$scratch/$target/"
    log="$scratch/$target.log"
    if cargo +nightly fuzz run -O --debug-assertions "$target" "$scratch/$target" -- \
        -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 > "$log" 2>&1; then
        execs="$(awk '/stat::number_of_executed_units/ {print $NF}' "$log")"
        echo "$target: ${execs:-?} executions in ${seconds} s, no crash"
    else
        echo "$target: CRASH (input in fuzz/artifacts/$target/)" >&2
        tail -40 "$log" >&2
        status=1
        break
    fi
done
exit "$status"
