"""Hostile HTTP servers for the server bench's bounds (issue 32): a threaded http.server on 127.0.0.1 that speaks
llama-server's API (/health, /props, /tokenize, streamed /completion) and misbehaves in one way per mode.

    trickle-headers  every answer: a status line, then one header byte per `interval`, forever
    trickle-body     /health: a Content-Length of 64, then one body byte per `interval`
    trickle-line     /completion: the headers, then one streamed line, one byte per `interval`, never ended
    flood            /completion: the headers, then comment lines as fast as the socket takes them, forever
    one-token        /tokenize: one token per call, whatever the text
    echo-secret      /tokenize: 500 with the Authorization header (the API key) in the error message
    echo-props       /props: the Authorization header as the model's alias
    echo-escaped     /props: the same, every character as a JSON \\u escape

Also a program (`python -m tests.bounds.hostile_http --mode M --port N`), for --serve and the before/after figures.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODES = ("trickle-headers", "trickle-body", "trickle-line", "flood", "one-token", "echo-secret", "echo-props",
         "echo-escaped", "ok")


class HostileServer:
    """One hostile llama-server; counts what it was asked (``requests``: (method, path) in order)."""

    def __init__(self, mode: str, *, interval: float = 1.0, port: int = 0, n_ctx: int = 4096):
        if mode not in MODES:
            raise ValueError(mode)
        self.mode = mode
        self.interval = interval
        self.n_ctx = n_ctx
        self.requests: list[tuple[str, str]] = []
        self.stop = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake.handle(self, "GET")

            def do_POST(self) -> None:
                fake.handle(self, "POST")

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # the client hanging up on a trickle or a flood is the point

        self.httpd = Server(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def count(self, path: str) -> int:
        return sum(1 for _, p in self.requests if p.split("?")[0] == path)

    def __enter__(self) -> "HostileServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    # ---------------------------------------------------------------- answers

    def _json(self, h: BaseHTTPRequestHandler, status: int, data: Any) -> None:
        body = json.dumps(data).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _trickle(self, h: BaseHTTPRequestHandler, head: bytes, byte: bytes) -> None:
        """``head`` at once, then ``byte`` every interval until the client hangs up or the server stops."""
        h.wfile.write(head)
        h.wfile.flush()
        while not self.stop.wait(self.interval):
            h.wfile.write(byte)
            h.wfile.flush()
        h.close_connection = True

    def handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = json.loads(h.rfile.read(length)) if length else {}
        path = h.path.split("?")[0]
        self.requests.append((method, h.path))
        auth = h.headers.get("Authorization") or ""
        if self.mode == "trickle-headers":
            self._trickle(h, b"HTTP/1.1 200 OK\r\nX-Slow: ", b"a")
        elif path == "/health" and self.mode == "trickle-body":
            self._trickle(h, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n{",
                          b" ")
        elif path == "/health":
            self._json(h, 200, {"status": "ok"})
        elif path == "/props":
            alias = auth if self.mode in ("echo-props", "echo-escaped") else "hostile"
            props = {"default_generation_settings": {"params": {}, "n_ctx": self.n_ctx}, "total_slots": 1,
                     "model_alias": alias, "model_path": "/models/hostile.gguf", "build_info": "b11312-0c1e570"}
            if self.mode == "echo-escaped":
                text = json.dumps(props).replace(json.dumps(alias), '"' + "".join(f"\\u{ord(c):04x}" for c in alias)
                                                 + '"').encode()
                h.send_response(200)
                h.send_header("Content-Type", "application/json")
                h.send_header("Content-Length", str(len(text)))
                h.end_headers()
                h.wfile.write(text)
                return
            self._json(h, 200, props)
        elif path == "/tokenize" and self.mode == "echo-secret":
            self._json(h, 500, {"error": {"code": 500, "message": f"cannot tokenize for {auth}",
                                          "type": "server_error"}})
        elif path == "/tokenize":
            words = str(body.get("content", "")).split()
            tokens = [7] if self.mode == "one-token" else [1 + len(w) for w in words]
            self._json(h, 200, {"tokens": tokens})
        elif path in ("/completion", "/v1/completions") and self.mode == "trickle-line":
            self._trickle(h, b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                          b'data: {"content": "x", "stop": false', b" ")
        elif path in ("/completion", "/v1/completions") and self.mode == "flood":
            h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
            line = b": " + b"x" * 1022 + b"\n"
            while not self.stop.is_set():
                h.wfile.write(line * 64)
            h.close_connection = True
        elif path in ("/completion", "/v1/completions"):
            self._complete(h, body)
        else:
            self._json(h, 404, {"error": {"code": 404, "message": "File Not Found"}})

    def _complete(self, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        n = int(body.get("n_predict") or body.get("max_tokens") or 1)
        prompt = list(body.get("prompt") or [])
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        for _ in range(n):
            h.wfile.write(b'data: {"content": "x", "stop": false}\n\n')
        timings = {"cache_n": 0, "prompt_n": len(prompt), "prompt_ms": max(0.01, len(prompt) * 0.001),
                   "predicted_n": n, "predicted_ms": n * 0.01}
        h.wfile.write(b"data: " + json.dumps({"content": "", "stop": True, "timings": timings}).encode() + b"\n\n")
        h.wfile.flush()


def main(argv: list[str]) -> None:
    """As a program: `--mode M [--interval S] --port N` (and the --host that tunehost's --serve adds)."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="ok", choices=MODES)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--host")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    with HostileServer(args.mode, interval=args.interval, port=args.port) as server:
        while True:
            time.sleep(3600)
            _ = server


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
