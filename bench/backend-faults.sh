#!/usr/bin/env bash
# Backend faults behind tern, nginx and haproxy in one run: what the client
# of a failing request sees, whether other clients notice, and whether the
# backend pool recovers.
#
# The backend is bench/fault_origin.py (HTTP/1.1, keepalive). Its faults:
# /kill (half the body, then closed), /reset (half the body, then a TCP
# reset), /reset-early (a reset instead of a response), /chunked-cut (three
# chunks, closed without the last one), /stall (1000 bytes, then silence
# longer than every server's backend timeout, TIMEOUT_S).
#
# For each server (one worker pinned to CPU 0 with the origin; clients on
# CPU 1): while a keepalive load (`tern bench -k`, C connections) requests
# /ok, N requests of each fault are sent with curl over HTTP/1.1 and over
# HTTP/2, all of one fault at once. Each is classified from curl's exit code
# and status: a 5xx (clean error), truncated (curl saw the response end
# early: a close before Content-Length, no last chunk, RST_STREAM), or a
# corrupted success (a 200 that ended as if complete: the client cannot
# tell it lost data). Then `tern bench -n 500` on /ok shows whether the
# pool recovered. The figure, last: corrupted successes, failed bystander
# requests and failed requests after the faults, per server.
#
# Usage: bench/backend-faults.sh   (env: N=20 C=4 TIMEOUT_S=2
#          TERN=target/release/tern SERVERS="tern nginx haproxy")
# Needs: nginx, haproxy (optional), curl, python3, taskset. Only 127.0.0.1
# is ever a target; everything stops by itself and the scratch folder is
# removed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

N="${N:-20}"
C="${C:-4}"
TIMEOUT_S="${TIMEOUT_S:-2}"
TERN="${TERN:-$root/target/release/tern}"
SERVERS="${SERVERS:-tern nginx haproxy}"
SERVER_CPU=0
LOAD_CPU=1
FAULTS=(/kill /reset /reset-early /chunked-cut /stall)
for tool in curl python3 taskset timeout; do need "$tool"; done
[[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"

bench_workdir tern-backend-faults
make_cert ecdsa
# The servers' backend timeouts (tern --backend-response-timeout, nginx
# proxy_read_timeout, haproxy timeout server) come from SRV_IDLE_S.
SRV_ALPN=h2
SRV_IDLE_S="$TIMEOUT_S"
backend_port="$(free_port)"
taskset -c "$SERVER_CPU" python3 "$here/fault_origin.py" "$backend_port" $((TIMEOUT_S * 5)) > /dev/null &
pids+=($!)
wait_port "$backend_port"
read -r -a wanted <<< "$SERVERS"
start_servers "$backend_port" "${wanted[@]}"

# outcome HTTP PORT PATH: one request with curl; prints 5xx, truncated,
# corrupted or complete.
outcome() {
    local http="$1" port="$2" path="$3" status rc=0
    status="$(curl -sk "--$http" -o /dev/null -w '%{http_code}' --max-time $((TIMEOUT_S * 4)) \
        "https://127.0.0.1:$port$path")" || rc=$?
    if ((rc != 0)); then
        echo truncated
    elif [[ "$status" == 5* ]]; then
        echo 5xx
    elif [[ "$path" == /ok ]]; then
        echo complete
    else
        echo corrupted
    fi
}
export -f outcome
export TIMEOUT_S

results="$work/results.tsv"
for server in "${active[@]}"; do
    port="${server_port[$server]}"
    [[ "$(outcome http1.1 "$port" /ok)" == complete ]] || die "$server does not serve /ok"
    taskset -c "$LOAD_CPU" "$TERN" bench -z 600s -c "$C" -k -o json \
        "https://127.0.0.1:$port/ok" > "$work/load.$server.json" 2> /dev/null &
    load_pid=$!
    for fault in "${FAULTS[@]}"; do
        for http in http1.1 http2; do
            counts="$(seq 1 "$N" | taskset -c "$LOAD_CPU" xargs -P "$N" -I{} bash -c "outcome $http $port $fault" |
                sort | uniq -c | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2}')"
            printf '%s\t%s\t%s\t%s\n' "$server" "$fault" "$http" "$counts" >> "$results"
            echo "$server $fault $http: $counts" >&2
        done
    done
    kill -INT "$load_pid"
    wait "$load_pid" || true
    bystanders="$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["targets"][0]["summary"]; print(s["failed"], "of", s["completed"] + s["failed"])' "$work/load.$server.json" 2> /dev/null || echo "? of ?")"
    after="$(taskset -c "$LOAD_CPU" "$TERN" bench -n 500 -c "$C" -k -o json "https://127.0.0.1:$port/ok" 2> /dev/null |
        python3 -c 'import json,sys; s=json.load(sys.stdin)["targets"][0]["summary"]; print(s["failed"], "of", s["completed"] + s["failed"])')"
    printf '%s\t-\tbystanders\t%s\n%s\t-\tafter\t%s\n' "$server" "$bystanders" "$server" "$after" >> "$results"
    echo "$server: bystanders failed $bystanders; after the faults failed $after" >&2
done

echo
echo "backend faults: $N requests per fault and protocol at once (curl), during a keepalive load tern bench -k -c $C on /ok; backend timeout ${TIMEOUT_S}s on every server; TLS 1.3 $TLS_SUITE $TLS_GROUP; one worker on CPU $SERVER_CPU with the origin, clients on CPU $LOAD_CPU; $(nproc) CPUs, $(uname -r)"
for server in "${active[@]}"; do echo "  $server: $(server_version "$server")"; done
python3 - "$results" "${active[@]}" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
servers = sys.argv[2:]
faults = sorted({r[1] for r in rows if r[1] != "-"}, key=[r[1] for r in rows].index)
print("| fault | " + " | ".join(f"{s} h1 | {s} h2" for s in servers) + " |")
print("|---|" + "---|" * (2 * len(servers)))
cell = {(s, f, h): c for s, f, h, c in rows}
for f in faults:
    print(f"| {f} | " + " | ".join(f"{cell.get((s, f, 'http1.1'), '')} | {cell.get((s, f, 'http2'), '')}" for s in servers) + " |")
for what in ("bystanders", "after"):
    label = "bystander /ok requests failed" if what == "bystanders" else "/ok requests failed after the faults"
    print(f"| {label} | " + " | ".join(f"{cell.get((s, '-', what), '?')} | " for s in servers) + " |")
def corrupted(s):
    total = 0
    for (srv, f, h), c in cell.items():
        if srv == s and f != "-":
            for part in c.split(", "):
                n, kind = part.split(" ")
                if kind == "corrupted":
                    total += int(n)
    return total
print("backend faults, corrupted successes / bystanders failed / failed after: " + ", ".join(
    f"{s} {corrupted(s)} / {cell.get((s, '-', 'bystanders'), '?').split(' ')[0]} / {cell.get((s, '-', 'after'), '?').split(' ')[0]}" for s in servers))
PY
