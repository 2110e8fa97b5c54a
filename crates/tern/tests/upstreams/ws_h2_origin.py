# A WebSocket origin that speaks RFC 8441 (WebSockets over HTTP/2): an
# ASGI app on Hypercorn (an implementation no one here wrote; its HTTP/2
# SETTINGS offer extended CONNECT). h2c (prior knowledge) on
# 127.0.0.1:PORT, or HTTP/2 over TLS (ALPN h2) given CERT and KEY files.
#   /ws      accepts, sends "http_version=V" (what the request came over:
#            "2" for an extended CONNECT), then echoes every message
#   /refuse  refuses the WebSocket (Hypercorn answers 403)
# Prints "listening" once it accepts. Usage: ws_h2_origin.py PORT [CERT KEY]
import asyncio
import sys

from hypercorn.asyncio import serve
from hypercorn.config import Config


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 404,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"not found\n"})
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
        if message.get("text") is not None:
            await send({"type": "websocket.send", "text": message["text"]})
        else:
            await send({"type": "websocket.send", "bytes": message["bytes"]})


async def main():
    config = Config()
    config.bind = [f"127.0.0.1:{sys.argv[1]}"]
    if len(sys.argv) > 3:
        config.certfile = sys.argv[2]
        config.keyfile = sys.argv[3]
    config.accesslog = None
    task = asyncio.ensure_future(serve(app, config))
    print("listening", flush=True)
    await task


asyncio.run(main())
