# shellcheck shell=bash disable=SC2154
# (SC2154: work is the caller's global.)
# Counters of a bench round read before and after it, cheap enough to
# leave on for the CPU figures (no tracer; syscall_count_* excepted): what
# a server and the backend did per request besides spend CPU. Sourced by
# bench/lib.sh.

# proc_counters PID: counters of PID and its child processes (every
# thread), read from /proc with no tracer attached, as one line
# "vcs nvcs syscr syscw run_ns wait_ns slices":
#   vcs, nvcs     voluntary context switches (it parked, so a wake-up
#                 follows) and nonvoluntary ones (preempted);
#                 /proc/P/task/T/status
#   syscr, syscw  read- and write-family system calls, /proc/P/io: the
#                 kernel counts read/readv/write/writev there, not
#                 recv*/send* (tern reads its sockets with recvfrom and
#                 sends with sendto), so for sockets they are a part only
#   run_ns        time on a CPU, /proc/P/task/T/schedstat field 1
#   wait_ns       time runnable but queued for the CPU (field 2): how long
#                 it waited behind what shares its CPU
#   slices        times it was put on a CPU (field 3)
# A thread that exits takes its counts with it (the servers here keep theirs).
proc_counters() {
    local p files=()
    for p in "$1" $(pgrep -P "$1" || true); do
        files+=(/proc/"$p"/task/*/status /proc/"$p"/task/*/schedstat /proc/"$p"/io)
    done
    awk '
        FILENAME ~ /status$/ && $1 == "voluntary_ctxt_switches:" { v += $2 }
        FILENAME ~ /status$/ && $1 == "nonvoluntary_ctxt_switches:" { n += $2 }
        FILENAME ~ /schedstat$/ { run += $1; wait += $2; slices += $3 }
        FILENAME ~ /io$/ && $1 == "syscr:" { r += $2 }
        FILENAME ~ /io$/ && $1 == "syscw:" { w += $2 }
        END { printf "%d %d %d %d %.0f %.0f %d\n", v, n, r, w, run, wait, slices }
    ' "${files[@]}" 2> /dev/null || true
}

# cpu_busy CPU: "busy steal" clock ticks of CPU so far (/proc/stat: busy is
# user+nice+system+irq+softirq, steal the time the hypervisor gave away).
# Over a round, its busy time less the server's and the backend's is what
# everything else ran on that CPU.
cpu_busy() {
    awk -v c="cpu$1" '$1 == c { print $2 + $3 + $4 + $7 + $8, $9 }' /proc/stat
}

# counters_delta BEFORE AFTER PREFIX: the difference of two proc_counters
# lines as TSV fields PREFIXvcs=N PREFIXnvcs=N ... (wait and run in µs).
counters_delta() {
    local -a b a
    read -r -a b <<< "$1"
    read -r -a a <<< "$2"
    printf '%svcs=%d\t%snvcs=%d\t%ssyscr=%d\t%ssyscw=%d\t%srun_us=%d\t%swait_us=%d\t%sslices=%d' \
        "$3" $((a[0] - b[0])) "$3" $((a[1] - b[1])) "$3" $((a[2] - b[2])) "$3" $((a[3] - b[3])) \
        "$3" $(((a[4] - b[4]) / 1000)) "$3" $(((a[5] - b[5]) / 1000)) "$3" $((a[6] - b[6]))
}

# syscall_count_start FILE PID: counts the system calls and epoll waits of
# PID, its child processes and their threads with `perf stat` (tracepoints:
# no samples, but each call pays a little, every server alike) into FILE
# until syscall_count_stop FILE.
declare -gA SYSCOUNT_PIDS=()
syscall_count_start() {
    perf_count_start "$1" "$2" raw_syscalls:sys_enter,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_epoll_pwait2
}

# perf_count_start FILE PID EVENTS: `perf stat -e EVENTS` on PID, its child
# processes and their threads into FILE, until syscall_count_stop FILE.
perf_count_start() {
    local file="$1" list
    list="$(pgrep -P "$2" | tr '\n' ',' || true)$2"
    perf stat -x, -o "$file" -e "$3" -p "$list" 2> /dev/null &
    SYSCOUNT_PIDS[$file]=$!
    # Wait until perf holds its events open (its descriptors appear), so
    # that the load's first calls are counted.
    for _ in $(seq 1 100); do
        [[ $(find "/proc/$!/fd" -mindepth 1 2> /dev/null | wc -l) -gt 6 ]] && break
        sleep 0.02
    done
}

# syscall_count_stop FILE: stops the count syscall_count_start FILE began
# (in this shell: a $(...) cannot wait for it).
syscall_count_stop() {
    local pid="${SYSCOUNT_PIDS[$1]}"
    kill -INT "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
}

# syscall_count_read FILE PREFIX: "PREFIXsys=N<TAB>PREFIXepoll=N" (every
# system call; epoll waits) from a count syscall_count_stop ended.
syscall_count_read() {
    awk -F, -v p="$2" '
        $3 == "raw_syscalls:sys_enter" { sys += $1 }
        $3 ~ /epoll_(p)?wait/ { ep += $1 }
        END { printf "%ssys=%d\t%sepoll=%d", p, sys, p, ep }' "$1"
}

# PMU_EVENTS: the events pmu_count_start counts. perf's generic names,
# which it maps to each CPU's own; a CPU without one reads "-".
PMU_EVENTS="${PMU_EVENTS:-cycles,instructions,L1-dcache-load-misses,LLC-load-misses,dTLB-load-misses,iTLB-load-misses}"

# pmu_check: dies unless this machine's perf can count the first of
# PMU_EVENTS (a VM without a virtual PMU cannot: "<not supported>").
pmu_check() {
    local first="${PMU_EVENTS%%,*}" out
    out="$(perf stat -x, -e "$first" -- true 2>&1 >/dev/null)"
    grep -q "^[0-9]" <<< "$out" ||
        die "PMU=1: perf cannot count $first here (${out:-no output}); this needs a machine with a PMU"
}

# pmu_count_start FILE PID: counts PMU_EVENTS in PID, its children and their
# threads (user and kernel) into FILE until syscall_count_stop FILE.
pmu_count_start() {
    perf_count_start "$1" "$2" "$PMU_EVENTS"
}

# pmu_count_read FILE: "pmu_EVENT=N" for each of PMU_EVENTS, tab-separated
# ("-" where perf could not count it), from a count that was stopped.
pmu_count_read() {
    awk -F, -v events="$PMU_EVENTS" '
        { v[$3] = $1 }
        END {
            n = split(events, e, ",")
            for (i = 1; i <= n; i++) {
                x = (e[i] in v && v[e[i]] ~ /^[0-9]+(\.[0-9]+)?$/) ? v[e[i]] : "-"
                printf "%spmu_%s=%s", (i > 1 ? "\t" : ""), e[i], x
            }
        }' "$1"
}

# backend_status PORT: "accepts active" of the backend nginx on 127.0.0.1:PORT
# (its stub_status, see start_backend): connections it accepted so far and
# holds open now, this query's own connection included in both.
backend_status() {
    curl -sS --max-time 5 "http://127.0.0.1:$1/bench-status" |
        awk 'NR == 1 {active = $3} NR == 3 {accepts = $1} END {print accepts + 0, active + 0}'
}

# backend_requests PORT: requests the backend nginx on 127.0.0.1:PORT has
# read so far (its stub_status), this query's own included.
backend_requests() {
    curl -sS --max-time 5 "http://127.0.0.1:$1/bench-status" | awk 'NR == 3 {print $3 + 0}'
}

# A load tool's run holds more than its requests: it opens its connections
# (CONNS full TLS handshakes) at the start and closes them at the end, and
# what that costs differs between servers far more than a request does
# (tern's handshake is a third of hitch's). Over a 3-second keepalive round
# of ~45,000 requests, 50 handshakes are 1.0 % of tern's CPU and 2.6 % of
# hitch's: a ratio taken over the whole run would read ~1.6 % in tern's
# favour. So the figures of a kept-alive load are taken over a window inside
# the run instead: the load starts with DURATION + LOAD_MARGIN_S seconds to
# run, the window opens once all its connections are established and have
# settled, and closes DURATION seconds later, before the load ends; requests
# are the backend's over the window (every server forwards each request to
# it, and nothing else does), CPU the server's over the same window.
LOAD_MARGIN_S="${LOAD_MARGIN_S:-3}"
LOAD_SETTLE_S="${LOAD_SETTLE_S:-0.5}"

# load_start OUT CMD...: runs CMD (the load tool) in the background, its
# stdout and stderr to OUT; sets LOAD_PID.
load_start() {
    local out="$1"
    shift
    "$@" > "$out" 2>&1 &
    LOAD_PID=$!
}

# load_wait_settled PORT CONNS: waits until CONNS connections to PORT are
# established (the load tool's, seen from the server's side of the socket),
# then LOAD_SETTLE_S more for their handshakes and first requests; dies if
# the load tool exits or they are not all up within LOAD_MARGIN_S - 1 s.
load_wait_settled() {
    local port="$1" conns="$2" deadline now up
    deadline=$((${EPOCHREALTIME/./} + (LOAD_MARGIN_S - 1) * 1000000))
    while :; do
        kill -0 "$LOAD_PID" 2> /dev/null || die "the load tool ended before its $conns connections to port $port were up"
        up="$(ss -Htn state established "( sport = :$port )" | wc -l)"
        ((up >= conns)) && break
        now="${EPOCHREALTIME/./}"
        ((now < deadline)) || die "only $up of $conns connections to port $port up after $((LOAD_MARGIN_S - 1)) s (raise LOAD_MARGIN_S)"
        sleep 0.02
    done
    sleep "$LOAD_SETTLE_S"
}

# window_begin BACKEND_PORT / window_end BACKEND_PORT: the window's own
# readings, after the caller's CPU readings at each end (so the two spans
# are shifted alike): the backend's request count and the wall clock.
# window_end dies unless the load tool is still running (the window must
# lie inside its run) and sets WINDOW_REQUESTS (less the status query that
# closed the window) and WINDOW_RATE (requests per second over it).
window_begin() {
    window_requests_before="$(backend_requests "$1")"
    window_wall_before="$EPOCHREALTIME"
}
window_end() {
    local requests_after wall_after
    requests_after="$(backend_requests "$1")"
    wall_after="$EPOCHREALTIME"
    kill -0 "$LOAD_PID" 2> /dev/null ||
        die "the load tool ended before the measuring window closed (raise LOAD_MARGIN_S)"
    WINDOW_REQUESTS=$((requests_after - window_requests_before - 1))
    WINDOW_RATE="$(awk -v n="$WINDOW_REQUESTS" -v a="$window_wall_before" -v b="$wall_after" \
        'BEGIN {printf "%.1f", n / (b - a)}')"
}

# load_finish: waits for the load tool to end; returns its status.
load_finish() {
    wait "$LOAD_PID"
}

# children_cpu_ms VAR: sets VAR to the user+system CPU ms of this shell's
# finished children (bash's `times`, second line): the load tool's CPU, by
# difference around a run (the few helpers in between add a millisecond or
# two). Not in a $(...): a subshell's own children start from zero.
children_cpu_ms() {
    local file="$work/.children-times"
    times > "$file"
    printf -v "$1" '%s' "$(awk 'NR == 2 {
        split($1, u, /[ms]/); split($2, s, /[ms]/)
        printf "%.0f\n", (u[1] * 60 + u[2] + s[1] * 60 + s[2]) * 1000 }' "$file")"
}

# canary_start CPU FILE: bench/canary.py pinned to CPU, timing a fixed
# piece of work by its CPU time every half second into FILE until
# canary_stop FILE. Sets CANARY_PIDS[FILE].
declare -gA CANARY_PIDS=()
canary_start() {
    taskset -c "$1" python3 "$(dirname "${BASH_SOURCE[0]}")/canary.py" "$2" 0.5 &
    CANARY_PIDS[$2]=$!
}

# canary_stop FILE: stops that canary (in this shell: a $(...) cannot wait).
canary_stop() {
    kill -TERM "${CANARY_PIDS[$1]}" 2> /dev/null || true
    wait "${CANARY_PIDS[$1]}" 2> /dev/null || true
}

# canary_median FILE: the median µs of the canary's samples (0 if none).
canary_median() {
    sort -n "$1" 2> /dev/null | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else printf "%.0f\n", (v[int((NR + 1) / 2)] + v[int((NR + 2) / 2)]) / 2 }'
}

# round_begin SERVER_PID BACKEND_PID / round_end SERVER_PID BACKEND_PID:
# what moved in a round beside the server's CPU, for bench/h2.sh and
# bench/terminators.sh: the server's and the backend's context switches
# and queueing (proc_counters), what else ran on the server's CPU
# (cpu_busy), the round's wall time and a canary on each CPU (canary.py: a
# fixed piece of work timed every half second; a higher median means a
# slower core in that round, a host effect no server caused). Reads the
# caller's SERVER_CPU, LOAD_CPU, backend_cpu and work. round_end sets
# ROUND_FIELDS (TSV NAME=VALUE fields for `record`); a caller that reads
# its children's CPU (the load tool's) does so before round_end, which
# reaps the canaries.
round_begin() {
    rb_server="$(proc_counters "$1")"
    rb_backend="$(proc_counters "$2")"
    read -r rb_cpu0 rb_steal0 <<< "$(cpu_busy "$SERVER_CPU")"
    rb_wall="$EPOCHREALTIME"
    canary_start "$SERVER_CPU" "$work/canary0"
    canary_start "$LOAD_CPU" "$work/canary1"
}
round_end() {
    local cpu0 steal0 wall_ms
    read -r cpu0 steal0 <<< "$(cpu_busy "$SERVER_CPU")"
    wall_ms="$(awk -v a="$rb_wall" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.0f", (b - a) * 1000}')"
    canary_stop "$work/canary0"
    canary_stop "$work/canary1"
    ROUND_FIELDS="$(counters_delta "$rb_server" "$(proc_counters "$1")" "")	$(counters_delta "$rb_backend" "$(proc_counters "$2")" be_)"
    ROUND_FIELDS+="	loadavg=$(cut -d' ' -f1 /proc/loadavg)	wall_ms=$wall_ms	be_on_server_cpu=$((backend_cpu == SERVER_CPU))"
    ROUND_FIELDS+="	canary0_us=$(canary_median "$work/canary0")	canary1_us=$(canary_median "$work/canary1")"
    ROUND_FIELDS+="	cpu0_ticks=$((cpu0 - rb_cpu0))	steal0_ticks=$((steal0 - rb_steal0))"
}

# isolate_rounds SCRIPT ARGS...: with ISOLATE=1, runs SCRIPT again (and
# does not return) in a session of its own whose scheduler autogroup has
# nice -20, so its servers, backend and load take CPU 0 and 1 ahead of
# whatever else runs on a shared host (builds, tests): with autogroups on,
# a process's nice only counts inside its session, so a plain `nice` does
# not do it. The rest of the host gets what the rounds leave (its work
# slows while they run). The per-round "others on CPU 0" column says what
# still ran beside the server. Needs root; without it, warns and goes on.
isolate_rounds() {
    [[ -n "${ISOLATE:-}" && -z "${BENCH_ISOLATED:-}" ]] || return 0
    export BENCH_ISOLATED=1
    # shellcheck disable=SC2016 # $0 and $@ belong to the inner bash
    exec setsid --wait bash -c '
        echo -20 > /proc/self/autogroup 2> /dev/null ||
            echo "bench: ISOLATE=1: could not set this session'"'"'s autogroup nice (root, /proc/PID/autogroup): not isolated" >&2
        echo "bench: isolated: $(cat /proc/self/autogroup 2> /dev/null)" >&2
        exec "$0" "$@"' "$@"
}
