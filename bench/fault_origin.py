"""An HTTP/1.1 origin that fails on purpose, for bench/backend-faults.sh and
tern-testsupport's fault origin.

Paths (every response is 200 with a 100,000-byte body unless it says):
  /ok           a 100-byte body, keepalive
  /slow?s=S     a 100-byte body after S seconds (at most 30), keepalive
  /inflight     how many /slow requests are waiting now (plain text)
  /kill         half the body, then the connection closed (a backend killed
                mid-response: FIN)
  /reset        half the body, then a TCP reset
  /reset-early  a TCP reset instead of any response
  /chunked-cut  a chunked body of three 1000-byte chunks, then closed
                without the last chunk
  /stall        1000 bytes of the body, then nothing for STALL seconds
Prints its port, then serves on 127.0.0.1 (PORT argument, or any free
port; STALL the second argument, default 30) until killed.
"""
import http.server
import socket
import socketserver
import struct
import sys
import threading
import time

FULL = 100_000
SLOW_WAITING = 0
SLOW_LOCK = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        # Head and body leave at once: no delayed-ACK stall (the split-write
        # trap, measured by bench/split-backend.sh) in the bystanders' figures.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def head(self, length=FULL):
        self.send_response(200)
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def reset(self):
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/ok":
            self.head(100)
            self.wfile.write(b"k" * 100)
        elif path == "/slow":
            query = self.path.partition("?")[2]
            seconds = float(query[2:].split("&")[0]) if query.startswith("s=") else 1.0
            global SLOW_WAITING
            with SLOW_LOCK:
                SLOW_WAITING += 1
            time.sleep(min(seconds, 30.0))
            with SLOW_LOCK:
                SLOW_WAITING -= 1
            self.head(100)
            self.wfile.write(b"s" * 100)
        elif path == "/inflight":
            body = str(SLOW_WAITING).encode()
            self.head(len(body))
            self.wfile.write(body)
        elif path == "/kill":
            self.head()
            self.wfile.write(b"x" * (FULL // 2))
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
        elif path == "/reset":
            self.head()
            self.wfile.write(b"x" * (FULL // 2))
            time.sleep(0.05)
            self.reset()
        elif path == "/reset-early":
            self.reset()
        elif path == "/chunked-cut":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for _ in range(3):
                self.wfile.write(b"3e8\r\n" + b"c" * 1000 + b"\r\n")
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
        elif path == "/stall":
            self.head()
            self.wfile.write(b"x" * 1000)
            time.sleep(STALL)
            self.close_connection = True
        else:
            self.send_error(404)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    # A proxy that reloads opens its backend connections anew, many at
    # once: the default backlog of 5 would drop their SYNs (1 s retries).
    request_queue_size = 4096

    def handle_error(self, request, client_address):
        pass  # the faults are on purpose


port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
STALL = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
server = Server(("127.0.0.1", port), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
