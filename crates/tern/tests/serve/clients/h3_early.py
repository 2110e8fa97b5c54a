# An aioquic HTTP/3 client that resumes with 0-RTT: a first connection
# makes one GET and keeps the session ticket; a second connection, resuming
# with it, sends a GET and a POST of BODY_LEN bytes in 0-RTT (before its
# handshake ends), then, once the handshake is over, the same POST again.
# Prints one JSON line per response: which, status, whether the server
# accepted early data on that connection, and the body (JSON when it is).
#
# Usage: h3_early.py HOST PORT CA_FILE SERVER_NAME PATH BODY_LEN
import asyncio
import json
import sys

from aioquic.asyncio.client import connect
from aioquic.h3.connection import H3_ALPN
from aioquic.quic.configuration import QuicConfiguration

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from h3_client import Client, summary  # noqa: E402


async def main():
    host, port, ca, name, path, body_len = sys.argv[1:7]
    authority = f"{name}:{port}"
    body = b"x" * int(body_len)
    tickets = []
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=name)
    config.load_verify_locations(ca)
    async with connect(host, int(port), configuration=config, create_protocol=Client,
                       session_ticket_handler=tickets.append) as client:
        r = await client.request("GET", authority, path, b"", [])
        print(json.dumps({"which": "first", **summary(r)}), flush=True)
        # The ticket comes after the handshake; wait for it.
        for _ in range(100):
            if tickets:
                break
            await asyncio.sleep(0.02)
    if not tickets:
        sys.exit("no session ticket from the server")
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=name)
    config.load_verify_locations(ca)
    config.session_ticket = tickets[-1]
    async with connect(host, int(port), configuration=config, create_protocol=Client,
                       wait_connected=False) as client:
        early = await asyncio.gather(
            client.request("GET", authority, path, b"", []),
            client.request("POST", authority, path, body, []),
        )
        await client.wait_connected()
        accepted = bool(client._quic.tls.early_data_accepted)
        for which, r in zip(("early GET", "early POST"), early):
            print(json.dumps({"which": which, "early_data_accepted": accepted, **summary(r)}), flush=True)
        r = await client.request("POST", authority, path, body, [])
        print(json.dumps({"which": "POST after the handshake", **summary(r)}), flush=True)


asyncio.run(main())
