#!/usr/bin/env bash
# User vs system CPU of a new connection + one 100 B request, QUIC (HTTP/3)
# against TCP+TLS (HTTP/1.1), for tern's server and for the load tool
# (issue 26: new QUIC <= 1.3x new TCP+TLS). Says whether the gap between the
# two is the kernel's or user space's. Both passes hit the same tern process,
# alternated ROUNDS times (h3, h1, h3, h1, ...), each after WARM unmeasured
# connections:
#
#   server   utime / stime deltas of tern (/proc/PID/stat, all threads)
#            over the N measured connections;
#   client   the load tool's own utime / stime (/usr/bin/time).
#
# CPU times: take them on an idle machine; on a shared one the split
# (user / system share of each) is what reads, not the absolute figure.
# Ticks are 1/CLK_TCK s: use N >= 2000 so one tick is below 1 %.
#
# Usage: bench/cpu-split.sh   (env: N=2000 WARM=200 C=10 ROUNDS=2
#          PROTOS="h3 h1" TERN=target/release/tern BENCH_TERN=...)
# Needs: nginx, openssl, python3, taskset. Only 127.0.0.1 is ever a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

N="${N:-2000}"
WARM="${WARM:-200}"
C="${C:-10}"
ROUNDS="${ROUNDS:-2}"
quic_new_conn_defaults
[[ -x /usr/bin/time ]] || die "needs /usr/bin/time"

bench_workdir tern-cpu-split
make_cert ecdsa
www_backend "$SERVER_CPU"
start_servers "$backend_port" tern
port="${server_port[tern]}"
pid="${server_pid[tern]}"
tck="$(getconf CLK_TCK)"

# user_sys PID: "utime stime" (ticks) of PID, all its threads.
user_sys() {
    local stat
    stat="$(cat "/proc/$1/stat")"
    stat="${stat##*) }"
    read -r -a f <<< "$stat"
    echo "${f[11]} ${f[12]}"
}

# threads PID: one line per thread: "tid name utime stime voluntary nonvoluntary".
threads() {
    local t stat
    for t in /proc/"$1"/task/*; do
        stat="$(cat "$t/stat" 2>/dev/null)" || continue
        read -r -a f <<< "${stat##*) }"
        echo "${t##*/} $(tr ' ' _ < "$t/comm") ${f[11]} ${f[12]} $(awk '/^voluntary_ctxt/ {v=$2} /^nonvoluntary_ctxt/ {n=$2} END {print v, n}' "$t/status")"
    done
}

# load PROTO COUNT JSON TIMEFILE: COUNT new connections, one request each.
load() {
    local -a proto=()
    [[ "$1" == h3 ]] && proto=(--h3)
    /usr/bin/time -f "%U %S" -o "$4" taskset -c "$LOAD_CPU" "$BENCH_TERN" bench "${proto[@]}" \
        --plan new -n "$2" -c "$C" -k --ciphers "$TLS_SUITE" --groups "$TLS_GROUP" \
        --no-progress -o json "https://127.0.0.1:$port/" > "$3"
}

echo "New connection + one 100 B request, per connection in µs: N=$N (after $WARM), -c $C, $ROUNDS rounds; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-5s %9s %9s %9s %9s %9s %8s\n' round proto srv_user srv_sys srv_all cli_user cli_sys failed
for round in $(seq "$ROUNDS"); do
    for proto in ${PROTOS:-h3 h1}; do
        load "$proto" "$WARM" "$work/warm.json" "$work/warm.time"
        read -r u0 s0 <<< "$(user_sys "$pid")"
        threads "$pid" > "$work/threads0"
        load "$proto" "$N" "$work/run.json" "$work/run.time"
        read -r u1 s1 <<< "$(user_sys "$pid")"
        threads "$pid" > "$work/threads1"
        python3 - "$round" "$proto" "$N" "$tck" "$u0" "$s0" "$u1" "$s1" "$work/run.time" "$work/run.json" <<'PY'
import json, sys
rnd, proto, n, tck, u0, s0, u1, s1, tfile, run = sys.argv[1:]
n, tck = int(n), int(tck)
us = lambda ticks: ticks * 1e6 / tck / n
su, ss = us(int(u1) - int(u0)), us(int(s1) - int(s0))
cu, cs = (float(x) * 1e6 / n for x in open(tfile).read().split()[-2:])
t = json.load(open(run))
tg = t["targets"][0] if "targets" in t else t
failed = (tg.get("summary") or {}).get("failed", tg.get("failed", "?"))
print(f"{rnd:<6} {proto:<5} {su:9.1f} {ss:9.1f} {su+ss:9.1f} {cu:9.1f} {cs:9.1f} {failed!s:>8}")
PY
        python3 - "$N" "$tck" "$work/threads0" "$work/threads1" <<'PY'
import sys
n, tck, a, b = sys.argv[1:]
n, tck = int(n), int(tck)
before = {l.split()[0]: l.split() for l in open(a)}
for line in open(b):
    t = line.split()
    o = before.get(t[0], [t[0], t[1], 0, 0, 0, 0])
    d = [int(x) - int(y) for x, y in zip(t[2:], o[2:])]
    if any(d):
        print(f"         thread {t[1]:<16} user {d[0]*1e6/tck/n:7.1f} sys {d[1]*1e6/tck/n:7.1f} µs,"
              f" switches vol {d[2]/n:5.2f} invol {d[3]/n:5.2f} per connection")
PY
    done
done
echo "srv_*: tern's utime/stime deltas (/proc/$pid/stat) over the measured load; cli_*: the load tool's (/usr/bin/time), per connection"
