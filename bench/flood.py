#!/usr/bin/env python3
"""Connection floods against a TLS server on 127.0.0.1, for bench/flood.sh.

Modes (each opens CONNS connections, at most 200 being set up at a time):
  slowloris  TLS handshake, then a request head one byte every INTERVAL
             seconds, never finished
  hello      a TLS ClientHello, then nothing
  garbage    1 KiB of random bytes, then nothing

Writes "ready N" to READY_FILE once every connection is set up, keeps them
until the server closes them or DURATION seconds pass, then prints one JSON
line: connections opened, closed by the server, and when (seconds after
each connection was set up), and (slowloris) the bytes written in each
second of time.monotonic(), so that the caller can check the flood kept
its rate while it measured. Only 127.0.0.1 is ever a target.

Usage: flood.py MODE PORT CONNS DURATION READY_FILE [INTERVAL]
"""
import asyncio
import json
import os
import ssl
import sys
import time

HEAD = b"GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: slowloris\r\nX-a: " + b"b" * 4000


def client_hello():
    """The bytes of a real ClientHello (Python's OpenSSL), for the hello mode."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


async def hold(reader, writer, mode, interval, deadline, closed_after, opened_at, written):
    """Keeps one connection until the server closes it or the deadline."""
    sent = 0
    try:
        if mode != "slowloris":
            # Nothing more to send: one wait for the close, no wake-ups (the
            # flood shares its CPU with the well-behaved load).
            while time.monotonic() < deadline:
                data = await asyncio.wait_for(reader.read(4096), timeout=deadline - time.monotonic())
                if not data:
                    closed_after.append(time.monotonic() - opened_at)
                    return
            return
        while time.monotonic() < deadline:
            if mode == "slowloris" and sent < len(HEAD):
                writer.write(HEAD[sent : sent + 1])
                sent += 1
                await writer.drain()
                second = int(time.monotonic())
                written[second] = written.get(second, 0) + 1
            try:
                data = await asyncio.wait_for(reader.read(4096), timeout=interval)
            except asyncio.TimeoutError:
                continue
            if not data:
                closed_after.append(time.monotonic() - opened_at)
                return
    except asyncio.TimeoutError:
        return
    except (ConnectionError, ssl.SSLError, OSError):
        closed_after.append(time.monotonic() - opened_at)
        return
    finally:
        writer.close()


async def main():
    mode, port, conns, duration, ready_file = sys.argv[1:6]
    port, conns, duration = int(port), int(conns), float(duration)
    interval = float(sys.argv[6]) if len(sys.argv) > 6 else 1.0
    if mode not in ("slowloris", "hello", "garbage"):
        sys.exit(f"unknown mode {mode}")
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    hello = client_hello()
    deadline = time.monotonic() + duration
    gate = asyncio.Semaphore(200)
    closed_after, tasks, failed = [], [], 0
    written = {}

    async def open_one():
        nonlocal failed
        async with gate:
            try:
                if mode == "slowloris":
                    reader, writer = await asyncio.open_connection(
                        "127.0.0.1", port, ssl=ctx, server_hostname="localhost"
                    )
                else:
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.write(hello if mode == "hello" else os.urandom(1024))
                    await writer.drain()
            except (ConnectionError, ssl.SSLError, OSError):
                failed += 1
                return
        opened_at = time.monotonic()
        tasks.append(
            asyncio.ensure_future(
                hold(reader, writer, mode, interval, deadline, closed_after, opened_at, written)
            )
        )

    await asyncio.gather(*[open_one() for _ in range(conns)])
    with open(ready_file, "w") as f:
        f.write(f"ready {len(tasks)}\n")
    await asyncio.gather(*tasks)
    closed_after.sort()
    print(
        json.dumps(
            {
                "mode": mode,
                "opened": len(tasks),
                "failed_to_open": failed,
                "closed_by_server": len(closed_after),
                "closed_after_s_median": closed_after[len(closed_after) // 2] if closed_after else None,
                "closed_after_s_max": closed_after[-1] if closed_after else None,
                "written_by_second": written,
            }
        )
    )


asyncio.run(main())
