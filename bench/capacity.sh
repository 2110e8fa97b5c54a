#!/usr/bin/env bash
# Capacity of TLS terminators at an SLO, found by `tern bench --find-max-rate`:
# the highest open-loop rate each one sustains with p99 < 10 ms and errors
# < 0.1%, for new connections (a full TLS 1.3 handshake per request) and for
# keepalive. BENCHMARKS.md's capacity rows come from this script, and need
# an idle machine: the search's p99 is wall-clock latency, which other
# work on the machine moves.
#
# Layout as bench/terminators.sh: every terminator ONE worker on CPU 0,
# same ECDSA P-256 certificate, TLS 1.3 TLS_AES_128_GCM_SHA256 X25519, access
# logs off, in front of one nginx backend (100-byte file) on CPU 1 with the
# load. Each run searches every server in one interleaved `--compare`
# (the servers' steps alternate), RUNS times; the table gives the median
# of the runs' capacities and the range.
#
# Usage: bench/capacity.sh   (env: RUNS=3 STEP=5s CONNS=200 SLO='p99<10ms,errors<0.1%'
#          START_RATE=500 MAX_RATE=1000000 TERN=target/release/tern
#          SERVERS="tern nginx haproxy")
#   short form (tests/scripts.rs): RUNS=1 STEP=1s START_RATE=20 MAX_RATE=40 CONNS=4
#   one command for the coordinator: cargo build --release -p tern && bench/capacity.sh
# Needs: nginx (nginx-light), haproxy, openssl, curl, python3, taskset.
# Only 127.0.0.1 is ever a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

bench_defaults "tern nginx haproxy"
STEP="${STEP:-5s}"
CONNS="${CONNS:-200}"
SLO="${SLO:-p99<10ms,errors<0.1%}"
START_RATE="${START_RATE:-500}"
MAX_RATE="${MAX_RATE:-1000000}"
KEY=ecdsa
SRV_POOL=256
SRV_ALPN=http/1.1

for tool in openssl curl python3 taskset nginx; do
    need "$tool"
done
[[ -x "$TERN" ]] || die "$TERN not found (cargo build --release -p tern)"

bench_workdir tern-capacity
make_cert "$KEY"
www_backend "$LOAD_CPU"
# shellcheck disable=SC2086 # SERVERS is a list of words
start_servers "$backend_port" $SERVERS
urls=()
for server in "${active[@]}"; do
    urls+=("https://127.0.0.1:${server_port[$server]}/")
done

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
for run in $(seq 1 "$RUNS"); do
    for workload in new keepalive; do
        plan=()
        [[ "$workload" == new ]] && plan=(--plan new)
        compare=()
        [[ ${#urls[@]} -gt 1 ]] && compare=(--compare)
        taskset -c "$LOAD_CPU" "$TERN" bench --find-max-rate --slo "$SLO" \
            --start-rate "$START_RATE" --max-rate "$MAX_RATE" --step "$STEP" -c "$CONNS" --cpus 1 \
            --groups X25519 --host localhost --no-progress "${plan[@]}" "${compare[@]}" \
            --json "$work/$workload-$run.json" "${urls[@]}" > "$work/$workload-$run.txt"
        grep -E "^(Capacity|  Max rate)" "$work/$workload-$run.txt" >&2
    done
done

python3 - "$work" "$RUNS" "$SLO" "$load_before" "${active[@]}" <<'PY'
import json, statistics, sys
work, runs, slo, load_before, servers = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
print(f"## Capacity at {slo} (tern bench --find-max-rate, median of {runs} runs; load average before {load_before})")
print()
print("| workload | " + " | ".join(servers) + " |")
print("|---|" + "---|" * len(servers))
for workload in ("new", "keepalive"):
    cells = []
    for i, _ in enumerate(servers):
        rates = []
        for run in range(1, runs + 1):
            with open(f"{work}/{workload}-{run}.json") as f:
                t = json.load(f)["targets"][i]
            rates.append((t.get("capacity") or {}).get("max_rate") or 0.0)
        cells.append(f"{statistics.median(rates):.0f} req/s ({min(rates):.0f}-{max(rates):.0f})")
    name = "new connection per request" if workload == "new" else "keepalive HTTP/1.1"
    print(f"| {name} | " + " | ".join(cells) + " |")
PY
