#!/usr/bin/env bash
# The kernel side of a kept-alive HTTP/1.1 request (issue 26: keepalive at
# <= 0.9x hitch), tern and its peers on the same load, per request. Layout
# of bench/keepalive-split.sh (terminators.sh with BACKEND_CPU=server): the
# server (one worker) and the nginx backend serving 100 bytes on CPU 0,
# `wrk -t1 -c50` on CPU 1, TLS 1.3 AES-128-GCM X25519. For each server in
# turn, a 1 s warm-up, then a DURATION second run; over its middle
# (WINDOW seconds, from 1 s in, while all 50 connections are open):
#   - perf record -g -e cpu-clock -C 0: the server's and the backend's
#     samples, user against kernel, the kernel by function group (the
#     first frame from the leaf that names one: scheduler/switch, wake-up,
#     epoll, copy, skb/slab memory, TCP/IP receive (the loopback softirq a
#     send runs in the sender's context), TCP/IP send, socket read,
#     syscall entry/exit) and by system call (bench/kernel_parts.py);
#   - perf stat, over a second window of 1 s after it (its tracepoints
#     slow every system call, so not while perf samples): the server's
#     system calls by kind;
#   - /proc/PID/task/*/status: context switches, voluntary and
#     nonvoluntary, of the server, the backend and wrk;
#   - ss -ti before and after: data segments, pure ACKs and bytes each end
#     of both legs sent (bench/tcp_legs.py); TLS records per response =
#     (bytes the server sent the client - the plaintext response curl
#     gets) / 22 (a TLS 1.3 record's header, type and tag);
#   - nstat: the host's delayed ACKs (host-wide: read it on a quiet host).
# Requests = the data segments the server's client side received in the
# window (one per request). Counts barely move with load; perf's µs do:
# take those on an idle machine and compare servers within one run.
#
# Usage: bench/keepalive-kernel.sh   (env: TERN=target/release/tern
#          SERVERS="tern hitch" DURATION=11 WINDOW=4 ROUNDS=1 FREQ=4999
#          SRV_TERN_ARGS=... for tern options under test)
# Needs: perf, wrk, nginx, openssl, curl, python3, taskset, ss, nstat
# (and the peers); root (perf attaches to CPU 0). Only 127.0.0.1 is a
# target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

TERN="${TERN:-$root/target/release/tern}"
SERVERS="${SERVERS:-tern hitch}"
DURATION="${DURATION:-11}"
WINDOW="${WINDOW:-4}"
ROUNDS="${ROUNDS:-1}"
FREQ="${FREQ:-4999}"
SERVER_CPU=0
LOAD_CPU=1
SRV_POOL=256
SRV_ALPN=http/1.1
for tool in perf wrk nginx openssl curl python3 taskset ss nstat; do need "$tool"; done
[[ " $SERVERS " == *" nginx "* ]] && die "SERVERS: nginx cannot be measured here (the backend is nginx too)"
[[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"
(( DURATION >= WINDOW + 5 )) || die "DURATION must be at least WINDOW + 5 (perf takes a while to stop on a busy host)"

bench_workdir tern-keepalive-kernel
make_cert ecdsa
mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/index.html"
backend_port="$(free_port)"
start_backend "$backend_port" "$SERVER_CPU"
backend_master=$STARTED_PID
# shellcheck disable=SC2086 # SERVERS is a list of words
start_servers "$backend_port" $SERVERS

# comms_of SERVER: the command names of its threads, for kernel_parts.py.
comms_of() {
    case "$1" in
        tern) echo "tern,tokio-" ;;
        *) echo "$1" ;;
    esac
}

NSTAT_KEYS="TcpOutSegs TcpExtDelayedACKs TcpExtDelayedACKLocked TcpExtTCPHPAcks TcpExtTCPPureAcks"
nstat_abs() {
    nstat -az 2> /dev/null | awk -v keys="$NSTAT_KEYS" 'BEGIN { split(keys, k, " "); for (i in k) want[k[i]] = 1 } ($1 in want) { print $1, $2 }'
}

read -r -a backend_pids <<< "$(pids_of "$backend_master")"
results="$work/results"
: > "$results"
for round in $(seq 1 "$ROUNDS"); do
    for server in "${active[@]}"; do
        port="${server_port[$server]}"
        url="https://127.0.0.1:$port/"
        read -r -a spids <<< "$(pids_of "${server_pid[$server]}")"
        plain="$(curl -sSk --http1.1 -D - -o /dev/null "$url" | wc -c)"
        plain=$((plain + 100))
        taskset -c "$LOAD_CPU" wrk -t1 -c50 -d1s -H "Connection: keep-alive" "$url" > /dev/null
        taskset -c "$LOAD_CPU" wrk -t1 -c50 -d"${DURATION}s" -H "Connection: keep-alive" "$url" > "$work/wrk.out" &
        wrk_pid=$!
        # Into the run: every connection open, the warm-up's closed.
        sleep 1
        perf record -q -g -e cpu-clock -F "$FREQ" -C "$SERVER_CPU" -o "$work/perf.data" 2> "$work/perf.err" &
        perf_pid=$!
        for _ in $(seq 1 100); do [[ -s "$work/perf.data" ]] && break; sleep 0.05; done
        ss -tinH state established > "$work/ss.before"
        read -r sv0 sn0 <<< "$(switches "${spids[@]}")"
        read -r bv0 bn0 <<< "$(switches "${backend_pids[@]}")"
        read -r wv0 wn0 <<< "$(switches "$wrk_pid")"
        nstat_abs > "$work/nstat.before"
        sleep "$WINDOW"
        ss -tinH state established > "$work/ss.after"
        read -r sv1 sn1 <<< "$(switches "${spids[@]}")"
        read -r bv1 bn1 <<< "$(switches "${backend_pids[@]}")"
        read -r wv1 wn1 <<< "$(switches "$wrk_pid")"
        nstat_abs > "$work/nstat.after"
        kill -INT "$perf_pid"
        wait "$perf_pid" || true
        # A second window for the system calls: perf stat's tracepoints
        # slow every call, so not while perf record samples. Its counters
        # start disabled and are switched on and off through its control
        # FIFO, which acknowledges each switch: the counts cover the same
        # span as the ss snapshots, however long perf took to attach.
        rm -f "$work/ctl" "$work/ack"
        mkfifo "$work/ctl" "$work/ack"
        perf stat -D -1 --control "fifo:$work/ctl,$work/ack" -x, -o "$work/stat" \
            -e raw_syscalls:sys_enter,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendto,syscalls:sys_enter_writev,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_ctl \
            -p "$(IFS=,; echo "${spids[*]}")" &
        stat_pid=$!
        exec 8<> "$work/ctl" 9<> "$work/ack"
        echo enable >&8
        read -r -t 20 -u 9 _ || die "perf stat did not start counting"
        ss -tinH state established > "$work/ss.stat0"
        sleep 1
        ss -tinH state established > "$work/ss.stat1"
        echo disable >&8
        read -r -t 20 -u 9 _ || die "perf stat did not stop counting"
        exec 8>&- 9>&-
        kill -INT "$stat_pid"
        wait "$stat_pid" || true
        kill -0 "$wrk_pid" 2> /dev/null || die "$server: the load ended before the second window did (raise DURATION)"
        wait "$wrk_pid"
        stat_requests="$(python3 "$here/tcp_legs.py" "$work/ss.stat0" "$work/ss.stat1" "$port" "$backend_port" \
            | python3 -c 'import ast, sys; print(ast.literal_eval(sys.stdin.read())["requests"])')"
        legs="$(python3 "$here/tcp_legs.py" "$work/ss.before" "$work/ss.after" "$port" "$backend_port")"
        requests="$(python3 -c 'import ast, sys; print(ast.literal_eval(sys.argv[1])["requests"])' "$legs")"
        (( requests > 0 )) || die "$server: no requests counted in the window"
        perf script -F comm,tid,ip,sym,dso -i "$work/perf.data" 2> /dev/null > "$work/perf.txt"
        own="$(python3 "$here/kernel_parts.py" "$requests" "$FREQ" "$(comms_of "$server")" "$server" < "$work/perf.txt")"
        back="$(python3 "$here/kernel_parts.py" "$requests" "$FREQ" nginx backend < "$work/perf.txt")"
        {
            echo "round=$round server=$server requests=$requests plain=$plain stat_requests=$stat_requests"
            echo "legs=$legs"
            echo "own=$own"
            echo "backend=$back"
            echo "switches=$((sv1 - sv0)) $((sn1 - sn0)) $((bv1 - bv0)) $((bn1 - bn0)) $((wv1 - wv0)) $((wn1 - wn0))"
            echo "stat=$(awk -F, '$3 != "" {printf "%s:%s ", $3, $1}' "$work/stat")"
            echo "nstat=$(join "$work/nstat.before" "$work/nstat.after" | awk '{printf "%s:%d ", $1, $3 - $2}')"
        } >> "$results"
    done
done

python3 - "$results" <<'PY'
import ast, sys
runs, cur = [], None
for line in open(sys.argv[1]):
    key, _, val = line.rstrip("\n").partition("=")
    if key == "round":
        cur = dict(kv.split("=") for kv in line.split())
        runs.append(cur)
    elif key in ("legs", "own", "backend"):
        cur[key] = ast.literal_eval(val)
    else:
        cur[key] = val
cols = [f"{r['server']} (round {r['round']})" for r in runs]
print("| per request | " + " | ".join(cols) + " |")
print("|---|" + "---|" * len(cols))
def row(name, f):
    print(f"| {name} | " + " | ".join(f(r) for r in runs) + " |")
n = lambda r: int(r["requests"])
row("requests in the window", lambda r: r["requests"])
row("server CPU, perf µs (user + kernel)", lambda r: f"{r['own']['user'] + r['own']['kernel']:.2f} ({r['own']['user']:.2f} + {r['own']['kernel']:.2f})")
groups = sorted({g for r in runs for g in r["own"]["groups"]}, key=lambda g: -max(r["own"]["groups"].get(g, 0) for r in runs))
for g in groups:
    row(f"  kernel: {g}", lambda r, g=g: f"{r['own']['groups'].get(g, 0):.2f}")
calls = sorted({s for r in runs for s in r["own"]["syscalls"]}, key=lambda s: -max(r["own"]["syscalls"].get(s, 0) for r in runs))
for s in calls:
    row(f"  kernel in {s}", lambda r, s=s: f"{r['own']['syscalls'].get(s, 0):.2f}")
row("backend (nginx) CPU, perf µs (user + kernel)", lambda r: f"{r['backend']['user'] + r['backend']['kernel']:.2f} ({r['backend']['user']:.2f} + {r['backend']['kernel']:.2f})")
def st(r):
    out = {}
    for kv in r["stat"].split():
        k, _, v = kv.rpartition(":")
        out[k.replace("syscalls:sys_enter_", "").replace("raw_syscalls:sys_enter", "all")] = int(v) if v.isdigit() else 0
    return out
for k in ("all", "recvfrom", "sendto", "writev", "read", "write", "epoll_wait", "epoll_ctl"):
    row(f"server system calls: {k} (perf stat, second window)", lambda r, k=k: f"{st(r).get(k, 0) / int(r['stat_requests']):.3f}")
names = ("server", "server", "backend", "backend", "wrk", "wrk")
kinds = ("voluntary", "nonvoluntary") * 3
for i in range(6):
    row(f"context switches: {names[i]}, {kinds[i]}", lambda r, i=i: f"{int(r['switches'].split()[i]) / n(r):.3f}")
for end in ("load", "server, client side", "server, backend side", "backend"):
    for what in ("data segments sent", "pure ACKs sent", "bytes sent"):
        row(f"{end}: {what}", lambda r, e=end, w=what: str(r["legs"].get(e, {}).get(w, "-")))
row("TLS records per response ((client-side bytes - plaintext) / 22)", lambda r: f"{(r['legs']['server, client side']['bytes sent'] - int(r['plain'])) / 22:.2f}")
def ns(r, k):
    for kv in r["nstat"].split():
        a, _, b = kv.partition(":")
        if a == k:
            return f"{int(b) / n(r):.3f}"
    return "-"
for k in ("TcpOutSegs", "TcpExtDelayedACKs", "TcpExtTCPPureAcks", "TcpExtTCPHPAcks"):
    row(f"host-wide {k} (nstat)", lambda r, k=k: ns(r, k))
PY
echo
echo "load: wrk -t1 -c50 on CPU $LOAD_CPU; servers and the nginx backend on CPU $SERVER_CPU; window ${WINDOW} s of ${DURATION} s runs"
echo "$("$TERN" --version 2>/dev/null | head -1), binary $TERN; tree at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
