#!/usr/bin/env bash
# What tern's edge policy (docs/edge-policy.md) costs, and what a rate limit
# does for everyone else while one client floods.
#
# Part 1, rules on vs off: two tern processes in front of the same backend
# (nginx serving 100 bytes), each ONE worker on CPU 0 with the backend
# (the strict layout of bench/terminators.sh, BACKEND_CPU=server), load on
# CPU 1, TLS 1.3 TLS_AES_128_GCM_SHA256 X25519, ALPN h2,http/1.1, access log
# off. "rules-off": request IDs off, no other rule. "rules-on": the lines of
# bench/edge-rules.toml (hsts, three response rules, one request rule with a
# variable, request IDs, max_request_body, client_max_connections,
# client_rate and a deny list, none of which a request here trips). Workloads, interleaved RUNS times:
#   keepalive  wrk -t1 -c50, HTTP/1.1 keepalive, 100 B
#   h2         h2load -c50 -m10, 100 B
# Reported: req/s and server CPU µs per request (utime+stime from /proc),
# medians, and rules-on as a multiple of rules-off (target: at most 1.03);
# with perf installed, instructions retired per request (user and kernel,
# `perf stat -e instructions:u,instructions:k -p PID`), the figure a shared
# machine barely moves.
#
# Part 2, flood (FLOOD=1, the default): tern with client_rate = RATE (burst
# BURST) listening on 127.0.0.1:PORT and [::1]:PORT. Well-behaved clients
# (`tern bench -k -c C --rate LOAD_RATE`, an open loop from 127.0.0.1, under
# the limit) measure p99 alone; then one client (h2load -c8 -m10 on ::1,
# another address as far as the limits go, with 8 new connections every
# second) floods at full speed while they measure again,
# against a tern without the limit, one with it but
# client_rate_close_after = 0 (refused connections kept open), and one with
# it and the default client_rate_close_after.
# Reported: well-behaved p99 alone and under each flood, their ratio, and
# what the flooder got (2xx vs 429). Target: p99 under the limited flood
# at most 2x alone.
#
# Usage: bench/edge.sh   (env: DURATION=10 RUNS=3 CONNS=50 FLOOD=1 LOAD_S=5
#          C=8 LOAD_RATE=500 RATE=2000/s BURST=100 TERN=target/release/tern LOAD_PRIORITY=fifo|normal)
# Needs: nginx (nginx-light), wrk, h2load (nghttp2-client), openssl, curl,
# python3, taskset; perf (optional). Only loopback (127.0.0.1, ::1) is ever
# a target; everything stops by itself and the scratch folder is removed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

bench_defaults tern
CONNS="${CONNS:-50}"
FLOOD="${FLOOD:-1}"
LOAD_S="${LOAD_S:-5}"
C="${C:-8}"
LOAD_RATE="${LOAD_RATE:-500}"
RATE="${RATE:-2000/s}"
BURST="${BURST:-100}"
SRV_ALPN=h2
for tool in nginx wrk h2load openssl curl python3 taskset; do need "$tool"; done
[[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"
PERF=""
# perf only when the machine counts instructions (a VM without a PMU says
# "<not supported>").
if command -v perf > /dev/null 2>&1 &&
    perf stat -x, -e instructions:u true 2>&1 | grep -q '^[0-9]'; then
    PERF=perf
else
    echo "perf counts no instructions here: CPU time only" >&2
fi
load_priority

bench_workdir tern-edge
make_cert ecdsa
www_backend "$SERVER_CPU"

# tern_config NAME RULES LISTEN...: a config file for one tern (bench/lib.sh's
# tern_config_file, backend pool 512), one [[listener]] table per LISTEN
# address, each with RULES appended. Prints its path.
tern_config() {
    local name="$1" rules="$2"
    shift 2
    tern_config_file "$work/$name.toml" "$backend_port" "backend_pool_size = 512
$rules" "$@"
    echo "$work/$name.toml"
}

# start_tern NAME CONFIG PORT: tern on CPU 0; sets server_pid[NAME].
declare -A server_pid=() server_port=()
start_tern() {
    local name="$1" config="$2" port="$3"
    taskset -c "$SERVER_CPU" "$TERN" serve --config "$config" 2> "$work/$name.log" &
    server_pid[$name]=$!
    server_port[$name]=$port
    pids+=("$!")
    wait_port "$port" || { cat "$work/$name.log" >&2; die "$name did not start"; }
}

RULES_OFF='request_id_header = "off"'
# Comment lines dropped: the conditions line prints the rules on one line.
RULES_ON="$(grep -v '^#' "$here/edge-rules.toml")"

for name in rules-on rules-off; do
    port="$(free_port)"
    rules="$RULES_OFF"
    [[ "$name" == rules-on ]] && rules="$RULES_ON"
    start_tern "$name" "$(tern_config "$name" "$rules" "127.0.0.1:$port")" "$port"
done
head_on="$(curl -sS -k -D - -o /dev/null "https://127.0.0.1:${server_port[rules-on]}/" | tr -d '\r')"
grep -qi '^strict-transport-security:' <<< "$head_on" || die "rules-on sent no HSTS: $head_on"
grep -qi '^x-request-id:' <<< "$head_on" || die "rules-on sent no request ID: $head_on"
head_off="$(curl -sS -k -D - -o /dev/null "https://127.0.0.1:${server_port[rules-off]}/" | tr -d '\r')"
grep -qi '^x-request-id:' <<< "$head_off" && die "rules-off sent a request ID: $head_off"
for name in rules-on rules-off; do
    body="$(curl -sS -k --http2 "https://127.0.0.1:${server_port[$name]}/")"
    [[ ${#body} -eq 100 ]] || die "$name did not proxy the 100-byte body over h2"
done

# measure WORKLOAD NAME COMMAND...: runs the load command, records a row
# (bench/table.py's columns), and when perf is there the instructions the
# server retired meanwhile, in $work/instructions.tsv.
measure() {
    local workload="$1" name="$2" pid before after backend_before backend_ticks out requests rate errors
    shift 2
    pid="${server_pid[$name]}"
    before="$(cpu_ticks "$pid")"
    backend_before="$(cpu_ticks "$backend_pid")"
    if [[ -n "$PERF" ]]; then
        perf stat -x, -e instructions:u,instructions:k -p "$pid" -o "$work/perf.out" &
        perf_pid=$!
    fi
    out="$("$@" 2>&1)"
    if [[ -n "$PERF" ]]; then
        kill -INT "$perf_pid"
        wait "$perf_pid" || true
    fi
    after="$(cpu_ticks "$pid")"
    backend_ticks=$(($(cpu_ticks "$backend_pid") - backend_before))
    case "$workload" in
        keepalive)
            requests="$(printf '%s\n' "$out" | awk '/requests in/ {print $1; exit}')"
            rate="$(printf '%s\n' "$out" | awk '/Requests\/sec/ {print $2; exit}')"
            errors="$(printf '%s\n' "$out" | awk '/Socket errors/ {gsub(/,/, ""); s += $4 + $6 + $8 + $10} /Non-2xx/ {s += $NF} END {print s + 0}')"
            ;;
        h2)
            requests="$(printf '%s\n' "$out" | awk '/^requests:/ {print $8}')"
            errors="$(printf '%s\n' "$out" | awk '/^requests:/ {print $10 + $12}')"
            rate="$(printf '%s\n' "$out" | awk '/^finished in/ {print $4}')"
            ;;
    esac
    record "$results" "$workload" "$name" "$run" "${requests:-0}" "${rate:-0}" "$before" "$after" "${errors:-0}" "$backend_ticks"
    if [[ -n "$PERF" ]]; then
        printf '%s\t%s\t%s\t%s\t%s\n' "$workload" "$name" "${requests:-0}" \
            "$(awk -F, '/instructions:u/ {print $1}' "$work/perf.out")" \
            "$(awk -F, '/instructions:k/ {print $1}' "$work/perf.out")" >> "$work/instructions.tsv"
    fi
}

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
results="$work/results.tsv"
: > "$results"
: > "$work/instructions.tsv"
for run in $(seq 1 "$RUNS"); do
    for name in rules-on rules-off; do
        url="https://127.0.0.1:${server_port[$name]}/"
        measure keepalive "$name" taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" \
            -H "Connection: keep-alive" "$url"
        measure h2 "$name" taskset -c "$LOAD_CPU" h2load -c "$CONNS" -m 10 -D "$DURATION" "$url"
    done
done

{
    echo "## Edge rules on vs off: one tern worker and the backend on CPU $SERVER_CPU, load on CPU $LOAD_CPU, ${DURATION}s x $RUNS interleaved runs"
    echo
    python3 "$here/table.py" "$results" "$(getconf CLK_TCK)"
    if [[ -s "$work/instructions.tsv" ]]; then
        echo
        echo "Instructions retired by the server per request (perf stat, user + kernel; median of the runs):"
        echo
        python3 - "$work/instructions.tsv" <<'PY'
import statistics, sys
from collections import defaultdict
per = defaultdict(list)
for line in open(sys.argv[1]):
    workload, name, requests, user, kernel = line.rstrip("\n").split("\t")
    if int(requests or 0) > 0 and user.isdigit() and kernel.isdigit():
        per[(workload, name)].append((int(user) / int(requests), int(kernel) / int(requests)))
for workload in dict.fromkeys(w for w, _ in per):
    cells = {}
    for name in ("rules-on", "rules-off"):
        xs = per.get((workload, name))
        if xs:
            u = statistics.median(x[0] for x in xs)
            k = statistics.median(x[1] for x in xs)
            cells[name] = (u, k)
    line = "; ".join(f"{n} {u:,.0f} user + {k:,.0f} kernel" for n, (u, k) in cells.items())
    if len(cells) == 2:
        (u1, k1), (u0, k0) = cells["rules-on"], cells["rules-off"]
        line += f"; **rules-on = {(u1 + k1) / (u0 + k0):.3f} x rules-off** (user alone {u1 / u0:.3f} x)"
    print(f"- {workload}: {line}")
PY
    fi
    echo
    echo "Conditions:"
    echo
    echo "- CPU: $(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}'), $(nproc) cores; kernel $(uname -r); load average before the runs: $load_before"
    echo "- tern: $(server_version tern); tree at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "- keepalive: taskset -c $LOAD_CPU wrk -t1 -c$CONNS -d${DURATION}s -H \"Connection: keep-alive\" https://127.0.0.1:PORT/"
    echo "- h2: taskset -c $LOAD_CPU h2load -c $CONNS -m 10 -D $DURATION https://127.0.0.1:PORT/"
    echo "- rules-off: $RULES_OFF"
    echo "- rules-on: $(tr '\n' ' ' <<< "$RULES_ON")"
    echo "- both: one worker, TLSv1.3 $TLS_SUITE $TLS_GROUP, ALPN h2,http/1.1, access log off, backend pool 512; backend nginx (100 B) on CPU $SERVER_CPU"
}

[[ "$FLOOD" == 1 ]] || exit 0

# --- part 2: one client floods, the others measure --------------------------
for name in rules-on rules-off; do kill "${server_pid[$name]}" 2> /dev/null || true; done
# unlimited: no client limit; kept-open: client_rate, but a connection
# refused again and again is never closed (client_rate_close_after = 0,
# tern before it had the option); limited: client_rate with the default
# client_rate_close_after.
for name in limited kept-open unlimited; do
    port="$(free_port)"
    rules=""
    [[ "$name" != unlimited ]] && rules="client_rate = \"$RATE\"
client_burst = $BURST"
    [[ "$name" == kept-open ]] && rules+="
client_rate_close_after = 0"
    # The same port on ::1 too: the flooder's address, another client as
    # far as the limits go; one table counts both listeners' clients.
    start_tern "$name" "$(tern_config "$name" "$rules" "127.0.0.1:$port" "[::1]:$port")" "$port"
done

# flood PORT SECONDS OUT: h2load -c8 -m10 from ::1 at full speed for one
# second, again and again until SECONDS have passed: a flooder that opens
# 8 new connections every second (h2load does not reconnect by itself: a
# run whose connections tern closed sits idle until its second is over).
# Each run's report is appended to OUT.
flood() {
    local port="$1" end=$((SECONDS + $2)) out="$3"
    : > "$out"
    while ((end - SECONDS > 0)); do
        # :authority given: h2load writes an IPv6 one without its brackets
        # (::1:PORT), which tern refuses as malformed.
        taskset -c "$LOAD_CPU" h2load -c 8 -m 10 -D 1 -H ":authority: localhost" \
            "https://[::1]:$port/" >> "$out" 2>&1 || true
    done
}

flood_rows="$work/flood.tsv"
: > "$flood_rows"
for name in unlimited kept-open limited; do
    port="${server_port[$name]}"
    read -r p99_alone failed_alone _ < <(keepalive_load "$port" --rate "$LOAD_RATE")
    flood "$port" $((LOAD_S + 4)) "$work/flood.$name" &
    flood_pid=$!
    # Let the flood reach its pace before the well-behaved clients measure.
    sleep 2
    read -r p99_flood failed_flood done_flood < <(keepalive_load "$port" --rate "$LOAD_RATE")
    wait "$flood_pid" || true
    flood_2xx="$(awk '/^status codes:/ {gsub(/,/, ""); s += $3} END {print s + 0}' "$work/flood.$name")"
    flood_4xx="$(awk '/^status codes:/ {gsub(/,/, ""); s += $7} END {print s + 0}' "$work/flood.$name")"
    flood_runs="$(grep -c '^starting benchmark' "$work/flood.$name" || true)"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$p99_alone" "$p99_flood" "$failed_flood" "$done_flood" \
        "${flood_2xx:-0}" "${flood_4xx:-0}" "${flood_runs:-0}" >> "$flood_rows"
    echo "$name: p99 ${p99_alone} ms alone, ${p99_flood} ms under the flood" >&2
done
echo
echo "## One client floods (h2load -c8 -m10 from ::1), the others measure (tern bench -k -c $C --rate $LOAD_RATE from 127.0.0.1, ${LOAD_S}s; $LOAD_PRIORITY_NOTE)"
echo
python3 - "$flood_rows" "$RATE" "$BURST" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
print("| tern | well-behaved p99 alone (ms) | under the flood (ms) | ratio | well-behaved failed | flooder 2xx | flooder 4xx (429) | flooder h2load runs |")
print("|---|---|---|---|---|---|---|---|")
labels = {
    "unlimited": "no client limit",
    "kept-open": f"client_rate {sys.argv[2]} burst {sys.argv[3]}, client_rate_close_after 0",
    "limited": f"client_rate {sys.argv[2]} burst {sys.argv[3]}, client_rate_close_after default",
}
for name, alone, flood, failed, done, ok, limited, runs in rows:
    ratio = float(flood) / float(alone) if float(alone) > 0 else float("nan")
    print(f"| {labels[name]} | {float(alone):.2f} | {float(flood):.2f} | **{ratio:.2f}** | {failed} of {int(done) + int(failed)} | {ok} | {limited} | {runs} |")
PY
echo
echo "- each: one worker and the backend on CPU $SERVER_CPU, flood and well-behaved load on CPU $LOAD_CPU; the flood starts 2 s before the measurement; h2load runs for 1 s at a time, again and again (8 new connections a second: a flooder that comes back after tern closes it)"
