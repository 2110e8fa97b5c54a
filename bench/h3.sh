#!/usr/bin/env bash
# HTTP/1.1, HTTP/2 and HTTP/3 through one tern, side by side: what each
# protocol costs the server per request, for a small (100 B) and a large
# (1 MiB) response.
#
# tern (`--http3`, one worker) and its backend (nginx serving the files)
# are pinned to CPU 0; the load (`tern bench`) to CPU 1. Every protocol gets
# the same clients: C connections (one request at a time each: -m 1), TLS 1.3
# TLS_AES_128_GCM_SHA256 X25519 (pinned on both sides, so every protocol
# pays for the same cipher and group), for DURATION seconds per round, in ROUNDS
# interleaved rounds (`tern bench --compare-protocols h1,h2,h3`), RUNS times.
# Server CPU per request is tern's utime+stime from /proc (not the backend's)
# over each protocol's rounds. The figures, last: tern's HTTP/3 CPU per
# request as a multiple of its HTTP/2 and of its HTTP/1.1, per run and the
# median, for each plan and response size (for PLANS=new, the second is
# a new QUIC connection against a new TCP+TLS one, issue 26's 1.3x).
#
# PLANS adds connection plans: "keepalive" (the default: the connections
# stay open, 100 B and 1 MiB), "new" (a connection, so a full handshake,
# per 100 B request) and "resumed" (a connection per 100 B request that
# resumes the TLS session; tern bench offers resumption in every plan, as
# browsers do, so tern sends its tickets in all three).
#
# RATE=N runs every protocol open loop at the same N requests per second
# (tern bench --rate; give C room for the requests in flight, e.g. C=64)
# instead of closed loop. Closed loop, each protocol goes as fast as its
# client: the QUIC client is the slowest, so under PLANS=new tern serves
# QUIC at ~60 % of the TCP+TLS request rate, idles more between requests
# and pays more wake-ups per request. At one rate both pay the same idle
# overhead, which pulls the ratio towards 1 the lower the rate: take N
# near what closed-loop QUIC reaches (its req/s column) and report both.
#
# Usage: bench/h3.sh   (env: DURATION=5 ROUNDS=3 RUNS=3 C=20 RATE=
#                       PLANS="keepalive new resumed"
#                       TERN=target/release/tern H3_ARGS="--quic-gso false"
#                       BENCH_TERN=...: the tern that runs the load, default
#                       TERN; set it to compare two servers under one client)
# Needs: nginx (nginx-light), openssl, python3, taskset. Only 127.0.0.1 is
# ever a target; everything stops by itself.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

DURATION="${DURATION:-5}"
ROUNDS="${ROUNDS:-3}"
RUNS="${RUNS:-3}"
C="${C:-20}"
PLANS="${PLANS:-keepalive}"
TERN="${TERN:-$root/target/release/tern}"
BENCH_TERN="${BENCH_TERN:-$TERN}"
SERVER_CPU=0
LOAD_CPU=1
TLS_SUITE=TLS_AES_128_GCM_SHA256
TLS_GROUP=X25519
SRV_ALPN=h2
SRV_POOL=256
# H3_ARGS: more tern serve flags, e.g. "--quic-gso false" to measure GSO.
SRV_TERN_ARGS="--http3 ${H3_ARGS:-}"
for tool in nginx openssl python3 taskset; do need "$tool"; done
[[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"
[[ -x "$BENCH_TERN" ]] || die "no tern binary at $BENCH_TERN (BENCH_TERN)"

bench_workdir tern-h3
make_cert ecdsa
mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/100"
head -c $((1024 * 1024)) /dev/zero | tr '\0' 'x' > "$work/www/1m"
backend_port="$(free_port)"
start_backend "$backend_port" "$SERVER_CPU"
start_servers "$backend_port" tern
port="${server_port[tern]}"
pid="${server_pid[tern]}"

results="$work/results.tsv"
for run in $(seq 1 "$RUNS"); do
  for plan in $PLANS; do
    sizes="100"
    [[ "$plan" == keepalive ]] && sizes="100 1m"
    for size in $sizes; do
        json="$work/run$run-$plan-$size.json"
        taskset -c "$LOAD_CPU" "$BENCH_TERN" bench --compare-protocols h1,h2,h3 --rounds "$ROUNDS" \
            --plan "$plan" -z "${DURATION}s" -c "$C" ${RATE:+--rate "$RATE"} -m 1 -k --ciphers "$TLS_SUITE" \
            --groups "$TLS_GROUP" --server-pid "$pid" --no-progress -o json \
            "https://127.0.0.1:$port/$size" > "$json"
        python3 - "$json" "$run" "$plan $size" >> "$results" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
for t in report["targets"]:
    s, cpu = t["summary"], t["server_cpu"] or {}
    proto = t["url"].rsplit("[", 1)[-1].rstrip("]")
    neg = s["negotiated"][0] if s["negotiated"] else {}
    print("\t".join(str(x) for x in [
        sys.argv[2], sys.argv[3], proto, s["completed"], s["failed"], round(s["rps"]),
        s["percentiles_ms"]["50"], s["percentiles_ms"]["99"], cpu.get("us_per_request"),
        neg.get("cipher"), neg.get("group"), neg.get("alpn"), s["resumed"], s["handshakes"]]))
PY
        echo "run $run, $plan /$size done" >&2
    done
  done
done

echo
echo "h1 vs h2 vs h3 through tern${H3_ARGS:+ ($H3_ARGS)}: tern bench --compare-protocols h1,h2,h3 --rounds $ROUNDS --plan {$PLANS} -z ${DURATION}s -c $C${RATE:+ --rate $RATE (open loop)} -m 1, TLS 1.3 $TLS_SUITE $TLS_GROUP; tern (one worker, --http3) and its nginx backend on CPU $SERVER_CPU, load on CPU $LOAD_CPU; $(nproc) CPUs, $(uname -r)"
echo "  $(server_version tern)"
echo "  load: $BENCH_TERN bench ($("$BENCH_TERN" --version 2>/dev/null || echo "tern ?"))"
python3 - "$results" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
print("| run | plan, response | protocol | requests | failed | req/s | p50 ms | p99 ms | tern CPU µs/request | negotiated | handshakes (resumed) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} | {float(r[6]):.2f} | {float(r[7]):.2f} | {float(r[8]):.1f} | {r[11]} {r[9]} {r[10]} | {r[13]} ({r[12]}) |")
for base, name in (("h2", "HTTP/2"), ("h1", "HTTP/1.1 (for the new plan: a new TCP+TLS connection)")):
    figures = []
    for size in dict.fromkeys(r[1] for r in rows):
        ratios = []
        for run in sorted({r[0] for r in rows}):
            cpu = {r[2]: float(r[8]) for r in rows if r[0] == run and r[1] == size}
            if cpu.get(base) and cpu.get("h3"):
                ratios.append(cpu["h3"] / cpu[base])
        if ratios:
            figures.append(f"{size}: " + ", ".join(f"{x:.2f}" for x in ratios) + f" (median {statistics.median(ratios):.2f})")
    print(f"tern HTTP/3 server CPU per request as a multiple of {name}: " + "; ".join(figures))
PY
