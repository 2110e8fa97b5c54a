"""An HTTP/1.1 origin that counts what it serves and, when asked, serves
at most RATE requests per second: the backend of `tern bench`'s request
mix and capacity-search tests (crates/tern/tests/bench/scale.rs) and of
bench/capacity.sh.

Every path answers 200 with the body "ok <path>", except /status/NNN
(status NNN, same body) and /counts (the JSON object path -> requests
served so far, not counted itself). With RATE > 0 each request is given
the next free slot of a 1/RATE-second clock and answered at that slot: a
server whose capacity is exactly RATE requests per second, however late
the operating system wakes it (slots are absolute, so lateness does not
add up). Above RATE its queue, hence its latency, grows without bound:
the knee a capacity search has to find. With MAX_QUEUE > 0 a request
that would wait more than MAX_QUEUE seconds for its slot is refused at
once with 503 (and not counted), as a rate limiter in front of a real
service does: above the knee the share of 503s is the overload, so the
knee shows in the errors, which the latency noise of a shared machine
does not move.

Usage: scale_origin.py [RATE] [PORT] [MAX_QUEUE]. Prints its port, then
serves on 127.0.0.1 until killed.
"""
import http.server
import json
import socketserver
import sys
import threading
import time

RATE = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
MAX_QUEUE = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
counts = {}
lock = threading.Lock()
next_slot = [0.0]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Head and body are two writes: without TCP_NODELAY the body would
    # wait for a delayed ACK (40 ms), a knee of its own.
    disable_nagle_algorithm = True

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.path == "/counts":
            with lock:
                body = json.dumps(counts).encode()
            return self.answer(200, body)
        if RATE > 0:
            with lock:
                now = time.monotonic()
                slot = max(now, next_slot[0])
                refused = MAX_QUEUE > 0 and slot - now > MAX_QUEUE
                if not refused:
                    next_slot[0] = slot + 1.0 / RATE
            if refused:
                return self.answer(503, b"over the rate")
            if slot > now:
                time.sleep(slot - now)
        with lock:
            counts[self.path] = counts.get(self.path, 0) + 1
        status = 200
        if self.path.startswith("/status/"):
            status = int(self.path[len("/status/"):])
        self.answer(status, ("ok " + self.path).encode())

    def answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = handle_any
    do_POST = handle_any
    do_PUT = handle_any

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 1024


port = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] != "0" else 0
server = Server(("127.0.0.1", port), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
