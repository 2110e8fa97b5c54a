#!/usr/bin/env bash
# HTTP/2 terminators compared: tern, nginx, haproxy in front of one HTTP/1.1
# backend (nginx serving 100 bytes). hitch is left out: an L4 terminator in
# front of an HTTP/1.1 backend cannot speak h2 to clients.
#
# Every server: one worker pinned to CPU 0, the same ECDSA P-256 certificate,
# TLS 1.3 only, TLS_AES_128_GCM_SHA256 only, X25519 only, ALPN h2,http/1.1,
# access logs off. tern runs with its defaults (its backend pool follows
# demand); nginx keeps up to SRV_POOL (512) idle backend connections (its
# default, none, would open one per request) and haproxy reuses them
# (http-reuse always): the tuning the peers need, written here.
# h2load runs on CPU 1; the backend on CPU 1 (BACKEND_CPU=load, default) or,
# in the strict layout, on CPU 0 with the server (BACKEND_CPU=server).
# Workload: h2load -c50 -m10 (10 concurrent streams per connection; CONNS
# and STREAMS change the two, e.g. to see how the ratio follows the
# connections and streams in flight, BENCHMARKS.md "HTTP/2 at 0.94x"),
# measured over a window of DURATION seconds inside its run, once its
# connections are up (no handshake in the window, bench/counters.sh "A load
# tool's run"); with REQUESTS=N, over whole runs of N requests. Reports
# requests/s (the backend's requests over the window) and server CPU µs per
# request (utime+stime of all the server's processes from /proc), median of RUNS
# interleaved rounds, and ratios of tern against each peer and the best peer.
# Beside each round's CPU, counters read from /proc before and after it (no
# tracer; bench/lib.sh proc_counters): the server's and the backend's
# context switches (voluntary: it parked and was woken), read/write-family
# system calls, time queued for the CPU, the backend connections the server
# opened in the round and held at its end (the backend's stub_status), the
# load tool's CPU and the load average, what else ran on the server's CPU,
# and a canary (bench/canary.py): a fixed piece of work timed by its own CPU
# time on each CPU every half second during the round, so a round in which
# the core itself ran slower (a host effect) shows it. A table per round, so
# a round that costs more can be told apart by what moved with it.
#
# TERN_SLICE_US=N (an experiment): tern's threads get an EEVDF slice of N µs
# (bench/sched_slice.py), said in the conditions.
# ISOLATE=1 (a shared host, root): the rounds run in a scheduler autogroup
# at nice -20, ahead of the host's other work (bench/counters.sh
# isolate_rounds); the conditions say so.
# PMU=1 (a machine with a PMU: not a VM without one) also counts, with perf
# stat, the server's cycles, instructions and cache and TLB misses
# (counters.sh PMU_EVENTS) per request in each round, and its instructions
# per cycle: where a peer's time per instruction differs (BENCHMARKS.md,
# "HTTP/2 at 0.94x"). Each round pays the counting, every server alike.
# SYSCALLS=1 also counts, with perf stat (tracepoints), the system calls and
# epoll waits of the server and of the backend in each round; each
# call then costs a little more, so leave it off for the CPU figures.
#
# Usage: bench/h2.sh   (env: DURATION=10 REQUESTS= RUNS=3 TERN=target/release/tern
#                       SERVERS="tern nginx haproxy" BACKEND_CPU=load|server
#                       SYSCALLS=1 PMU=1 ISOLATE=1 TERN_SLICE_US= CONNS=50 STREAMS=10)
# Needs: nginx (nginx-light), haproxy, h2load (nghttp2-client), openssl, curl,
# python3, ss (iproute2); perf for SYSCALLS=1 and PMU=1.
# Only 127.0.0.1 is ever a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
isolate_rounds "$0" "$@"

DURATION="${DURATION:-10}"
# REQUESTS=N: rounds of N requests (h2load -n) instead of DURATION seconds.
# A timed round ends with up to 500 streams in flight, which h2load drops;
# a counted one ends with none.
REQUESTS="${REQUESTS:-}"
span=(-D "$DURATION")
span_text="${DURATION}s"
if [[ -n "$REQUESTS" ]]; then
    span=(-n "$REQUESTS")
    span_text="$REQUESTS requests"
fi
RUNS="${RUNS:-3}"
CONNS="${CONNS:-50}"
STREAMS="${STREAMS:-10}"
TERN="${TERN:-$root/target/release/tern}"
SERVERS="${SERVERS:-tern nginx haproxy}"
BACKEND_CPU="${BACKEND_CPU:-load}"
SYSCALLS="${SYSCALLS:-}"
PMU="${PMU:-}"
SERVER_CPU=0
LOAD_CPU=1
case "$BACKEND_CPU" in
    load) backend_cpu=$LOAD_CPU ;;
    server) backend_cpu=$SERVER_CPU ;;
    *) die "BACKEND_CPU must be load (backend on CPU $LOAD_CPU) or server (on CPU $SERVER_CPU)" ;;
esac
SRV_POOL=512
SRV_ALPN=h2
for tool in nginx h2load openssl curl python3 taskset ss; do need "$tool"; done
[[ -z "$SYSCALLS" && -z "$PMU" ]] || need perf
[[ -z "$PMU" ]] || pmu_check

bench_workdir tern-h2bench

make_cert ecdsa
mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/index.html"
backend_port="$(free_port)"
start_backend "$backend_port" "$backend_cpu"
backend_pid=$STARTED_PID

servers=()
for server in $SERVERS; do
    if [[ "$server" == hitch ]]; then
        echo "hitch skipped: an L4 terminator in front of an HTTP/1.1 backend cannot serve h2" >&2
        continue
    fi
    servers+=("$server")
done
start_servers "$backend_port" "${servers[@]}"
# TERN_SLICE_US=N: an experiment, not tern's defaults: every thread of tern
# gets an EEVDF slice of N µs (bench/sched_slice.py; Linux 6.12+).
slice_note=""
if [[ -n "${TERN_SLICE_US:-}" && -n "${server_pid[tern]:-}" ]]; then
    slice_note="$(python3 "$here/sched_slice.py" "$TERN_SLICE_US" "${server_pid[tern]}")" ||
        die "TERN_SLICE_US: could not set tern's slice"
    echo "$slice_note" >&2
    slice_note="$(tr '\n' ';' <<< "$slice_note")"
fi
for server in "${active[@]}"; do
    body="$(curl -sS -k --http2 "https://127.0.0.1:${server_port[$server]}/")"
    [[ ${#body} -eq 100 ]] || die "$server did not proxy the 100-byte body over h2 (got ${#body} bytes)"
done

negotiation_report="$work/negotiation.md"
check_negotiation h2,http/1.1 "${active[@]}" > "$negotiation_report" || true
cat "$negotiation_report" >&2

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
results="$work/results.tsv"
: > "$results"
declare -A h2load_saw=()
# The round's readings, before (measure_begin) and after (measure_end) its
# span: the whole h2load run (REQUESTS=N) or a window inside it (timed).
measure_begin() {
    read -r accepts_before _ <<< "$(backend_status "$backend_port")"
    if [[ -n "$SYSCALLS" ]]; then
        syscall_count_start "$work/syscalls.server" "${server_pid[$server]}"
        syscall_count_start "$work/syscalls.backend" "$backend_pid"
    fi
    [[ -z "$PMU" ]] || pmu_count_start "$work/pmu.server" "${server_pid[$server]}"
    round_begin "${server_pid[$server]}" "$backend_pid"
    before="$(cpu_ticks "${server_pid[$server]}")"
    backend_before="$(cpu_ticks "$backend_pid")"
}
measure_end() {
    after="$(cpu_ticks "${server_pid[$server]}")"
    backend_ticks=$(($(cpu_ticks "$backend_pid") - backend_before))
}
for run in $(seq 1 "$RUNS"); do
    for server in "${active[@]}"; do
        url="https://127.0.0.1:${server_port[$server]}/"
        if [[ -n "$REQUESTS" ]]; then
            # The whole run: its handshakes and the load's start and end in it.
            children_cpu_ms load_before_ms
            measure_begin
            out="$(taskset -c "$LOAD_CPU" h2load -c "$CONNS" -m "$STREAMS" "${span[@]}" "$url" 2>&1)"
            measure_end
            children_cpu_ms load_after_ms
            load_ms=$((load_after_ms - load_before_ms))
        else
            # A window of DURATION s inside a longer run, once its CONNS
            # connections are up (bench/counters.sh, "A load tool's run").
            load_start "$work/h2load.out" taskset -c "$LOAD_CPU" h2load -c "$CONNS" -m "$STREAMS" -D "$((DURATION + LOAD_MARGIN_S))" "$url"
            load_wait_settled "${server_port[$server]}" "$CONNS"
            load_ticks_before="$(cpu_ticks "$LOAD_PID")"
            measure_begin
            window_begin "$backend_port"
            sleep "$DURATION"
            measure_end
            window_end "$backend_port"
            load_ms=$((($(cpu_ticks "$LOAD_PID") - load_ticks_before) * 1000 / $(getconf CLK_TCK)))
            load_finish || die "h2load failed against $server: $(cat "$work/h2load.out")"
            out="$(cat "$work/h2load.out")"
        fi
        # After the load's CPU is read: round_end reaps the canaries, whose
        # CPU is not h2load's.
        round_end "${server_pid[$server]}" "$backend_pid"
        read -r accepts_after open_after <<< "$(backend_status "$backend_port")"
        syscalls="sys=-"
        if [[ -n "$SYSCALLS" ]]; then
            syscall_count_stop "$work/syscalls.server"
            syscall_count_stop "$work/syscalls.backend"
            syscalls="$(syscall_count_read "$work/syscalls.server" "")	$(syscall_count_read "$work/syscalls.backend" be_)"
        fi
        pmu="pmu=-"
        if [[ -n "$PMU" ]]; then
            syscall_count_stop "$work/pmu.server"
            pmu="$(pmu_count_read "$work/pmu.server")"
        fi
        failed="$(printf '%s\n' "$out" | awk '/^requests:/ {print $10 + $12}')"
        if [[ -n "$REQUESTS" ]]; then
            done_n="$(printf '%s\n' "$out" | awk '/^requests:/ {print $8}')"
            rate="$(printf '%s\n' "$out" | awk '/^finished in/ {print $4}')"
        else
            done_n="$WINDOW_REQUESTS"
            rate="$WINDOW_RATE"
        fi
        # What h2load itself negotiated in this run.
        h2load_saw[$server]="$(printf '%s\n' "$out" | awk -F': ' '
            /^TLS Protocol/ {p = $2} /^Cipher/ {c = $2} /^Server Temp Key/ {split($2, k, " "); g = k[1]}
            /^Application protocol/ {a = $2} END {print p, c, g, "alpn=" a}')"
        record "$results" h2 "$server" "$run" "${done_n:-0}" "${rate:-0}" "$before" "$after" "${failed:-0}" "$backend_ticks" \
            "$ROUND_FIELDS" "be_opened=$((accepts_after - accepts_before - 1))" \
            "be_open=$((open_after - 1))" "load_ms=$load_ms" "$syscalls" "$pmu"
    done
done

{
    echo "## HTTP/2, 100-byte body, h2load -c$CONNS -m$STREAMS, $span_text x ${RUNS} interleaved runs; server on CPU $SERVER_CPU, h2load on CPU $LOAD_CPU, backend on CPU $backend_cpu (BACKEND_CPU=$BACKEND_CPU)"
    echo
    if [[ -n "$REQUESTS" ]]; then
        echo "Each round's figures span the whole h2load run: its $CONNS handshakes and the streams in flight at its end in them."
    else
        echo "Each round's figures span a ${DURATION}-s window inside a $((DURATION + LOAD_MARGIN_S))-s h2load run, opened ${LOAD_SETTLE_S} s after its $CONNS connections were up: no handshake in them. Requests are the backend's over the window (nginx's stub_status), CPU the server's over the same window."
    fi
    echo
    echo "Negotiated (\`openssl s_client -alpn h2,http/1.1\`):"
    echo
    cat "$negotiation_report"
    echo
    echo "h2load itself negotiated (last round):"
    echo
    first=""
    for server in "${active[@]}"; do
        echo "- $server: ${h2load_saw[$server]}"
        [[ -n "$first" ]] || first="${h2load_saw[$server]}"
        if [[ "${h2load_saw[$server]}" != "$first" ]] || [[ "$first" != "$EXPECTED_TLS alpn=h2" ]]; then
            echo "!!!!!!!! WARNING: h2load negotiated '${h2load_saw[$server]}' with $server, expected '$EXPECTED_TLS alpn=h2' for all !!!!!!!!" | tee /dev/stderr
        fi
    done
    echo
    H2_LOAD="-c$CONNS -m$STREAMS" python3 "$here/table.py" "$results" "$(getconf CLK_TCK)"
    echo
    echo "Conditions:"
    echo
    echo "- CPU: $(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}'), $(nproc) cores; kernel $(uname -r); load average before the runs: $load_before"
    for server in "${active[@]}"; do
        echo "- $server: $(server_version "$server")"
    done
    echo "- tree at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'); $(h2load --version 2>&1 | head -1)"
    if [[ -n "$slice_note" ]]; then
        echo "- TERN_SLICE_US=$TERN_SLICE_US (an experiment, not tern's defaults): tern's threads on an EEVDF slice of their own, $slice_note"
    fi
    if [[ -n "${BENCH_ISOLATED:-}" ]]; then
        echo "- ISOLATE=1: every process of the run in one scheduler autogroup, $(cat /proc/self/autogroup 2> /dev/null || echo '?'), ahead of the host's other work"
    fi
    if [[ -n "$REQUESTS" ]]; then
        echo "- load: taskset -c $LOAD_CPU h2load -c $CONNS -m $STREAMS ${span[*]} https://127.0.0.1:PORT/"
    else
        echo "- load: taskset -c $LOAD_CPU h2load -c $CONNS -m $STREAMS -D $((DURATION + LOAD_MARGIN_S)) https://127.0.0.1:PORT/, measured over a ${DURATION}-s window inside it"
    fi
    echo "- every server: taskset -c $SERVER_CPU, one worker, TLSv1.3 only, $TLS_SUITE only, $TLS_GROUP only, ALPN h2,http/1.1, access log off, X-Forwarded-For/-Proto added; configs in bench/lib.sh (start_server)"
    echo "- idle backend connections: tern its defaults (the pool follows demand), nginx upstream keepalive $SRV_POOL, haproxy http-reuse always"
    echo "- backend: nginx serving a 100-byte file over HTTP/1.1 on 127.0.0.1:$backend_port, one worker pinned to CPU $backend_cpu"
}
