#!/usr/bin/env bash
# Connection floods against tern, nginx and haproxy in one run: what a flood
# does to well-behaved clients, and what it costs the server.
#
# MODE=slowloris: CONNS TLS connections each sending a request head one byte
#   a second, never finished;
# MODE=hello: CONNS connections that send a TLS ClientHello and stop;
# MODE=garbage: CONNS connections that send 1 KiB of random bytes and stop.
#
# For each server in turn (one worker pinned to CPU 0, the backend too; the
# flood and the load on CPU 1): `tern bench` (keepalive, C connections,
# LOAD_S seconds) measures p99 latency of well-behaved clients alone; then
# bench/flood.py opens the flood, and once every flood connection is set up
# the same load runs again. The flood connections are held until the server
# closes them or HOLD_S seconds pass. Reported per server: p99 alone and
# under the flood (and their ratio), failed requests under the flood,
# server memory (RSS summed over its processes) before and with the flood,
# and how many flood connections the server closed, and after how long (its
# header or handshake deadline at work). The figure, last: the ratio of p99
# under the flood to p99 alone, per server.
#
# The load runs at a real-time priority above the flood (LOAD_PRIORITY=fifo,
# see lib.sh's load_priority); the table's last column is the flood's pace
# while the load measured (slowloris: 1 byte a second per connection).
#
# Usage: bench/flood.sh   (env: MODE=slowloris CONNS=5000 C=8 LOAD_S=5
#          HOLD_S=40 TERN=target/release/tern SERVERS="tern nginx haproxy"
#          LOAD_PRIORITY=fifo|normal)
# Needs: nginx (nginx-light; also the backend), haproxy (optional), openssl,
# python3, taskset. Only 127.0.0.1 is ever a target; everything stops by
# itself and the scratch folder is removed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

MODE="${MODE:-slowloris}"
CONNS="${CONNS:-5000}"
C="${C:-8}"
LOAD_S="${LOAD_S:-5}"
HOLD_S="${HOLD_S:-40}"
TERN="${TERN:-$root/target/release/tern}"
SERVERS="${SERVERS:-tern nginx haproxy}"
SERVER_CPU=0
LOAD_CPU=1
TLS_SUITE="${TLS_SUITE:-TLS_AES_128_GCM_SHA256}"
TLS_GROUP="${TLS_GROUP:-X25519}"
for tool in nginx openssl python3 taskset timeout; do need "$tool"; done
load_priority
[[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"
case "$MODE" in slowloris | hello | garbage) ;; *) die "MODE must be slowloris, hello or garbage" ;; esac

ulimit -n "$(ulimit -Hn)"
((CONNS + 1024 <= $(ulimit -n))) || die "CONNS=$CONNS does not fit under the open-file limit"
SRV_MAX_CONNS=$((CONNS + 256))

bench_workdir tern-flood
make_cert ecdsa
mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/index.html"
backend_port="$(free_port)"
start_backend "$backend_port" "$SERVER_CPU"
read -r -a wanted <<< "$SERVERS"
start_servers "$backend_port" "${wanted[@]}"

results="$work/results.tsv"
for server in "${active[@]}"; do
    port="${server_port[$server]}"
    pid="${server_pid[$server]}"
    read -r p99_alone failed_alone _ < <(keepalive_load "$port")
    rss_alone="$(rss_kib "$pid")"
    ready="$work/ready.$server"
    rm -f "$ready"
    taskset -c "$LOAD_CPU" timeout $((HOLD_S + 120)) python3 "$here/flood.py" \
        "$MODE" "$port" "$CONNS" "$HOLD_S" "$ready" > "$work/flood.$server.json" &
    flood_pid=$!
    for _ in $(seq 1 1200); do
        [[ -s "$ready" ]] && break
        sleep 0.1
    done
    [[ -s "$ready" ]] || die "$server: the flood did not get its connections up within 120 s"
    rss_flood="$(rss_kib "$pid")"
    load_from="$(monotonic_s)"
    read -r p99_flood failed_flood done_flood < <(keepalive_load "$port")
    load_to="$(monotonic_s)"
    wait "$flood_pid" || true
    flood="$(cat "$work/flood.$server.json")"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$server" "$p99_alone" "$p99_flood" \
        "$failed_alone" "$failed_flood" "$done_flood" "$rss_alone" "$rss_flood" "$(cat "$ready")" \
        "$load_from" "$load_to" "$flood" >> "$results"
    echo "$server: p99 ${p99_alone} ms alone, ${p99_flood} ms under the flood; $flood" >&2
done

echo
echo "flood: MODE=$MODE CONNS=$CONNS, well-behaved load: tern bench -z ${LOAD_S}s -c $C (keepalive), TLS 1.3 $TLS_SUITE $TLS_GROUP; one worker on CPU $SERVER_CPU, flood and load on CPU $LOAD_CPU, $LOAD_PRIORITY_NOTE; $(nproc) CPUs, $(uname -r)"
for server in "${active[@]}"; do echo "  $server: $(server_version "$server")"; done
python3 - "$results" "$MODE" "$CONNS" <<'PY'
import json, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
mode, conns = sys.argv[2], int(sys.argv[3])
print(f"| server | p99 alone (ms) | p99 under {conns} {mode} (ms) | ratio | failed under flood | RSS alone → with flood (MiB) | per flood conn (KiB) | closed by server | closed after (median, s) | flood writes/s while measured |")
print("|---|---|---|---|---|---|---|---|---|---|")
figures = []
for server, p_a, p_f, f_a, f_f, done, rss_a, rss_f, ready, load_from, load_to, flood in rows:
    f = json.loads(flood)
    # The flood's pace in the whole seconds of the measurement: a flood
    # starved of CPU by the load would flatter every server.
    seconds = range(int(float(load_from)) + 1, int(float(load_to)))
    written = {int(k): v for k, v in f["written_by_second"].items()}
    pace = f"{sum(written.get(t, 0) for t in seconds) / len(seconds):.0f}" if mode == "slowloris" and seconds else "-"
    ratio = float(p_f) / float(p_a) if float(p_a) > 0 else float("nan")
    per = (int(rss_f) - int(rss_a)) / max(1, f["opened"])
    med = f["closed_after_s_median"]
    print(f"| {server} | {float(p_a):.2f} | {float(p_f):.2f} | {ratio:.2f} | {f_f} of {int(done) + int(f_f)} | "
          f"{int(rss_a)/1024:.1f} → {int(rss_f)/1024:.1f} | {per:.1f} | {f['closed_by_server']} of {f['opened']} | "
          f"{'-' if med is None else f'{med:.1f}'} | {pace} |")
    figures.append(f"{server} {ratio:.2f}x")
print(f"p99 under {conns} {mode} connections vs alone: " + ", ".join(figures))
PY
