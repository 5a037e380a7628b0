"""A fake llama-server (http.server in a thread on 127.0.0.1) that speaks just enough of the real API
(/health, /props, /tokenize, streamed /completion with timings) and misbehaves on demand."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeLlamaServer:
    """mode: "ok", "draft" (speculative timings), "hang", "html", "json-404", "absurd", "die", "garbage-stream",
    "cached-cold"; ``die_after`` completions answered before "die" cuts the connection."""

    def __init__(self, mode: str = "ok", *, n_ctx: int = 2048, slots: int = 1, die_after: int = 0,
                 token_delay_s: float = 0.0, api_key: str | None = None, router: bool = False, port: int = 0,
                 speed: float = 1.0):
        self.mode = mode
        self.n_ctx = n_ctx
        self.slots = slots
        self.die_after = die_after
        self.token_delay_s = token_delay_s
        self.api_key = api_key
        self.router = router
        self.alias = "fake"  # /props model_alias (hostile on demand)
        self.loading_polls = 0  # /health answers 503 (loading) this many times first
        self.crash_after: int | None = None  # as a program: SIGSEGV itself at this completion
        self.speed = speed  # divides the reported times: 2.0 reports twice the rates
        self.completions = 0
        self.requests: list[tuple[str, str, Any]] = []
        self.last_prompt: list[int] = []
        self._lock = threading.Lock()
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
            def handle_error(self, request: Any, client_address: Any) -> None:
                # a client that hangs up (tunehost closing a keep-alive connection) is no server error: the
                # default handler prints a traceback into the CLI's captured stderr, racing the test's assertions
                import sys

                if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
                    super().handle_error(request, client_address)

        self.httpd = Server(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "FakeLlamaServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
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

    def handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = json.loads(h.rfile.read(length)) if length else None
        self.requests.append((method, h.path, h.headers.get("Authorization")))
        if self.mode == "hang":
            time.sleep(30)
            return
        if self.mode == "html":
            page = b"<html><body>hello</body></html>"
            h.send_response(200)
            h.send_header("Content-Type", "text/html")
            h.send_header("Content-Length", str(len(page)))
            h.end_headers()
            h.wfile.write(page)
            return
        if self.api_key and h.headers.get("Authorization") != f"Bearer {self.api_key}" and h.path != "/health":
            self._json(h, 401, {"error": {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}})
            return
        path = h.path.split("?")[0]
        if self.mode == "json-404":
            self._json(h, 404, {"detail": "Not Found"})  # some other JSON API
            return
        if path == "/health" and self.loading_polls > 0:
            self.loading_polls -= 1
            self._json(h, 503, {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}})
        elif path == "/health":
            self._json(h, 200, {"status": "ok"})
        elif path == "/props":
            if self.router and "model=" not in h.path:
                self._json(h, 200, {"role": "router", "model_alias": "llama-server", "model_path": "none",
                                    "default_generation_settings": {"params": {}, "n_ctx": 0},
                                    "build_info": "b11312-0c1e570"})
                return
            self._json(h, 200, {"default_generation_settings": {"params": {}, "n_ctx": self.n_ctx},
                                "total_slots": self.slots, "model_alias": self.alias, "model_path": "/models/fake.gguf",
                                "build_info": "b11312-0c1e570"})
        elif path == "/models":
            self._json(h, 200, {"data": [{"id": "fake-model"}]})
        elif path == "/tokenize":
            words = str(body.get("content", "")).split()
            self._json(h, 200, {"tokens": [abs(hash(w)) % 30000 for w in words]})
        elif path == "/completion":
            self.completion(h, body)
        elif path == "/v1/completions":
            self.completion(h, body, openai=True)
        else:
            self._json(h, 404, {"error": {"code": 404, "message": "File Not Found"}})

    def completion(self, h: BaseHTTPRequestHandler, body: dict[str, Any], openai: bool = False) -> None:
        with self._lock:
            self.completions += 1
            number = self.completions
        if self.crash_after is not None and number > self.crash_after:
            import os
            import signal

            os.kill(os.getpid(), signal.SIGSEGV)
        prompt = list(body.get("prompt") or [])
        n = int(body.get("max_tokens" if openai else "n_predict") or 1)
        token = (b'data: {"choices": [{"text": "x", "finish_reason": null}]}\n\n' if openai
                 else b'data: {"content": "x", "stop": false}\n\n')
        cached = 0
        if body.get("cache_prompt") and prompt == self.last_prompt:
            cached = len(prompt) - 1
        if self.mode == "cached-cold":
            cached = len(prompt) // 2
        self.last_prompt = prompt
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        if self.mode == "die" and number > self.die_after:
            h.wfile.write(b'data: {"content": "x", "stop": false}\n\n')
            h.wfile.flush()
            h.connection.shutdown(2)
            return
        if self.mode == "garbage-stream":
            h.wfile.write(b"data: {not json\n\n")
            return
        for _ in range(n):
            if self.token_delay_s:
                time.sleep(self.token_delay_s)
            h.wfile.write(token)
        processed = len(prompt) - cached
        timings = {"cache_n": cached, "prompt_n": processed, "prompt_ms": max(0.01, processed * 0.001) / self.speed,
                   "predicted_n": n, "predicted_ms": n * 0.01 / self.speed}
        if self.mode == "draft":
            timings.update(draft_n=10, draft_n_accepted=7)
        if self.mode == "absurd":
            timings.update(prompt_ms=0.0, prompt_n=processed or 1)
        final = ({"choices": [{"text": "", "finish_reason": "length"}], "timings": timings} if openai
                 else {"content": "", "stop": True, "timings": timings})
        h.wfile.write(b"data: " + json.dumps(final).encode() + b"\n\n")
        if openai:
            h.wfile.write(b"data: [DONE]\n\n")
        h.wfile.flush()


def main(argv: list[str]) -> None:
    """As a program: `python fake_server.py [--mode M] [--pid-file F] [--crash-after S] --host H --port N` (the
    arguments tunehost's --serve adds); --crash-after N kills itself with SIGSEGV at completion N + 1."""
    import argparse
    import os

    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="ok")
    parser.add_argument("--pid-file")
    parser.add_argument("--crash-after", type=int, help="completions answered before a SIGSEGV")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--spec-type", help="drafts (the \"draft\" mode's timings) and reports rates 1.5x higher")
    args = parser.parse_args(argv)
    if args.pid_file:
        with open(args.pid_file, "w") as fh:
            fh.write(str(os.getpid()))
    mode, speed = ("draft", 1.5) if args.spec_type else (args.mode, 1.0)
    with FakeLlamaServer(mode, port=args.port, token_delay_s=0.002, speed=speed) as fake:
        fake.crash_after = args.crash_after
        fake.thread.join()


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
