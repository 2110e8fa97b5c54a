#!/usr/bin/env bash
# A profile-guided (PGO) release build of tern, in three steps, without
# touching Cargo.toml or .cargo/config (the release profile is used as is;
# only RUSTFLAGS and the target folders differ):
#   1. an instrumented release build (RUSTFLAGS=-Cprofile-generate) in
#      GEN_TARGET;
#   2. bench/pgo-train.sh runs it behind every protocol and plan the
#      benchmarks use and merges its profile into PROFDATA;
#   3. the optimised release build (RUSTFLAGS=-Cprofile-use=PROFDATA) in
#      USE_TARGET, copied to OUT.
# A RUSTFLAGS of the caller's (-Ctarget-cpu=...) goes to both builds, so
# the profile is trained on the code it optimises. RUSTFLAGS replaces
# .cargo/config.toml's rustflags (its inline threshold 500): the PGO
# build keeps LLVM's own thresholds (250, and 3,000 for the call sites
# its profile calls hot), the setting its figures were measured with;
# RUSTFLAGS=-Cllvm-args=-inline-threshold=500 gives it both (not
# measured).
# STEPS picks the steps (STEPS=use: step 3 only, with an existing
# PROFDATA). Each build compiles the whole dependency
# tree again (RUSTFLAGS change every crate's hash): on a loaded 2-core host
# about as long as a plain release build, each.
# How rustc 1.95 takes a profile that does not fit (BENCHMARKS.md, pgo12):
# a missing file is an error; an unreadable one (another LLVM's format,
# bad magic) a warning, and the build goes on without PGO; a function
# changed since the training a warning each ("hash mismatch"), the rest
# applied; a new or renamed function (or a crate whose version changed)
# silently unprofiled. Rebuild PROFDATA with the code it optimises.
#
# Usage: bench/pgo-build.sh   (env: GEN_TARGET=target/pgo-gen
#          USE_TARGET=target/pgo-use PROFDATA=target/pgo-use/tern.profdata
#          OUT=target/pgo-use/tern-pgo STEPS="gen train use"
#          BENCH_TERN=... (pgo-train's load; default: a plain release tern
#          at target/release/tern, built when missing))
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
GEN_TARGET="${GEN_TARGET:-$root/target/pgo-gen}"
USE_TARGET="${USE_TARGET:-$root/target/pgo-use}"
PROFDATA="${PROFDATA:-$USE_TARGET/tern.profdata}"
OUT="${OUT:-$USE_TARGET/tern-pgo}"
STEPS="${STEPS:-gen train use}"
export BENCH_TERN="${BENCH_TERN:-$root/target/release/tern}"
cd "$root"
mkdir -p "$USE_TARGET"

for step in $STEPS; do
    case "$step" in
        gen)
            # Raw profiles go where pgo-train.sh says (LLVM_PROFILE_FILE);
            # this folder is only the default of a run without it.
            CARGO_TARGET_DIR="$GEN_TARGET" RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-Cprofile-generate=$GEN_TARGET/profraw" \
                cargo build --release -p tern
            ;;
        train)
            [[ -x "$BENCH_TERN" ]] || cargo build --release -p tern
            "$here/pgo-train.sh" "$GEN_TARGET/release/tern" "$PROFDATA"
            ;;
        use)
            [[ -r "$PROFDATA" ]] || { echo "pgo-build: no profile at $PROFDATA (STEPS=train)" >&2; exit 1; }
            # rustc lists the profile in its dep-info (rust-lang/rust#100801),
            # so a new training at the same path rebuilds every crate.
            CARGO_TARGET_DIR="$USE_TARGET" RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-Cprofile-use=$PROFDATA" \
                cargo build --release -p tern
            cp "$USE_TARGET/release/tern" "$OUT"
            echo "PGO build: $OUT (profile $PROFDATA)"
            "$OUT" --version
            ;;
        *) echo "pgo-build: STEPS are gen, train, use" >&2; exit 1 ;;
    esac
done
