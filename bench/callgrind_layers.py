#!/usr/bin/env python3
"""Instructions per request by layer, from a callgrind output file (not
callgrind_annotate's listing): an inclusive map that adds up to the total.

Each function's own instructions go to the layer of the nearest function
above it on the call path that starts a layer (LAYERS below, by name,
first match wins); a function that starts no layer inherits its caller's.
callgrind keeps calls between pairs of functions, not whole call paths, so
a function reached from several layers has its cost split among them in
proportion to the calls' inclusive costs (gprof's assumption). Read the
layers as a map, within a few percent.

Usage: bench/callgrind_layers.py CALLGRIND_OUT REQUESTS [tern|hitch [BASE_OUT]]
(bench/instructions.sh prints it for tern's runs and SERVER=hitch runs).
BASE_OUT: another run's output, its layers subtracted (hitch's worker
cannot be zeroed mid-run: two runs that differ by the load counted).
"""

import re
import sys
from collections import defaultdict

# (layer, function name pattern). The names are callgrind's (demangled,
# no hash); the first pattern that matches names the layer.
TERN = [
    ("TLS handshakes (C per run)", r"MidHandshake"),
    ("AES-GCM seal and open (aws-lc)", r"aws_lc_rs::aead::|aws_lc_0_47_0_EVP_AEAD_CTX_(seal|open)"),
    ("rustls read: socket read, deframe, decrypt, plaintext out",
     r"ClientTls as tokio::io::async_read::AsyncRead>::poll_read|TlsStream<IO> as tokio::io::async_buf_read"),
    ("rustls write: record, encrypt, send",
     r"ClientTls as tokio::io::async_write::AsyncWrite>::poll_write|ClientSocket"),
    ("system call wrappers (libc)", r"^(recv|send|sendto|sendmsg|writev|read|write|epoll_wait|__libc_\w+)$"),
    ("tokio I/O readiness and wake-ups",
     r"^tokio::runtime::io::|PollEvented|Readiness as core|task::waker::|AtomicWaker|^tokio::runtime::task::raw::schedule"),
    ("client request head: read buffer, parse, checks",
     r"tern_http::head::parse_request|tern_http::parse::request|read_head_parsing|tern_http::framing::request_framing|check_host"),
    ("backend request head: rewrite", r"upstream::h1::write_head|rewrite::write_request_head"),
    ("backend write", r"upstream::h1::write::|BackendStream as tokio::io::async_write"),
    ("backend response head: read, parse, checks", r"upstream::h1::read_head|tern_http::parse::response|response_framing"),
    ("client response head: rewrite", r"H1Client<C> as tern_proxy::exchange::Front>::start_response|rewrite::write_response_head"),
    ("routing, policy, pool, log, metrics",
     r"exchange::policy::|Backends::(get|put|pick|tries|refresh|answered|route)|IdlePool|route_of|misdirected|log_request|metrics::|backend_answered|ConnCtx::(facts|give_back)"),
    ("tokio scheduler, driver, timers (outside tern's task)",
     r"^tokio::runtime::|^tokio::task::local|Turns<F>|block_on|^std::thread::local::LocalKey|^tokio::time::"),
    ("tern's futures and glue (front, exchange, state machines)", r"^tern_proxy::|^<tern_proxy::|PollFn|tern_deadline"),
]
ABSORBING = {"TLS handshakes (C per run)"}
HITCH = [
    ("TLS handshakes (C per run)", r"^SSL_do_handshake$"),
    ("SSL_read (record, decrypt, copy out)", r"^SSL_read$"),
    ("SSL_write (record, encrypt, send)", r"^SSL_write$"),
    ("system call wrappers (libc)", r"^(recv|send|sendto|sendmsg|writev|read|write|epoll_wait|epoll_ctl|__libc_\w+)$"),
    ("libev (loop, watchers)", r"^ev_"),
]
# Within SSL_read and SSL_write: the AES-GCM work itself (OpenSSL's EVP
# layer down), as tern's layers count aws-lc's apart.
HITCH.insert(1, ("AES-GCM encrypt and decrypt (OpenSSL EVP)", r"^EVP_(Encrypt|Decrypt|Cipher)(Update|Final|Final_ex)$|^EVP_Cipher$"))


def parse(path, event=None):
    """Own cost, inclusive call costs and call counts per function name.

    The cost is the dump's first event (Ir as instructions.sh runs it), or
    `event` (D1mw, DLmr... under --cache-sim=yes). Cost lines start with
    one column per kind in the dump's `positions:` line ("instr line"
    under --dump-instr=yes), then one number per event, trailing zeros
    left out.
    """
    names = {}
    own = defaultdict(int)
    calls = defaultdict(lambda: defaultdict(int))
    counts = defaultdict(lambda: defaultdict(int))
    fn = None
    callee = None
    # The call count of a `calls=` line, whose next cost line is the
    # calls' inclusive cost (0 for a call entered before the counters
    # were zeroed: a thread's start, still running).
    pending_calls = None
    positions, index = 1, 0
    compressed = re.compile(r"^(c?fn)=\((\d+)\)(?: (.*))?$")
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = compressed.match(line)
            if m:
                kind, ident, name = m.groups()
                # fn and cfn share one table of names.
                if name is not None:
                    names[ident] = name
                name = names.get(ident, ident)
                if kind == "fn":
                    fn = name
                else:
                    callee = name
                continue
            if line.startswith("positions:"):
                positions = len(line.split()) - 1
                continue
            if line.startswith("events:"):
                fields = line.split()[1:]
                if event is not None:
                    if event not in fields:
                        sys.exit(f"event {event} not in {path} (it has {' '.join(fields)})")
                    index = fields.index(event)
                continue
            if line.startswith("calls="):
                pending_calls = int(line.split()[0][len("calls="):])
                continue
            if not line or not (line[0].isdigit() or line[0] in "+-*"):
                continue
            values = line.split()[positions:]
            cost = int(values[index]) if index < len(values) else 0
            if pending_calls is not None:
                if callee != fn:
                    calls[fn][callee] += cost
                    counts[fn][callee] += pending_calls
                pending_calls = None
            else:
                own[fn] += cost
    return own, calls, counts


def layers_of(path, rules):
    """Instructions by layer, and the whole count, of one output file."""
    patterns = [(layer, re.compile(p)) for layer, p in rules]
    own, calls, _ = parse(path)
    incl = {}

    def inclusive(fn, depth=0):
        if fn in incl:
            return incl[fn]
        total = own.get(fn, 0) + sum(calls[fn].values())
        incl[fn] = total
        return total

    def layer_of(fn):
        for layer, p in patterns:
            if p.search(fn):
                return layer
        return None

    # split[(fn, layer)]: fn's inclusive cost by layer when reached from
    # `layer`, as fractions of its inclusive cost.
    memo = {}
    on_stack = set()

    def split(fn, outer):
        # A handshake keeps everything under it (its records' encryption
        # too).
        here = outer if outer in ABSORBING else (layer_of(fn) or outer)
        key = (fn, here)
        if key in memo:
            return memo[key]
        total = inclusive(fn)
        out = defaultdict(float)
        if total == 0:
            return out
        if key in on_stack:
            # A cycle: book the rest to this layer.
            out[here] = 1.0
            return out
        on_stack.add(key)
        out[here] += own.get(fn, 0) / total
        for callee, cost in calls[fn].items():
            sub = split(callee, here)
            share = cost / total
            if not sub:
                out[here] += share
                continue
            for layer, frac in sub.items():
                out[layer] += share * frac
        on_stack.discard(key)
        memo[key] = out
        return out

    callers = defaultdict(int)
    for fn, cs in calls.items():
        for callee in cs:
            callers[callee] += 1
    roots = [fn for fn in set(own) | set(calls) if callers[fn] == 0]
    sys.setrecursionlimit(100000)
    layers = defaultdict(float)
    grand = 0
    for root in roots:
        total = inclusive(root)
        grand += total
        for layer, frac in split(root, "other (outside every layer)").items():
            layers[layer] += total * frac
    return layers, grand


def main():
    path, requests = sys.argv[1], float(sys.argv[2])
    rules = HITCH if len(sys.argv) > 3 and sys.argv[3] == "hitch" else TERN
    layers, grand = layers_of(path, rules)
    if len(sys.argv) > 4:
        base, base_grand = layers_of(sys.argv[4], rules)
        grand -= base_grand
        for layer, cost in base.items():
            layers[layer] -= cost
    print(f"{grand / requests:9.0f}  whole run, per request")
    for layer, cost in sorted(layers.items(), key=lambda kv: -kv[1]):
        print(f"{cost / requests:9.0f}  {layer}")


if __name__ == "__main__":
    main()
