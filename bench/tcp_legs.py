"""TCP segments per request on each end of the two legs of a proxied
request, from two `ss -tinH state established` snapshots.

Usage: python3 bench/tcp_legs.py BEFORE AFTER SERVER_PORT BACKEND_PORT
(bench/keepalive-kernel.sh). The four ends: the load's sockets (peer port
SERVER_PORT), the server's client-side sockets (local port SERVER_PORT),
the server's backend-side sockets (peer port BACKEND_PORT) and the
backend's (local port BACKEND_PORT). A socket counts by its counters'
growth between the snapshots (one that appeared in between, from zero).
Requests = data segments the server's client side received (a small
request is one segment). Per request and end: data segments and pure
ACKs (segments without data) sent, and bytes sent. Prints one line of
Python dict literal.
"""

import re
import sys

FIELDS = ("segs_out", "data_segs_out", "segs_in", "data_segs_in", "bytes_sent", "bytes_received")


def snapshot(path: str) -> dict[tuple[str, str], dict[str, int]]:
    socks = {}
    key = None
    for line in open(path):
        if not line[0].isspace():
            cols = line.split()
            # Recv-Q Send-Q Local Peer (state filtered, no header).
            key = (cols[2], cols[3]) if len(cols) >= 4 else None
            continue
        if key is None:
            continue
        counts = {}
        for f in FIELDS:
            m = re.search(rf"\b{f}:(\d+)", line)
            counts[f] = int(m.group(1)) if m else 0
        socks[key] = counts
    return socks


def port(addr: str) -> str:
    return addr.rsplit(":", 1)[1]


def main() -> None:
    before, after = snapshot(sys.argv[1]), snapshot(sys.argv[2])
    sport, bport = sys.argv[3], sys.argv[4]
    ends = {"load": {}, "server, client side": {}, "server, backend side": {}, "backend": {}}
    for key, now in after.items():
        local, peer = key
        if port(peer) == sport:
            end = "load"
        elif port(local) == sport:
            end = "server, client side"
        elif port(peer) == bport:
            end = "server, backend side"
        elif port(local) == bport:
            end = "backend"
        else:
            continue
        was = before.get(key, dict.fromkeys(FIELDS, 0))
        acc = ends[end]
        for f in FIELDS:
            acc[f] = acc.get(f, 0) + now[f] - was[f]
    requests = ends["server, client side"].get("data_segs_in", 0)
    out = {"requests": requests}
    for end, acc in ends.items():
        if not requests or not acc:
            continue
        out[end] = {
            "data segments sent": round(acc["data_segs_out"] / requests, 3),
            "pure ACKs sent": round((acc["segs_out"] - acc["data_segs_out"]) / requests, 3),
            "bytes sent": round(acc["bytes_sent"] / requests, 1),
        }
    print(repr(out))


if __name__ == "__main__":
    main()
