"""A bounded HTTP client for llama-server: the standard library only (http.client), every read capped.

Only the address the user named (``--server URL``) or the loopback port tunehost opened (``--serve``) is ever
contacted: no redirect is followed, no other host is derived from an answer. Every failure is one
:class:`~tunehost.errors.TunehostError` line that says what the target did:

- nothing listens on the port -> "nothing listens";
- it accepts and never answers -> "no answer within N s" (``timeout_s`` bounds every wait for a byte AND each
  whole request: a server that trickles bytes forever is stopped as well);
- it closes the connection mid-request -> "closed the connection" (the caller says why when it owns the process);
- 401 / 403 -> the API key;
- an answer that is not JSON, too large, or not what llama-server sends -> "not a llama-server".

The API key is read from a file by the caller, sent as ``Authorization: Bearer`` and never printed or stored.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tunehost.errors import TunehostError
from tunehost.printable import one_line

MAX_RESPONSE_BYTES = 32 * 1024 * 1024  # /props carries the chat template; /tokenize of 128k tokens is ~1 MB
MAX_LINE_BYTES = 1024 * 1024  # one SSE line: one token's JSON (with timings) is well under 4 kB
MAX_KEY_BYTES = 4096
PROBE_TIMEOUT_S = 10.0  # /health and /props answer at once on a live llama-server (even while it generates)


@dataclass(frozen=True)
class Target:
    """Where the server is: scheme, host, port and a path prefix (a server behind a proxy path)."""

    scheme: str
    host: str
    port: int
    prefix: str = ""

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.prefix}"

    @property
    def loopback(self) -> bool:
        import ipaddress

        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_target(url: str) -> Target:
    """``http://127.0.0.1:8080`` (or https, an optional path prefix) -> Target; one clear error otherwise."""
    text = one_line(url, 300)
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise TunehostError(f"--server {text}: not a URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise TunehostError(f"--server {text}: give an http:// or https:// URL (e.g. http://127.0.0.1:8080)")
    if not parts.hostname:
        raise TunehostError(f"--server {text}: no host in the URL")
    if parts.username or parts.password:
        raise TunehostError(f"--server {text}: no user or password in the URL; give the API key with --api-key-file")
    if parts.query or parts.fragment:
        raise TunehostError(f"--server {text}: the URL takes no query or fragment")
    return Target(parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80),
                  parts.path.rstrip("/"))


def read_api_key(path: str) -> str:
    """The key from the file's first line (bounded read); the key itself never appears in an error."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_KEY_BYTES + 1)
    except OSError as exc:
        raise TunehostError(f"--api-key-file {one_line(path, 200)}: {exc.strerror or exc}") from None
    if len(raw) > MAX_KEY_BYTES:
        raise TunehostError(f"--api-key-file {one_line(path, 200)}: larger than {MAX_KEY_BYTES} bytes; not an API key")
    try:
        lines = raw.decode("utf-8").strip().splitlines()
    except UnicodeDecodeError:
        raise TunehostError(f"--api-key-file {one_line(path, 200)}: not UTF-8 text") from None
    key = lines[0].strip() if lines else ""
    if not key or any(ord(c) < 33 or ord(c) == 127 for c in key):
        raise TunehostError(f"--api-key-file {one_line(path, 200)}: the first line holds no key (one word, "
                            "printable, no spaces)")
    return key


@dataclass(frozen=True)
class StreamEvent:
    """One SSE ``data:`` object and when the client read it (time.monotonic())."""

    at: float
    data: Mapping[str, Any]


class ServerClient:
    """JSON requests and streaming completions against one target, each on a fresh connection (a client thread
    owns its own client; http.client connections are not shared between threads)."""

    def __init__(self, target: Target, *, timeout_s: float, api_key: str | None = None):
        self.target = target
        self.timeout_s = timeout_s
        self._api_key = api_key

    def __repr__(self) -> str:  # never the key
        return f"ServerClient({self.target.url!r}, timeout_s={self.timeout_s})"

    # ------------------------------------------------------------ plumbing

    def _connect(self, timeout_s: float) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.target.scheme == "https" else http.client.HTTPConnection
        return cls(self.target.host, self.target.port, timeout=timeout_s)

    def _headers(self, body: bool) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream", "User-Agent": "tunehost-bench"}
        if body:
            headers["Content-Type"] = "application/json"
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _where(self, path: str) -> str:
        return f"{self.target.url}{path}"

    def _open(self, method: str, path: str, body: Mapping[str, Any] | None,
              timeout_s: float) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        conn = self._connect(timeout_s)
        payload = None if body is None else json.dumps(body).encode()
        try:
            conn.request(method, self.target.prefix + path, body=payload, headers=self._headers(body is not None))
            response = conn.getresponse()
        except BaseException as exc:
            conn.close()
            raise self._transport_error(path, exc, timeout_s) from None
        if response.status in (401, 403):
            conn.close()
            raise TunehostError(f"{self._where(path)} answered {response.status}: "
                                + ("the API key is wrong" if self._api_key else "it wants an API key")
                                + " (give it with --api-key-file)")
        return conn, response

    def _transport_error(self, path: str, exc: BaseException, timeout_s: float) -> BaseException:
        if isinstance(exc, (KeyboardInterrupt, SystemExit, TunehostError)):
            return exc
        where = self._where(path)
        if isinstance(exc, ConnectionRefusedError):
            return TunehostError(f"{self.target.url}: nothing listens there (connection refused)")
        if isinstance(exc, (socket.timeout, TimeoutError)):
            return TunehostError(f"{where}: no answer within {timeout_s:g} s (the per-request timeout, --timeout)")
        if isinstance(exc, (http.client.RemoteDisconnected, http.client.IncompleteRead, ConnectionResetError,
                            BrokenPipeError, ConnectionAbortedError)):
            return ServerGone(f"{where}: the server closed the connection mid-request")
        if isinstance(exc, socket.gaierror):
            return TunehostError(f"{self.target.url}: cannot resolve {one_line(self.target.host, 100)}")
        if isinstance(exc, (http.client.HTTPException, OSError)):
            return TunehostError(f"{where}: {one_line(exc, 200) or type(exc).__name__}")
        return exc

    def _read_body(self, response: http.client.HTTPResponse, path: str, deadline: float) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            if time.monotonic() > deadline:
                raise TunehostError(f"{self._where(path)}: no complete answer within {self.timeout_s:g} s "
                                    "(the per-request timeout, --timeout)")
            chunk = response.read1(65536) if hasattr(response, "read1") else response.read(65536)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > MAX_RESPONSE_BYTES:
                raise TunehostError(f"{self._where(path)}: answer larger than {MAX_RESPONSE_BYTES >> 20} MiB; "
                                    "not a llama-server")
            chunks.append(chunk)

    # ------------------------------------------------------------ requests

    def request_json(self, method: str, path: str, body: Mapping[str, Any] | None = None, *,
                     timeout_s: float | None = None, ok: tuple[int, ...] = (200,)) -> tuple[int, Any]:
        """(status, parsed JSON) of one request; statuses outside ``ok`` (and 401/403) are errors."""
        wait = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + wait
        conn, response = self._open(method, path, body, wait)
        try:
            raw = self._read_body(response, path, deadline)
        except TunehostError:
            raise
        except BaseException as exc:
            raise self._transport_error(path, exc, wait) from None
        finally:
            conn.close()
        data = _parse_json(raw, self._where(path))
        if response.status not in ok:
            raise TunehostError(f"{self._where(path)} answered {response.status}: {_error_text(data, raw)}")
        return response.status, data

    def stream(self, path: str, body: Mapping[str, Any]) -> Iterator[StreamEvent]:
        """The ``data:`` objects of a streamed completion as they arrive; the last carries ``timings``."""
        deadline = time.monotonic() + self.timeout_s
        conn, response = self._open("POST", path, body, self.timeout_s)
        try:
            if response.status != 200:
                raw = self._read_body(response, path, deadline)
                raise TunehostError(f"{self._where(path)} answered {response.status}: "
                                    f"{_error_text(_parse_json(raw, self._where(path), strict=False), raw)}")
            while True:
                if time.monotonic() > deadline:
                    raise TunehostError(f"{self._where(path)}: the completion did not finish within "
                                        f"{self.timeout_s:g} s (the per-request timeout, --timeout)")
                try:
                    line = response.readline(MAX_LINE_BYTES + 1)
                except BaseException as exc:
                    raise self._transport_error(path, exc, self.timeout_s) from None
                at = time.monotonic()
                if not line:
                    return
                if len(line) > MAX_LINE_BYTES:
                    raise TunehostError(f"{self._where(path)}: a streamed line longer than {MAX_LINE_BYTES >> 10} "
                                        "KiB; not a llama-server")
                text = line.strip()
                if not text or text.startswith(b":"):
                    continue
                field, _, value = text.partition(b":")
                value = value.strip()
                if field == b"error":
                    raise TunehostError(f"{self._where(path)}: the server reported an error: "
                                        f"{_error_text(_parse_json(value, self._where(path), strict=False), value)}")
                if field != b"data":
                    continue
                if value == b"[DONE]":
                    return
                data = _parse_json(value, self._where(path))
                if not isinstance(data, dict):
                    raise TunehostError(f"{self._where(path)}: a streamed event is not a JSON object; "
                                        "not a llama-server")
                if "error" in data:
                    raise TunehostError(f"{self._where(path)}: the server reported an error: "
                                        f"{_error_text(data, value)}")
                yield StreamEvent(at, data)
        finally:
            conn.close()


class ServerGone(TunehostError):
    """The server closed a connection mid-request (it crashed, was killed, or restarted)."""


def _parse_json(raw: bytes, where: str, *, strict: bool = True) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        if not strict:
            return None
        raise TunehostError(f"{where}: the answer is not JSON ({one_line(raw[:60].decode('utf-8', 'replace'))!r}…); "
                            "not a llama-server") from None


def _error_text(data: Any, raw: bytes) -> str:
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):
            return one_line(err.get("message") or err, 200)
        if err is not None:
            return one_line(err, 200)
    return one_line(raw[:200].decode("utf-8", "replace"), 200) or "(empty)"
