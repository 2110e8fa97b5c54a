# An HTTP/3 client built on aioquic (a QUIC and HTTP/3 stack no one here
# wrote): COUNT requests on one QUIC connection, at most PARALLEL at a
# time; prints one JSON line per response (status, the protocol, Alt-Svc,
# the body, parsed as JSON when it is (left out past 64 KiB), and its
# length and SHA-256).
#
# Usage: h3_client.py HOST PORT CA_FILE SERVER_NAME METHOD PATH COUNT BODY_LEN
#                     [PARALLEL] [HEADER_BYTES] [CONNECTIONS]
# HEADER_BYTES adds a header of that size (to test the field-section limit);
# CONNECTIONS opens that many QUIC connections at once, each making COUNT
# requests (a burst of new connections; with SEQUENTIAL=1 in the
# environment, one after another instead). With HOLD_S in the environment,
# each connection then stays, sending a QUIC PING every 0.2 s, until the
# server closes it or HOLD_S seconds pass, and prints {"closed_after_s": S}
# (null when it stayed open). H3_CLIENT_CERT and H3_CLIENT_KEY present a
# client certificate; H3_AUTHORITY sends another :authority than
# SERVER_NAME:PORT. With TRAILERS=1, each request says
# `te: trailers` and ends its body with trailers x-req-sum: 7 and
# authorization: secret (a field not allowed in trailers), and each line
# has the response's trailers as "trailers".
import asyncio
import hashlib
import json
import os
import sys
import time

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, StreamReset


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._http = H3Connection(self._quic)
        self._pending = {}
        self._closed_why = None

    def quic_event_received(self, event):
        # The server closed the connection (e.g. a TLS alert as a QUIC
        # CRYPTO_ERROR, 0x100 + alert, after this client's handshake had
        # ended): every request waiting, and any made later, fails with
        # the server's code at once rather than at its own timeout.
        if isinstance(event, ConnectionTerminated):
            self._closed_why = RuntimeError(
                f"connection closed by the server: error 0x{event.error_code:x} "
                f"{event.reason_phrase!r}"
            )
            for _, waiter in self._pending.values():
                if not waiter.done():
                    waiter.set_exception(self._closed_why)
            self._pending.clear()
            return
        if isinstance(event, StreamReset) and event.stream_id in self._pending:
            _, waiter = self._pending.pop(event.stream_id)
            waiter.set_exception(RuntimeError(f"stream reset: {event.error_code}"))
            return
        for ev in self._http.handle_event(event):
            if not isinstance(ev, (HeadersReceived, DataReceived)):
                continue
            entry = self._pending.get(ev.stream_id)
            if entry is None:
                continue
            response, waiter = entry
            if isinstance(ev, HeadersReceived) and response["headers"]:
                response["trailers"].extend(ev.headers)
            elif isinstance(ev, HeadersReceived):
                response["headers"].extend(ev.headers)
            else:
                response["body"] += ev.data
            if ev.stream_ended:
                del self._pending[ev.stream_id]
                waiter.set_result(response)

    async def request(self, method, authority, path, body, extra):
        if self._closed_why is not None:
            raise self._closed_why
        stream_id = self._quic.get_next_available_stream_id()
        headers = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", authority.encode()),
            (b":path", path.encode()),
            (b"x-forwarded-for", b"6.6.6.6"),
        ] + extra
        trailers = os.environ.get("TRAILERS") == "1"
        if trailers:
            headers.append((b"te", b"trailers"))
        elif body:
            headers.append((b"content-length", str(len(body)).encode()))
        self._http.send_headers(stream_id, headers, end_stream=not body)
        if body:
            self._http.send_data(stream_id, body, end_stream=not trailers)
        if body and trailers:
            self._http.send_headers(
                stream_id, [(b"x-req-sum", b"7"), (b"authorization", b"secret")], end_stream=True
            )
        waiter = self._loop.create_future()
        self._pending[stream_id] = ({"headers": [], "trailers": [], "body": b""}, waiter)
        self.transmit()
        return await asyncio.wait_for(waiter, 20)


def summary(response):
    headers = {k.decode(): v.decode() for k, v in response["headers"]}
    raw = response["body"]
    body = None
    if len(raw) <= 64 * 1024:
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode(errors="replace")
    return {
        "status": int(headers.get(":status", "0")),
        "proto": "h3",
        "alt_svc": headers.get("alt-svc"),
        "headers": {k: v for k, v in headers.items() if not k.startswith(":")},
        "body": body,
        "length": len(raw),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "trailers": {k.decode(): v.decode() for k, v in response["trailers"]},
    }


async def one_connection(host, port, name, ca, method, path, count, body, parallel, extra):
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=name)
    config.load_verify_locations(ca)
    # A client certificate for tern's mTLS tests (serve/mtls.rs).
    if os.environ.get("H3_CLIENT_CERT"):
        config.load_cert_chain(os.environ["H3_CLIENT_CERT"], os.environ["H3_CLIENT_KEY"])
    authority = os.environ.get("H3_AUTHORITY") or f"{name}:{port}"
    async with connect(host, int(port), configuration=config, create_protocol=Client) as client:
        done = 0
        while done < count:
            batch = min(parallel, count - done)
            responses = await asyncio.gather(
                *[client.request(method, authority, path, body, extra) for _ in range(batch)]
            )
            for r in responses:
                print(json.dumps(summary(r)), flush=True)
            done += batch
        hold = float(os.environ.get("HOLD_S", "0"))
        if hold > 0:
            start = time.monotonic()
            closed = None
            while time.monotonic() - start < hold:
                try:
                    await asyncio.wait_for(client.ping(), 0.2)
                except asyncio.TimeoutError:
                    pass
                except Exception:
                    closed = time.monotonic() - start
                    break
                if client._quic._close_event is not None or client._closed.is_set():
                    closed = time.monotonic() - start
                    break
                await asyncio.sleep(0.2)
            print(json.dumps({"closed_after_s": closed}), flush=True)


async def main():
    host, port, ca, name, method, path = sys.argv[1:7]
    count, body_len = int(sys.argv[7]), int(sys.argv[8])
    parallel = int(sys.argv[9]) if len(sys.argv) > 9 else 1
    header_bytes = int(sys.argv[10]) if len(sys.argv) > 10 else 0
    connections = int(sys.argv[11]) if len(sys.argv) > 11 else 1
    extra = [(b"x-big", b"b" * header_bytes)] if header_bytes else []
    body = b"x" * body_len
    if os.environ.get("SEQUENTIAL") == "1":
        for _ in range(connections):
            await one_connection(host, port, name, ca, method, path, count, body, parallel, extra)
        return
    await asyncio.gather(
        *[
            one_connection(host, port, name, ca, method, path, count, body, parallel, extra)
            for _ in range(connections)
        ]
    )


asyncio.run(main())
