#!/usr/bin/env python3
"""Hold many idle TLS connections to one server and measure the server's memory.

Used by bench/idle-memory.sh. One process, asyncio + the ssl module (OpenSSL):
an idle TLS connection costs this client a socket, an SSL object and a few
small Python objects, so 10,000 of them fit in one process on one core
without threads, and nothing else needs building.

Steps, against https://127.0.0.1:PORT/:
  1. warm-up: WARM connections, one HTTP/1.1 request each, closed; SETTLE s;
     the server's memory (sum over PID and its child processes) is the baseline;
  2. CONNS connections, each sends one keepalive request, reads the whole
     response, and then sits idle; SETTLE s; the server's memory again;
  3. every held connection still open is asked for a second request, which
     proves the server kept it (not only that the client did not notice);
  4. all closed.
Prints one JSON object on stdout. Memory: VmRSS from /proc/PID/status and Pss
from /proc/PID/smaps_rollup, summed over the server's processes, in KiB.
Only 127.0.0.1 is a target; source addresses may be any 127.0.0.x.
"""
import argparse
import asyncio
import json
import os
import socket
import ssl
import sys
import time

IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)
REQUEST = b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n"


def server_pids(pid):
    """PID and its child processes (nginx and hitch run a master and workers)."""
    pids = [pid]
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            pids.append(int(entry))
    return pids


def memory(pid):
    """(VmRSS KiB, Pss KiB, process count) summed over PID and its children."""
    rss = pss = n = 0
    for p in server_pids(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss += int(line.split()[1])
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1])
            n += 1
        except OSError:
            pass
    return rss, pss, n


async def request(reader, writer, timeout):
    """One GET; True when a 200 with its whole body came back."""
    writer.write(REQUEST)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    status = head.split(b" ", 2)[1]
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if length:
        await asyncio.wait_for(reader.readexactly(length), timeout)
    return status == b"200"


async def connect(args, ctx, i):
    """A TLS connection from source address number i (round robin)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    source = args.sources[i % len(args.sources)]
    if source != "127.0.0.1" or len(args.sources) > 1:
        # Port chosen at connect time, per destination: many sources share ports.
        sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
        sock.bind((source, 0))
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(loop.sock_connect(sock, ("127.0.0.1", args.port)), args.timeout)
        return await asyncio.wait_for(
            asyncio.open_connection(sock=sock, ssl=ctx, server_hostname="localhost"), args.timeout)
    except BaseException:
        sock.close()
        raise


async def open_many(args, ctx, count, keep):
    """count connections, one request each; returns the (reader, writer) pairs
    that succeeded (closed at once unless keep) and the number of failures."""
    gate = asyncio.Semaphore(args.concurrency)
    held, errors = [], []

    async def one(i):
        async with gate:
            try:
                reader, writer = await connect(args, ctx, i)
            except Exception as e:  # noqa: BLE001 - counted and reported
                errors.append(f"connect: {type(e).__name__}: {e}")
                return
            try:
                ok = await request(reader, writer, args.timeout)
            except Exception as e:  # noqa: BLE001
                ok = False
                errors.append(f"request: {type(e).__name__}: {e}")
            if ok and keep:
                held.append((reader, writer))
            else:
                writer.close()

    await asyncio.gather(*(one(i) for i in range(count)))
    return held, errors


async def close_all(pairs):
    """close_notify on each; whatever has not closed after 5 s is aborted."""
    for _, writer in pairs:
        writer.close()
    try:
        await asyncio.wait_for(
            asyncio.gather(*(w.wait_closed() for _, w in pairs), return_exceptions=True), 5)
    except asyncio.TimeoutError:
        for _, writer in pairs:
            writer.transport.abort()


async def main(args):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.set_ecdh_curve("X25519")
    ctx.set_alpn_protocols(["http/1.1"])

    warm, warm_errors = await open_many(args, ctx, args.warm, keep=True)
    await close_all(warm)
    await asyncio.sleep(args.settle)
    base = memory(args.pid)

    started = time.monotonic()
    held, errors = await open_many(args, ctx, args.conns, keep=True)
    open_seconds = time.monotonic() - started
    negotiated = "?"
    if held:
        tls = held[0][1].get_extra_info("ssl_object")
        negotiated = f"{tls.version()} {tls.cipher()[0]} alpn={tls.selected_alpn_protocol()}"
    await asyncio.sleep(args.settle)
    loaded = memory(args.pid)

    # Did the server keep them? A closed connection shows EOF on its reader;
    # a second request on each of the others proves they still work.
    closed_by_server = sum(1 for r, _ in held if r.at_eof())
    gate = asyncio.Semaphore(args.concurrency)
    second_errors = []

    async def again(pair):
        async with gate:
            try:
                return await request(pair[0], pair[1], args.timeout)
            except Exception as e:  # noqa: BLE001
                second_errors.append(f"{type(e).__name__}: {e}")
                return False

    alive = sum(await asyncio.gather(*(again(p) for p in held)))
    await close_all(held)

    n = len(held)
    print(json.dumps({
        "conns_asked": args.conns,
        "conns_held": n,
        "open_errors": len(errors) + len(warm_errors),
        "first_errors": (warm_errors + errors)[:3],
        "closed_by_server": closed_by_server,
        "alive_after": alive,
        "second_errors": second_errors[:3],
        "open_seconds": round(open_seconds, 2),
        "negotiated": negotiated,
        "processes": loaded[2],
        "base_rss_kib": base[0],
        "held_rss_kib": loaded[0],
        "base_pss_kib": base[1],
        "held_pss_kib": loaded[1],
        "rss_kib_per_conn": (loaded[0] - base[0]) / n if n else None,
        "pss_kib_per_conn": (loaded[1] - base[1]) / n if n else None,
    }))
    return 0 if n == args.conns and alive == n else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True, help="server port on 127.0.0.1")
    p.add_argument("--pid", type=int, required=True, help="server process (its children count too)")
    p.add_argument("--conns", type=int, default=10000)
    p.add_argument("--warm", type=int, default=100)
    p.add_argument("--settle", type=float, default=3.0, help="seconds to wait before each reading")
    p.add_argument("--concurrency", type=int, default=100, help="handshakes in flight at once")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds for each connect or request")
    p.add_argument("--deadline", type=float, default=600.0, help="seconds for the whole run")
    p.add_argument("--sources", default="127.0.0.1",
                   help="comma-separated 127.0.0.x source addresses, used round robin")
    a = p.parse_args()
    a.sources = a.sources.split(",")
    if not all(s.startswith("127.") for s in a.sources):
        sys.exit("sources must be loopback (127.x.x.x)")
    sys.exit(asyncio.run(asyncio.wait_for(main(a), a.deadline)))
