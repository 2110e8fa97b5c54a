#!/usr/bin/env bash
# HTTP/2 attacks against tern, nginx and haproxy in one run: what each does
# to well-behaved HTTP/2 clients, whether the attacker is closed, and what it
# costs the server.
#
# MODES (bench/h2_flood.py, ATTACKERS connections, each reopened when the
# server closes it): rapid-reset (HEADERS + RST_STREAM, CVE-2023-44487),
# continuation (a header block that never ends), ping and settings (floods
# whose answers are never read), zero-window (requests whose responses can
# never be sent).
#
# For each server (one worker pinned to CPU 0, the backend too; attack and
# load on CPU 1, all over TLS 1.3 with ALPN h2): `tern bench --h2` (C
# connections, M streams each, LOAD_S seconds) measures p99 of well-behaved
# clients alone; then, per mode, the attack starts and the same load runs
# again under it; the attack goes on until the server's idle timeout
# (IDLE_S, the same for every server) has had time to act. Reported per
# server and mode: p99 alone and under attack (and their ratio), failed
# requests, attacker connections opened and closed by the server (GOAWAY,
# close or reset) and after how long, frames sent, the attack's pace while
# the load measured (connections opened and frames sent per second), server
# memory growth. The load runs at a real-time priority above the attacker
# (LOAD_PRIORITY=fifo, see lib.sh's load_priority).
# The figure, last: the worst p99 ratio per server, and how long its
# longest-lived attacker connection lived (ATTACK_S: never closed).
#
# Usage: bench/h2-flood.sh   (env: MODES="rapid-reset continuation ping settings zero-window"
#          ATTACKERS=4 C=4 M=10 LOAD_S=5 IDLE_S=5 TERN=target/release/tern
#          SERVERS="tern nginx haproxy" LOAD_PRIORITY=fifo|normal)
# Needs: nginx (nginx-light; also the backend), haproxy (optional), openssl,
# python3, taskset. Only 127.0.0.1 is ever a target; everything stops by
# itself and the scratch folder is removed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

MODES="${MODES:-rapid-reset continuation ping settings zero-window}"
ATTACKERS="${ATTACKERS:-4}"
C="${C:-4}"
M="${M:-10}"
LOAD_S="${LOAD_S:-5}"
IDLE_S="${IDLE_S:-5}"
TERN="${TERN:-$root/target/release/tern}"
SERVERS="${SERVERS:-tern nginx haproxy}"
SERVER_CPU=0
LOAD_CPU=1
for tool in nginx openssl python3 taskset timeout; do need "$tool"; done
load_priority
[[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"
for mode in $MODES; do
    case "$mode" in rapid-reset | continuation | ping | settings | zero-window) ;; *) die "unknown mode $mode" ;; esac
done
# Long enough for the idle timeout and a GOAWAY grace to close a stalled
# attacker, and to cover the load.
ATTACK_S=$((LOAD_S > IDLE_S ? LOAD_S + 4 : IDLE_S * 2 + 4))

bench_workdir tern-h2-flood
make_cert ecdsa
mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/index.html"
SRV_ALPN=h2
SRV_IDLE_S="$IDLE_S"
backend_port="$(free_port)"
start_backend "$backend_port" "$SERVER_CPU"
read -r -a wanted <<< "$SERVERS"
start_servers "$backend_port" "${wanted[@]}"

results="$work/results.tsv"
for server in "${active[@]}"; do
    port="${server_port[$server]}"
    pid="${server_pid[$server]}"
    read -r p99_alone _ _ < <(keepalive_load "$port" --h2 -m "$M")
    for mode in $MODES; do
        rss_before="$(rss_kib "$pid")"
        ready="$work/ready.$server.$mode"
        rm -f "$ready"
        taskset -c "$LOAD_CPU" timeout $((ATTACK_S + 30)) python3 "$here/h2_flood.py" \
            "$mode" "$port" "$ATTACKERS" "$ATTACK_S" "$ready" > "$work/attack.json" &
        attack_pid=$!
        for _ in $(seq 1 100); do [[ -s "$ready" ]] && break; sleep 0.05; done
        load_from="$(monotonic_s)"
        read -r p99_attack failed done_ok < <(keepalive_load "$port" --h2 -m "$M")
        load_to="$(monotonic_s)"
        rss_peak="$(rss_kib "$pid")"
        wait "$attack_pid" || true
        attack="$(cat "$work/attack.json")"
        [[ -n "$attack" ]] || attack='{}'
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$server" "$mode" "$p99_alone" "$p99_attack" \
            "$failed" "$done_ok" "$rss_before" "$rss_peak" "$load_from" "$load_to" "$attack" >> "$results"
        echo "$server $mode: p99 ${p99_alone} ms alone, ${p99_attack} ms under attack, $failed failed; $attack" >&2
        kill -0 "$pid" 2> /dev/null || die "$server died under $mode"
    done
done

echo
echo "HTTP/2 attacks: $ATTACKERS attacker connections for ${ATTACK_S}s per mode; well-behaved load: tern bench --h2 -z ${LOAD_S}s -c $C -m $M; idle timeout ${IDLE_S}s on every server; TLS 1.3 $TLS_SUITE $TLS_GROUP; one worker on CPU $SERVER_CPU, attack and load on CPU $LOAD_CPU, $LOAD_PRIORITY_NOTE; $(nproc) CPUs, $(uname -r)"
for server in "${active[@]}"; do echo "  $server: $(server_version "$server")"; done
python3 - "$results" <<'PY'
import json, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
print("| server | attack | p99 alone (ms) | p99 under attack (ms) | ratio | failed | attacker conns closed by server | closed after (median, s) | longest lived (s) | frames sent | attack pace while measured (conns/s, frames/s) | RSS growth (MiB) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
worst, longest = {}, {}
def pace(by_second, load_from, load_to):
    """Per second over the whole seconds of the measurement: an attack
    starved of CPU by the load would flatter every server."""
    seconds = range(int(float(load_from)) + 1, int(float(load_to)))
    counts = {int(k): v for k, v in (by_second or {}).items()}
    return f"{sum(counts.get(t, 0) for t in seconds) / len(seconds):.0f}" if seconds else "-"

for server, mode, p_a, p_f, failed, done, rss_b, rss_p, load_from, load_to, attack in rows:
    a = json.loads(attack)
    conns_s = pace(a.get("opened_by_second"), load_from, load_to)
    frames_s = pace(a.get("frames_by_second"), load_from, load_to)
    ratio = float(p_f) / float(p_a) if float(p_a) > 0 else float("nan")
    med = a.get("closed_after_s_median")
    opened, closed = a.get("opened", 0), a.get("closed_by_server", 0)
    print(f"| {server} | {mode} | {float(p_a):.2f} | {float(p_f):.2f} | {ratio:.2f} | {failed} of {int(done) + int(failed)} | "
          f"{closed} of {opened} | {'-' if med is None else f'{med:.3f}'} | {a.get('longest_s', 0):.1f} | {a.get('frames_sent', '?')} | "
          f"{conns_s}, {frames_s} | "
          f"{(int(rss_p) - int(rss_b)) / 1024:+.1f} |")
    if worst.get(server, (0, ""))[0] < ratio:
        worst[server] = (ratio, mode)
    if longest.get(server, (-1, ""))[0] < a.get("longest_s", 0):
        longest[server] = (a.get("longest_s", 0), mode)
print("HTTP/2 attacks, worst p99 ratio and longest-lived attacker connection: " + ", ".join(
    f"{s} {r:.2f}x ({m}), {longest[s][0]:.1f} s ({longest[s][1]})" for s, (r, m) in worst.items()))
PY
