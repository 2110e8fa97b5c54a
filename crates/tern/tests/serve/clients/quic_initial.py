"""Sends a QUIC client's first flight (its Initial: a ClientHello) to
HOST:PORT and leaves: a handshake that never ends, as a spoofed Initial's
(tern's answer goes to a port nobody reads). For tern's address-validation
tests (serve/h3_retry.rs). Prints the number of datagrams sent.

Usage: quic_initial.py HOST PORT NAME
"""

import socket
import sys
import time

from aioquic.h3.connection import H3_ALPN
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection

host, port, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=name)
conn = QuicConnection(configuration=config)
conn.connect((host, port), now=time.time())
sent = 0
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
    for data, _ in conn.datagrams_to_send(now=time.time()):
        sock.sendto(data, (host, port))
        sent += 1
print(sent)
