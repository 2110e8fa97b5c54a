#!/usr/bin/env bash
# Issue 26's two HTTP/3 targets in one command, for an idle machine:
#
#   1. HTTP/3, 100 B over keepalive connections: tern's server CPU per
#      request against haproxy 3.2's (target <= 1.0x), from
#      bench/h3-peers.sh (tern and haproxy, and nginx if NGINX_BIN is a QUIC
#      build, as targets of one interleaved run; 1 MiB rows come with it);
#   2. a new QUIC connection + one 100 B request against tern's own new
#      TCP+TLS connection + request (target <= 1.3x), from bench/h3.sh
#      PLANS=new (tern bench --compare-protocols h1,h2,h3 --plan new).
#      Closed loop, as the target has been judged; with RATE=N a third
#      run measures both protocols open loop at N connections a second
#      (bench/h3.sh's RATE: closed loop measures TCP+TLS at about twice
#      QUIC's rate; report both).
#
# Each script prints its table and its figure line (medians over RUNS);
# conditions as in those scripts (one worker and the nginx backend on CPU
# 0, the load on CPU 1, TLS 1.3 AES-128-GCM X25519). How haproxy 3.2 with
# QUIC is built: docs/benchmarks-history.md ("HTTP/3 costs, issue 26").
#
# Usage: HAPROXY_BIN=/path/to/haproxy [NGINX_BIN=/path/to/nginx]
#          TERN=target/release/tern bench/h3-targets.sh
#        (env: RUNS=3 ROUNDS=3 DURATION=5, passed on to both scripts;
#        RATE=N adds the one-rate run)
# Needs: what bench/h3-peers.sh and bench/h3.sh need. Only 127.0.0.1 is
# ever a target; everything stops by itself.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
[[ -n "${HAPROXY_BIN:-}" ]] || { echo "bench: set HAPROXY_BIN to a haproxy 3.2 built with USE_QUIC=1" >&2; exit 1; }
export RUNS="${RUNS:-3}" ROUNDS="${ROUNDS:-3}" DURATION="${DURATION:-5}"

echo "== 1. HTTP/3 100 B (and 1 MiB): tern against haproxy${NGINX_BIN:+ and nginx}"
SERVERS="tern haproxy${NGINX_BIN:+ nginx}" "$here/h3-peers.sh"
echo
echo "== 2. a new connection per 100 B request: QUIC against TCP+TLS, through tern"
RATE= PLANS=new "$here/h3.sh"
if [[ -n "${RATE:-}" ]]; then
    echo
    echo "== 3. the same with both protocols open loop at $RATE connections a second"
    C=64 PLANS=new "$here/h3.sh"
fi
