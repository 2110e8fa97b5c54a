# A WebSocket origin that speaks RFC 8441 (WebSockets over HTTP/2): an
# ASGI app on Hypercorn (an implementation no one here wrote; its HTTP/2
# SETTINGS offer extended CONNECT). h2c (prior knowledge) on
# 127.0.0.1:PORT, or HTTP/2 over TLS (ALPN h2) given CERT and KEY files.
#   /ws      accepts, sends "http_version=V" (what the request came over:
#            "2" for an extended CONNECT), then echoes every message
#   /refuse  refuses the WebSocket (Hypercorn answers 403)
#   /        a page whose script opens wss://HOST/ws and shows each
#            message in a <p id="echo">, answering each with "ack"
#   /wait    answered once "ack" arrived (the page's image: it holds the
#            load event until the message is in the DOM, for --dump-dom)
# Prints "listening PORT" once Hypercorn serves the port (PORT 0: a free
# one), not only once it is bound: a backend connection made before
# that waits for the server's SETTINGS, within tern's connect timeout. With
# TERN_TEST_RUST_LOG set (tern-testsupport passes stderr on then), logs
# Hypercorn's debug lines and each request, timed, to stderr. Usage:
# ws_h2_origin.py PORT [CERT KEY]
import asyncio
import logging
import os
import pathlib
import socket
import sys
import time

from hypercorn.asyncio import serve
from hypercorn.config import Config


# The page of h2/ws_origin.py: it sends "hello over https:" and shows
# every message in a <p id="echo">.
PAGE = (pathlib.Path(__file__).parent.parent / "h2" / "ws_page.html").read_bytes()

acked = None

LOG = os.environ.get("TERN_TEST_RUST_LOG") is not None


def log(*what):
    if LOG:
        print(f"{time.time():.3f} ws_h2_origin:", *what, file=sys.stderr, flush=True)


async def respond(send, status, body, content_type=b"text/plain"):
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type)]})
    await send({"type": "http.response.body", "body": body})


async def app(scope, receive, send):
    global acked
    log(scope["type"], scope.get("path"))
    if acked is None:
        acked = asyncio.Event()
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "http":
        if scope["path"] == "/":
            await respond(send, 200, PAGE, b"text/html")
        elif scope["path"] == "/release":
            acked.set()
            await respond(send, 200, b"released\n")
        elif scope["path"] == "/wait":
            try:
                await asyncio.wait_for(acked.wait(), 30)
            except asyncio.TimeoutError:
                pass
            await respond(send, 200, b"done\n")
        else:
            await respond(send, 404, b"not found\n")
        return
    await receive()  # websocket.connect
    if scope["path"] != "/ws":
        await send({"type": "websocket.close"})
        return
    await send({"type": "websocket.accept",
                "headers": [(b"x-origin", b"hypercorn")]})
    await send({"type": "websocket.send",
                "text": f"http_version={scope['http_version']}"})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        if message.get("text") == "ack":
            acked.set()
        elif message.get("text") is not None:
            await send({"type": "websocket.send", "text": message["text"]})
        else:
            await send({"type": "websocket.send", "bytes": message["bytes"]})


class Serving(logging.Handler):
    """Hypercorn's error log: says "listening PORT" on stdout once
    Hypercorn says it runs (after its lifespan start-up, once asyncio
    serves the socket), and passes each record on to stderr."""

    def __init__(self, port):
        super().__init__()
        self.port = port
        self.stderr = logging.StreamHandler(sys.stderr)

    def emit(self, record):
        if record.getMessage().startswith("Running on"):
            print(f"listening {self.port}", flush=True)
            log("listening")
        self.stderr.emit(record)


async def main():
    # Bound here, so the port printed is the one this process holds.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", int(sys.argv[1])))
    sock.listen(128)
    config = Config()
    config.bind = [f"fd://{sock.fileno()}"]
    if len(sys.argv) > 3:
        config.certfile = sys.argv[2]
        config.keyfile = sys.argv[3]
    config.accesslog = None
    errors = logging.getLogger("ws_h2_origin")
    errors.addHandler(Serving(sock.getsockname()[1]))
    errors.setLevel(logging.DEBUG if LOG else logging.INFO)
    errors.propagate = False
    config.errorlog = errors
    await serve(app, config)


asyncio.run(main())
