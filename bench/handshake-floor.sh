#!/usr/bin/env bash
# tern's full TLS handshake + 1 request as a multiple of the crypto floor,
# both measured in the same run on the same CPU.
#
# Cases (CASES): ecdsa:X25519, rsa:X25519, ecdsa:X25519MLKEM768 — the
# server's key and the one key-exchange group tern accepts, TLS 1.3
# TLS_AES_128_GCM_SHA256 only, access log off. tern (one worker) and its
# nginx backend (a 100-byte file) on CPU 0, hey on CPU 1:
#   hey -z DURATION -c CONNS -disable-keepalive -host localhost
# (hey never resumes and sends no psk_key_exchange_modes, so tern issues
# no tickets: the handshake is one signature and one key exchange).
# tern's CPU per request = utime+stime of its process from /proc over the
# requests hey completed; the backend's CPU is not counted.
#
# Two floors, measured on CPU 0 in every round, each a median of RUNS:
#   issue floor    as issue 14 defines it, from `openssl speed`: one
#                  signature (ECDSA P-256 or RSA-2048) plus, for ECDSA, two
#                  X25519 operations (key generation and agreement);
#                  RSA-2048: the signature alone. None for X25519MLKEM768
#                  (OpenSSL 3.0 has no ML-KEM).
#   provider floor the same operations through the provider tern uses
#                  (aws-lc via aws-lc-rs, from `tern speed --json`): one
#                  signature plus the server's key exchange (X25519 key
#                  generation and agreement; for X25519MLKEM768 rustls'
#                  own server-side call, ML-KEM-768 encapsulation + X25519).
#                  aws-lc generates an X25519 key far faster than an
#                  agreement, so this floor is lower and the multiple
#                  stricter.
# The last line is the figure: tern's multiple of each floor per case.
#
# Usage: bench/handshake-floor.sh   (env: DURATION=8 RUNS=3 CONNS=50
#          CASES="ecdsa:X25519 rsa:X25519 ecdsa:X25519MLKEM768"
#          TERN=target/release/tern)
# Needs: nginx (nginx-light), hey (go install github.com/rakyll/hey@latest),
#        openssl, python3, taskset. Only 127.0.0.1 is ever a target.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

DURATION="${DURATION:-8}"
RUNS="${RUNS:-3}"
CONNS="${CONNS:-50}"
CASES="${CASES:-ecdsa:X25519 rsa:X25519 ecdsa:X25519MLKEM768}"
TERN="${TERN:-$root/target/release/tern}"
HEY="${HEY:-$(command -v hey || echo "$HOME/go/bin/hey")}"
SERVER_CPU=0
LOAD_CPU=1
# start_server's knobs (lib.sh): idle backend connections kept, ALPN.
SRV_POOL=256
SRV_ALPN=http/1.1

for tool in openssl python3 taskset nginx; do
    need "$tool"
done
[[ -x "$HEY" ]] || die "hey not found (go install github.com/rakyll/hey@latest)"
[[ -x "$TERN" ]] || die "no tern binary at $TERN (cargo build --release -p tern)"

bench_workdir tern-handshake-floor

mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' 'x' > "$work/www/index.html"
backend_port="$(free_port)"
start_backend "$backend_port" "$SERVER_CPU"

declare -A cert_of key_of
for key_kind in ecdsa rsa; do
    make_cert "$key_kind"
    mkdir -p "$work/$key_kind"
    mv "$work/cert.pem" "$work/$key_kind/cert.pem"
    mv "$work/key.pem" "$work/$key_kind/key.pem"
    cert_of[$key_kind]="$work/$key_kind/cert.pem"
    key_of[$key_kind]="$work/$key_kind/key.pem"
done

# start_tern KEY GROUP: tern on a free port with lib.sh's start_server (the
# same flags as in bench/terminators.sh), GROUP its one group; sets port
# and pid.
start_tern() {
    port="$(free_port)"
    cert="${cert_of[$1]}"
    key="${key_of[$1]}"
    TLS_GROUP="$2"
    start_server tern "$port" "$backend_port" || die "tern did not start"
    pid=$STARTED_PID
}

# negotiated GROUP PORT: what a client offering GROUP gets, as "TLSv1.3
# TLS13_AES_128_GCM_SHA256 X25519 ECDSA P-256" (tern bench discloses it;
# OpenSSL 3.0's tools cannot offer X25519MLKEM768). Fails unless three
# requests each brought the 100-byte body back through tern.
negotiated() {
    "$TERN" bench -n 3 -c 1 --disable-keepalive -k --groups "$1" -o json \
        "https://localhost:$2/" 2> /dev/null |
        python3 -c 'import json,sys
s=json.load(sys.stdin)["targets"][0]["stats"]
if s["status"].get("200") != 3 or s["body_bytes"] != 300:
    sys.exit("tern did not proxy the 100-byte body: %s" % s["status"])
n=s["negotiated"][0][0]
print(n["version"], n["cipher"], n["group"], n["server_key"])'
}

# floors: "SIGN_KIND GROUP provider_us issue_us" lines for CPU 0, this round.
floors() {
    taskset -c "$SERVER_CPU" "$TERN" speed --json --no-masked --seconds 0.5 |
        python3 -c 'import json,sys
for c in json.load(sys.stdin)["with_features"]["handshake_ceilings"]:
    print(c["certificate"].replace(" ", "_"), c["key_exchange"], 1e6 / c["handshakes_per_second"])'
    taskset -c "$SERVER_CPU" openssl speed -seconds 1 ecdsap256 rsa2048 ecdhx25519 2> /dev/null |
        awk '/^rsa 2048 bits/ { rsa = 1e6 / $6 }
             /ecdsa \(nistp256\)/ { ec = 1e6 / $(NF - 1) }
             /ecdh \(X25519\)/ { x = 1e6 / $NF }
             END { printf "openssl ecdsa:X25519 %.2f\nopenssl rsa:X25519 %.2f\n", ec + 2 * x, rsa }'
}

results="$work/results.tsv"
: > "$results"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
negotiation=()
for run in $(seq 1 "$RUNS"); do
    floors | while read -r a b c; do printf 'floor\t%s\t%s\t%s\t%s\n' "$run" "$a" "$b" "$c"; done >> "$results"
    for case_ in $CASES; do
        key_kind="${case_%%:*}"
        group="${case_##*:}"
        start_tern "$key_kind" "$group"
        seen="$(negotiated "$group" "$port")" || die "$case_: no answer through tern"
        [[ "$run" == 1 ]] && negotiation+=("$case_: $seen")
        # hey offers X25519MLKEM768 first unless told not to (Go >= 1.24).
        godebug=tlsmlkem=0
        [[ "$group" == X25519MLKEM768 ]] && godebug=tlsmlkem=1
        # Warm-up: the backend pool and the page cache, not counted.
        GODEBUG="$godebug" taskset -c "$LOAD_CPU" "$HEY" -z 1s -c "$CONNS" -disable-keepalive \
            -host localhost "https://127.0.0.1:$port/" > /dev/null
        before="$(cpu_ticks "$pid")"
        out="$(GODEBUG="$godebug" taskset -c "$LOAD_CPU" "$HEY" -z "${DURATION}s" -c "$CONNS" \
            -disable-keepalive -host localhost "https://127.0.0.1:$port/")"
        after="$(cpu_ticks "$pid")"
        kill "$pid"
        wait "$pid" 2> /dev/null || true
        requests="$(printf '%s\n' "$out" | hey_ok)"
        errors="$(printf '%s\n' "$out" | hey_errors)"
        rate="$(printf '%s\n' "$out" | hey_rate)"
        printf 'tern\t%s\t%s\t%s\t%s\t%s\t%s\n' "$run" "$case_" "${requests:-0}" "$rate" "$((after - before))" "$errors" >> "$results"
        echo "run $run $case_: requests=${requests:-0} rate=$rate cpu_ticks=$((after - before)) errors=$errors" >&2
    done
done

echo "## tern full handshake + 1 request against the crypto floor"
echo
echo "Negotiated (tern bench offering the case's group; hey gets the same: tern accepts nothing else):"
echo
for line in "${negotiation[@]}"; do echo "- $line"; done
echo
python3 - "$results" "$(getconf CLK_TCK)" <<'PY'
import statistics, sys
from collections import defaultdict
path, hz = sys.argv[1], float(sys.argv[2])
tern = defaultdict(list)      # case -> [(us, rate, errors)]
provider = defaultdict(list)  # (cert, group) -> [us]
issue = defaultdict(list)     # case -> [us]
for line in open(path):
    f = line.rstrip("\n").split("\t")
    if f[0] == "floor" and f[2] == "openssl":
        issue[f[3]].append(float(f[4]))
    elif f[0] == "floor":
        provider[(f[2], f[3])].append(float(f[4]))
    elif f[0] == "tern":
        req = int(f[3] or 0)
        us = float(f[5]) * 1e6 / hz / req if req else float("nan")
        tern[f[2]].append((us, float(f[4] or 0), int(f[6])))
cert = {"ecdsa": "ECDSA_P-256", "rsa": "RSA-2048"}
target = {"ecdsa:X25519": 1.8, "rsa:X25519": 1.3}
print("| case | tern µs/req (rounds) | req/s | issue floor µs | tern ÷ issue floor | provider floor µs | tern ÷ provider floor | target (issue floor) |")
print("|---|---|---|---|---|---|---|---|")
summary = []
for case, rows in tern.items():
    key, group = case.split(":")
    us = statistics.median(r[0] for r in rows)
    rate = statistics.median(r[1] for r in rows)
    errors = sum(r[2] for r in rows)
    # A tern binary whose `tern speed` lacks the group gives no floor.
    pf = statistics.median(provider[(cert[key], group)]) if provider.get((cert[key], group)) else None
    isf = statistics.median(issue[case]) if issue.get(case) else None
    isf_text = f"{isf:.1f}" if isf else "—"
    ratio_issue = f"{us / isf:.2f}x" if isf else "—"
    goal = target.get(case)
    verdict = "reported" if goal is None else (f"≤ {goal}x: " + ("met" if us / isf <= goal else "NOT met"))
    rounds = ", ".join(f"{r[0]:.1f}" for r in rows)
    err = f" ({errors} errors)" if errors else ""
    pf_text, ratio_provider = (f"{pf:.1f}", f"{us / pf:.2f}x") if pf else ("—", "—")
    print(f"| {case} | **{us:.1f}** ({rounds}) | {rate:.0f}{err} | {isf_text} | {ratio_issue} | {pf_text} | {ratio_provider} | {verdict} |")
    summary.append(f"{case} {ratio_issue} of the issue floor, {ratio_provider} of the provider floor")
print()
print("tern ÷ floor: " + "; ".join(summary))
PY
echo
echo "Conditions:"
echo
echo "- CPU: $(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}'), $(nproc) cores; kernel $(uname -r); load average before: $load_before"
echo "- tern: $("$TERN" --version) ($TERN), tree at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'); $(openssl version)"
echo "- tern and its nginx backend on CPU $SERVER_CPU, hey on CPU $LOAD_CPU; $RUNS rounds of ${DURATION}s, $CONNS connections; medians of the rounds"
echo "- tern serve --workers 1 --access-log off --tls-versions TLSv1.3 --ciphers TLS_AES_128_GCM_SHA256 --groups GROUP --alpn http/1.1 --forwarded x-forwarded-for,x-forwarded-proto"
echo "- load: GODEBUG=tlsmlkem=0 (1 for X25519MLKEM768) taskset -c $LOAD_CPU hey -z ${DURATION}s -c $CONNS -disable-keepalive -host localhost https://127.0.0.1:PORT/"
echo "- floors on CPU $SERVER_CPU each round: taskset -c $SERVER_CPU tern speed --json --no-masked --seconds 0.5; taskset -c $SERVER_CPU openssl speed -seconds 1 ecdsap256 rsa2048 ecdhx25519"
