#!/usr/bin/env bash
# What a new QUIC connection + one 100 B HTTP/3 request costs tern serve,
# by client: tern bench against quic-go (an implementation nobody at tern
# wrote), to see whether the client's way of opening connections moves
# the figure issue 26's target is judged on (a new QUIC connection at
# <= 1.3x a new TCP+TLS one). In each round, interleaved:
#
#   h1              tern bench --plan new (TCP+TLS, HTTP/1.1): the
#                   reference each QUIC figure is divided by;
#   tern            tern bench --h3 --plan new: a UDP socket per
#                   connection, zero-length client connection IDs;
#   quic-go-own     bench/quic-go-client -sockets own (quic.DialAddr): a
#                   socket per connection, zero-length client IDs, as
#                   Chromium;
#   quic-go-shared  bench/quic-go-client -sockets shared: one socket per
#                   slot, 4-byte client IDs (quic-go's http3.Transport
#                   default), so a NEW_CONNECTION_ID from the client on
#                   every connection;
#   tern-old        with OLD_TERN=path: an older tern bench (one socket per
#                   worker, 8-byte client IDs) for comparison.
#
# N connections each after WARM unmeasured ones, C at a time, closed loop,
# or open loop at RATE connections/s for every client (one rate for all:
# a slower client otherwise costs the server more per connection, its
# worker parks more often). Server CPU per connection: tern's utime+stime
# from /proc over the N connections. tern serve (one worker, --http3, its
# defaults, access log off) and its nginx backend on CPU 0, every client
# on CPU 1 (quic-go with GOMAXPROCS=1); TLS 1.3 AES-128-GCM X25519 (quic-go
# offers X25519 only; its suites in TLS 1.3 are Go's, tern picks).
# Medians over ROUNDS rounds.
#
# Usage: bench/h3-clients.sh   (env: N=4000 WARM=300 C=20 RATE= ROUNDS=3
#          CLIENTS="h1 tern quic-go-own quic-go-shared" OLD_TERN=
#          TERN=target/release/tern BENCH_TERN=... QUIC_GO_CLIENT=...)
# Needs: go (builds bench/quic-go-client unless QUIC_GO_CLIENT is given;
# the module comes from the Go proxy), nginx, openssl, python3, taskset.
# Only 127.0.0.1 is ever a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

N="${N:-4000}"
WARM="${WARM:-300}"
C="${C:-20}"
ROUNDS="${ROUNDS:-3}"
CLIENTS="${CLIENTS:-h1 tern quic-go-own quic-go-shared}"
[[ -n "${OLD_TERN:-}" ]] && CLIENTS="$CLIENTS tern-old"
quic_new_conn_defaults

bench_workdir tern-h3-clients
if [[ -z "${QUIC_GO_CLIENT:-}" ]]; then
    need go
    QUIC_GO_CLIENT="$work/quic-go-client"
    (cd "$here/quic-go-client" && go build -o "$QUIC_GO_CLIENT" .) || die "cannot build bench/quic-go-client"
fi
make_cert ecdsa
www_backend "$SERVER_CPU"
start_servers "$backend_port" tern
port="${server_port[tern]}"
pid="${server_pid[tern]}"
url="https://127.0.0.1:$port/"

# load CLIENT COUNT OUT: COUNT new connections from CLIENT, one request
# each; OUT gets the client's own report.
load() {
    local -a rate=()
    case "$1" in
        h1 | tern | tern-old)
            [[ "$1" != tern-old || -x "${OLD_TERN:-}" ]] || die "client tern-old needs OLD_TERN, a tern binary"
            local bin="$BENCH_TERN" proto=(--h3)
            [[ "$1" == tern-old ]] && bin="$OLD_TERN"
            [[ "$1" == h1 ]] && proto=()
            [[ -n "${RATE:-}" ]] && rate=(--rate "$RATE")
            taskset -c "$LOAD_CPU" "$bin" bench "${proto[@]}" --plan new -n "$2" -c "$C" "${rate[@]}" -k \
                --ciphers "$TLS_SUITE" --groups "$TLS_GROUP" --no-progress -o json "$url" > "$3"
            ;;
        quic-go-own | quic-go-shared)
            [[ -n "${RATE:-}" ]] && rate=(-rate "$RATE")
            taskset -c "$LOAD_CPU" env GOMAXPROCS=1 "$QUIC_GO_CLIENT" -n "$2" -c "$C" "${rate[@]}" \
                -sockets "${1#quic-go-}" "$url" > "$3"
            ;;
        *) die "unknown client $1" ;;
    esac
}

results="$work/results.tsv"
for round in $(seq 1 "$ROUNDS"); do
    for client in $CLIENTS; do
        load "$client" "$WARM" "$work/warm.json"
        t0="$(monotonic_s)"
        before="$(cpu_ticks "$pid")"
        load "$client" "$N" "$work/$client-$round.json"
        after="$(cpu_ticks "$pid")"
        t1="$(monotonic_s)"
        python3 - "$work/$client-$round.json" "$client" "$round" "$N" "$before" "$after" "$t0" "$t1" \
            "$(getconf CLK_TCK)" >> "$results" <<'PY'
import json, sys
path, client, rnd, n, before, after, t0, t1, hz = sys.argv[1:]
n, ticks = int(n), int(after) - int(before)
r = json.load(open(path))
if "connections" in r:
    done, failed = r["connections"], r["failed"]
else:
    s = (r["targets"][0] if "targets" in r else r)["summary"]
    done, failed = s["completed"], s["failed"]
if failed or done != n:
    sys.exit(f"{client}, round {rnd}: {done} of {n} connections done, {failed} failed")
us = ticks * 1e6 / int(hz) / n
print(f"{client}\t{rnd}\t{us:.1f}\t{n / (float(t1) - float(t0)):.0f}")
PY
        echo "round $round, $client done" >&2
    done
done

echo
echo "A new connection + one 100 B request, by client: N=$N (after $WARM) per round, -c $C, ${RATE:+open loop at $RATE connections/s, }$ROUNDS rounds; tern (one worker, --http3) and nginx on CPU $SERVER_CPU, clients on CPU $LOAD_CPU; TLS 1.3 X25519; $(nproc) CPUs, $(uname -r)"
echo "  $(server_version tern)"
echo "  tern bench: $BENCH_TERN${OLD_TERN:+; tern-old: $OLD_TERN}; quic-go: $(cd "$here/quic-go-client" && sed -n 's/^require github.com\/quic-go\/quic-go //p' go.mod)"
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    client, rnd, us, rate = line.split("\t")
    rows.setdefault(client, []).append((int(rnd), float(us), float(rate)))
h1 = {r: us for r, us, _ in rows.get("h1", [])}
print("| client | tern CPU µs per connection (median) | rounds | connections/s | per round as a multiple of h1 (TCP+TLS) | median multiple |")
print("|---|---|---|---|---|---|")
for client, rs in rows.items():
    med = statistics.median(us for _, us, _ in rs)
    rate = statistics.median(r for _, _, r in rs)
    ratios = [us / h1[r] for r, us, _ in rs if r in h1 and h1[r] > 0]
    per = " ".join(f"{x:.2f}" for x in ratios) if client != "h1" else "-"
    m = f"{statistics.median(ratios):.2f}" if ratios and client != "h1" else "-"
    print(f"| {client} | {med:.1f} | {' '.join(f'{us:.0f}' for _, us, _ in rs)} | {rate:.0f} | {per} | {m} |")
PY
