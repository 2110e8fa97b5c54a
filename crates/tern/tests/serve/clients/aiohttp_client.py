# Three POSTs on one aiohttp.ClientSession (one kept-alive connection);
# prints one JSON line per response. Usage: aiohttp_client.py URL CA_FILE
import asyncio
import json
import ssl
import sys

import aiohttp


async def main():
    ctx = ssl.create_default_context(cafile=sys.argv[2])
    async with aiohttp.ClientSession() as session:
        for _ in range(3):
            async with session.post(
                sys.argv[1], data=b"x" * 1000, headers={"X-Forwarded-For": "6.6.6.6"}, ssl=ctx
            ) as r:
                body = await r.json(content_type=None)
                print(json.dumps({"status": r.status, "proto": "HTTP/1.1", "body": body}))


asyncio.run(main())
