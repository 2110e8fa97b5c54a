#!/usr/bin/env bash
# Rebuilds a vendored crate as its published version plus tern's numbered
# patches (vendor/patches/NAME/NNNN-*.patch, applied in order).
#
#   vendor/apply.sh --check [NAME...]      vendor/NAME equals its published
#                                          version + patches (all seven crates
#                                          when none is named); exit 1 if not
#   vendor/apply.sh --install NAME VERSION replace vendor/NAME with VERSION +
#                                          patches, then run the crate's tests
#   vendor/apply.sh NAME [VERSION]         build VERSION + patches in a
#                                          scratch folder and print its path
#
# VERSION defaults to the version vendor/NAME is based on (its Cargo.toml).
# The published package comes through cargo itself (a scratch project that
# depends on NAME = "=VERSION", `cargo fetch`), so it is the exact .crate
# crates.io serves. A patch that no longer applies stops the script with
# git's message: rebase it by hand on the new version (vendor/README.md).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
crates=(rustls quinn-proto quinn quinn-udp h3 h3-quinn h2)
scratch_root="$(mktemp -d)"
trap 'rm -rf "$scratch_root"' EXIT

die() { echo "vendor/apply.sh: $*" >&2; exit 2; }

vendored_version() {
    sed -n 's/^version = "\(.*\)"$/\1/p' "$here/$1/Cargo.toml" | head -1
}

# fetch NAME VERSION: extracts the published package, prints its folder.
fetch() {
    local name=$1 version=$2 dir="$scratch_root/fetch-$1"
    mkdir -p "$dir/src"
    : >"$dir/src/lib.rs"
    cat >"$dir/Cargo.toml" <<EOF
[package]
name = "tern-vendor-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
$name = { version = "=$version", default-features = false }

[workspace]
EOF
    (cd "$dir" && cargo fetch --quiet) || die "cannot fetch $name $version"
    local cache="${CARGO_HOME:-$HOME/.cargo}/registry/cache" crate
    crate="$(ls "$cache"/*/"$name-$version.crate" 2>/dev/null | head -1)"
    [[ -n "$crate" ]] || die "$name-$version.crate not in $cache after cargo fetch"
    # Outside the fetch project, whose [workspace] would otherwise claim it.
    local out="$scratch_root/upstream-$name"
    mkdir -p "$out"
    tar -xzf "$crate" -C "$out"
    # Written by cargo when it packages or unpacks, not part of the source.
    rm -f "$out/$name-$version/.cargo_vcs_info.json" "$out/$name-$version/.cargo-ok"
    echo "$out/$name-$version"
}

# build NAME VERSION: published package + patches, prints its folder.
build() {
    local name=$1 version=$2 tree patch
    [[ -d "$here/patches/$name" ]] || die "no patches for $name (vendor/patches/$name)"
    tree="$(fetch "$name" "$version")"
    for patch in "$here/patches/$name"/[0-9][0-9][0-9][0-9]-*.patch; do
        (cd "$tree" && git apply --whitespace=nowarn "$patch") \
            || die "$(basename "$patch") does not apply to $name $version"
    done
    echo "$tree"
}

check() {
    local name tree failed=0
    for name in "$@"; do
        tree="$(build "$name" "$(vendored_version "$name")")"
        if diff -r --exclude=.cargo-ok --exclude=.cargo_vcs_info.json \
            "$tree" "$here/$name" >"$scratch_root/$name.diff"; then
            echo "vendor/$name: $(vendored_version "$name") + $(ls "$here/patches/$name" | wc -l) patches"
        else
            echo "vendor/$name differs from $(vendored_version "$name") + vendor/patches/$name:" >&2
            head -40 "$scratch_root/$name.diff" >&2
            failed=1
        fi
    done
    return "$failed"
}

case "${1:-}" in
    --check)
        shift
        if [[ $# -eq 0 ]]; then set -- "${crates[@]}"; fi
        check "$@"
        ;;
    --install)
        [[ $# -eq 3 ]] || die "usage: vendor/apply.sh --install NAME VERSION"
        name=$2
        tree="$(build "$name" "$3")"
        # The other vendored crates stand in for their published versions,
        # as in tern's build (h3-quinn's patch calls quinn's patched API).
        patches=()
        for other in "${crates[@]}"; do
            [[ "$other" == "$name" ]] && continue
            patches+=(--config "patch.crates-io.$other.path=\"$here/$other\"")
        done
        cp -r "$tree" "$scratch_root/pristine"
        # The package's lock file may pin older versions the patches do not
        # match: resolve afresh for the test run only.
        rm -f "$tree/Cargo.lock"
        (cd "$tree" && cargo test --quiet --target-dir "$scratch_root/target" "${patches[@]}") \
            || die "$name $3 + patches: the crate's tests fail"
        rm -rf "${here:?}/$name"
        cp -r "$scratch_root/pristine" "$here/$name"
        echo "vendor/$name is now $3 + patches; update vendor/README.md and the workspace Cargo.toml comment"
        ;;
    "" | -h | --help)
        sed -n '2,17p' "$0"
        ;;
    *)
        name=$1
        tree="$(build "$name" "${2:-$(vendored_version "$name")}")"
        out="$(mktemp -d)"
        cp -r "$tree" "$out/"
        echo "$out/$(basename "$tree")"
        ;;
esac
