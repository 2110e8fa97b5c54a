# A WebSocket origin on Python's `websockets` (an implementation no one
# here wrote), plain HTTP/1.1 on 127.0.0.1:PORT:
#   /ws    echoes every message back, and prints "echoed: MESSAGE"
#   /      a page whose script opens wss://HOST/ws, sends a message, shows
#          the echo in <p id="echo">, then sends "ack"
#   /wait  answered only once "ack" arrived (the page's image: it holds the
#          load event until the echo is in the DOM, so --dump-dom sees it)
# Prints "listening PORT" once it accepts (PORT 0: a free one). Usage:
# ws_origin.py PORT
import asyncio
import pathlib
import sys

from websockets.asyncio.server import serve
from websockets.datastructures import Headers
from websockets.http11 import Response

# The page, shared with upstreams/ws_h2_origin.py.
PAGE = (pathlib.Path(__file__).parent / "ws_page.html").read_bytes()

acked = asyncio.Event()


async def echo(ws):
    async for message in ws:
        if message == "ack":
            acked.set()
            continue
        print(f"echoed: {message}", flush=True)
        await ws.send(message)


async def http(connection, request):
    if request.path == "/ws":
        return None
    if request.path == "/":
        headers = Headers([("Content-Type", "text/html"), ("Content-Length", str(len(PAGE)))])
        return Response(200, "OK", headers, PAGE)
    if request.path == "/release":
        acked.set()
        return connection.respond(200, "released\n")
    if request.path == "/wait":
        try:
            await asyncio.wait_for(acked.wait(), 30)
        except asyncio.TimeoutError:
            pass
        return connection.respond(200, "done\n")
    return connection.respond(404, "not found\n")


async def main():
    async with serve(echo, "127.0.0.1", int(sys.argv[1]), process_request=http) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        print(f"listening {port}", flush=True)
        await asyncio.Future()


asyncio.run(main())
