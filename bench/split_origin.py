"""An HTTP/1.1 origin in the style of Python's http.server: keepalive,
Nagle left on, every response written as its head and then its body.

/split: 100-byte body written after the head; /dribble: a chunked body of
five 20-byte chunks, each its own write. Prints its port, then serves on
127.0.0.1 (PORT argument, or any free port) until killed. Used by
tern-testsupport's python_origin and by bench/split-backend.sh.
"""
import http.server
import socketserver
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        if self.path == "/dribble":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for _ in range(5):
                self.wfile.write(b"14\r\n" + b"d" * 20 + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        body = b"s" * 100
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
server = Server(("127.0.0.1", port), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
