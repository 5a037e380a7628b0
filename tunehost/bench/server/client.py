"""A bounded HTTP client for llama-server: the standard library only (http.client), every read capped.

Only the address the user named (``--server URL``) or the loopback port tunehost opened (``--serve``) is ever
contacted: no redirect is followed, no other host is derived from an answer. Every failure is one
:class:`~tunehost.errors.TunehostError` line that says what the target did:

- nothing listens on the port -> "nothing listens";
- it accepts and never answers, or trickles -> "no complete answer within N s": ``timeout_s`` is one wall-clock
  deadline for the whole exchange (connect, request, headers, body, every streamed line), enforced by a watchdog
  that shuts the socket down at the deadline (:class:`Deadline`), so a server sending one byte a second in its
  headers or inside one streamed line is cut off at the deadline, not when it stops; every answer has a total-bytes
  cap (a body, and a whole stream);
- it closes the connection mid-request -> "closed the connection" (the caller says why when it owns the process);
- 401 / 403 -> the API key;
- an answer that is not JSON, too large, or not what llama-server sends -> "not a llama-server".

The API key is read from a file by the caller (the bounded reader: a FIFO is refused, not waited on), sent as
``Authorization: Bearer`` and never printed or stored: every answer is scrubbed of it before it is parsed, and
every message this client builds goes through :func:`redact` (a server that echoes the key in an error body, a
password in a ``--server`` URL).
"""

from __future__ import annotations

import base64
import functools
import http.client
import json
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tunehost.errors import TunehostError
from tunehost.printable import one_line

MAX_RESPONSE_BYTES = 32 * 1024 * 1024  # /props carries the chat template; /tokenize of 128k tokens is ~1 MB
MAX_STREAM_BYTES = 64 * 1024 * 1024  # a whole streamed completion: ~150 bytes per token, 400k tokens
MAX_LINE_BYTES = 1024 * 1024  # one SSE line: one token's JSON (with timings) is well under 4 kB
MAX_KEY_BYTES = 4096
PROBE_TIMEOUT_S = 10.0  # /health and /props answer at once on a live llama-server (even while it generates)
REDACTED = "[redacted]"
MIN_KEY_FRAGMENT = 8  # characters of the key, in any case, that are redacted wherever they stand (a key cut short)
FRAGMENT_SCAN_CHARS = 64 * 1024  # of one text scanned for fragments (what is shown is its start; a 32 MiB chat
# template is searched for the key's whole spellings only: the scan costs ~0.4 s per MiB)
_USERINFO = re.compile(r"(?<=//)[^/?#]*@")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:(//)?")
_QUERY = re.compile(r"[?#].*", re.DOTALL)
_NOT_A_PORT = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://(?:\[[^\]/]*\]|[^/:\[\]]*)):(?![0-9]*(?:/|$))([^/]*)")


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every secret replaced by [redacted]: each of ``secrets`` (the API key; also its JSON-,
    percent- and base64-escaped spellings, and any MIN_KEY_FRAGMENT characters of it in any letter case: a
    server that echoes the key cut short, upper-cased or with "..." in its middle) and the user/password part of
    any URL in it (``http://user:pw@host``). The one function every message of the server bench's HTTP client
    goes through, before it is shortened (a key cut in half by a length limit would leak its first half)."""
    text = _USERINFO.sub(REDACTED + "@", text)
    for secret in secrets:
        if not secret:
            continue
        for spelling in _spellings(secret):  # exact: any letter case is the fragment scan's
            text = text.replace(spelling, REDACTED)
        text = _redact_fragments(text, secret)
    return text


@functools.lru_cache(maxsize=8)
def _spellings(secret: str) -> tuple[str, ...]:
    """Every escaped spelling of ``secret``, longest first."""
    b64 = {base64.b64encode(s.encode()).decode().rstrip("=") for s in (secret, f"Bearer {secret}")}
    spellings = {secret, json.dumps(secret)[1:-1], urllib.parse.quote(secret, safe=""), *b64}
    return tuple(sorted(spellings, key=len, reverse=True))


@functools.lru_cache(maxsize=8)
def _fragments(secret: str) -> tuple[int, frozenset[str]]:
    low = secret.lower()
    size = min(len(low), MIN_KEY_FRAGMENT)
    return size, frozenset(low[i:i + size] for i in range(len(low) - size + 1))


def _mentions(raw: bytes, secret: str) -> bool:
    """Whether an answer holds a spelling or a fragment of ``secret`` at all (the walk of every string in it is
    left out for the usual answer: a streamed token's event costs ~5 us instead of ~15)."""
    size, windows = _fragments(secret)
    low = raw.lower().decode("utf-8", "replace")
    return any(w in low for w in windows) or any(s in raw.decode("utf-8", "replace") for s in _spellings(secret))


def _redact_fragments(text: str, secret: str) -> str:
    """``text`` with every run of MIN_KEY_FRAGMENT (or, for a shorter key, all) characters that also stand in
    ``secret`` (letter case ignored) replaced by one [redacted], in its first FRAGMENT_SCAN_CHARS characters."""
    if len(text) > FRAGMENT_SCAN_CHARS:
        return _redact_fragments(text[:FRAGMENT_SCAN_CHARS], secret) + text[FRAGMENT_SCAN_CHARS:]
    size, windows = _fragments(secret)
    low = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)  # index for index with `text`
    marked = [False] * len(text)
    for i in range(len(text) - size + 1):
        if low[i:i + size] in windows:
            marked[i:i + size] = [True] * size
    if not any(marked):
        return text
    out: list[str] = []
    for i, ch in enumerate(text):
        if not marked[i]:
            out.append(ch)
        elif i == 0 or not marked[i - 1]:
            out.append(REDACTED)
    return "".join(out)


def _shown_url(url: str) -> str:
    """A --server URL as an error may show it: one line, everything between the scheme and its last "@" (a user
    and password, even one holding a "/" or with no scheme) redacted; so are a query or fragment (``?key=...``)
    and a port that is no number (``http://user:PASSWORD/``, the password of a URL that lost its "@host")."""
    at = url.rfind("@")
    if at >= 0:
        scheme = _SCHEME.match(url)
        start = scheme.end() if scheme else 0
        url = url[:start] + REDACTED + url[at:] if at >= start else url
    url = _QUERY.sub(lambda m: m.group(0)[0] + REDACTED, url)
    url = _NOT_A_PORT.sub(lambda m: m.group(1) + ":" + REDACTED, url)
    return one_line(redact(url), 300)


class Deadline:
    """One wall-clock deadline for a whole HTTP exchange: connecting, sending, the status line and headers, the body
    or every line of a stream. A watchdog timer shuts the socket down when it passes, so a read blocked on a server
    that trickles one byte a second returns at the deadline (http.client's own timeout is per read, and a trickle
    resets it forever). ``expired`` tells the reader that the end it saw is the deadline's."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.at = time.monotonic() + max(0.0, seconds)
        self.expired = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, seconds), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def left(self) -> float:
        """Seconds until the deadline (at least a millisecond: a socket timeout of 0 would mean non-blocking)."""
        return max(0.001, self.at - time.monotonic())

    def watch(self, sock: socket.socket | None) -> None:
        with self._lock:
            self._sock = sock
            expired = self.expired
        if expired:
            _shutdown(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sock = self._sock
        _shutdown(sock)

    def cancel(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._sock = None


def _shutdown(sock: socket.socket | None) -> None:
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except (OSError, ValueError):
        pass


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
    text = _shown_url(url)
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:  # its text quotes parts of the URL ("Port could not be cast … 'PASSWORD'")
        why = "the port is not a number from 1 to 65535" if "port" in str(exc).lower() else "malformed"
        raise TunehostError(f"--server {text}: not a URL ({why})") from None
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
    """The key from the file's first line, read through tunehost's bounded reader (a regular file only: a FIFO or
    a device is one error line, never a wait; at most MAX_KEY_BYTES); the key itself never appears in an error."""
    from tunehost.inputs import read_input_file

    try:
        raw = read_input_file(path, "an API key file", limit=MAX_KEY_BYTES)
    except TunehostError as exc:
        raise TunehostError(f"--api-key-file: {exc}") from None
    if len(raw) > MAX_KEY_BYTES:
        raise TunehostError(f"--api-key-file {one_line(path, 200)}: larger than {MAX_KEY_BYTES} bytes; not an API key")
    try:
        lines = raw.decode("utf-8").strip().splitlines()
    except UnicodeDecodeError:
        raise TunehostError(f"--api-key-file {one_line(path, 200)}: not UTF-8 text") from None
    key = lines[0].strip() if lines else ""
    # printable ASCII: http.client would send "é" as latin-1, not the UTF-8 key the file holds, and refuse U+202E
    if not key or any(not 33 <= ord(c) <= 126 for c in key):
        raise TunehostError(f"--api-key-file {one_line(path, 200)}: the first line holds no key (one word, "
                            "printable ASCII, no spaces)")
    return key


@dataclass(frozen=True)
class StreamEvent:
    """One SSE ``data:`` object and when the client read it (time.monotonic())."""

    at: float
    data: Mapping[str, Any]


class ServerClient:
    """JSON requests and streaming completions against one target, each on a fresh connection (a client thread
    owns its own client; http.client connections are not shared between threads). Each request is one
    :class:`Deadline` (``timeout_s``, or the caller's shorter one) and a total-bytes cap; every error it raises
    went through :func:`redact`."""

    def __init__(self, target: Target, *, timeout_s: float, api_key: str | None = None):
        self.target = target
        self.timeout_s = timeout_s
        self._api_key = api_key

    def __repr__(self) -> str:  # never the key
        return f"ServerClient({self.target.url!r}, timeout_s={self.timeout_s})"

    # ------------------------------------------------------------ plumbing

    def _fail(self, message: str, cls: type[TunehostError] = TunehostError) -> TunehostError:
        """The one way this client words an error: the key and any URL password redacted, one line."""
        return cls(one_line(redact(message, (self._api_key,)), 600))

    def _scrub(self, raw: bytes) -> bytes:
        """An answer with the API key taken out before anything reads it (a server echoing it back)."""
        if self._api_key and self._api_key.encode() in raw:
            raw = raw.replace(self._api_key.encode(), REDACTED.encode())
        return raw

    def _headers(self, body: bool) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream", "User-Agent": "tunehost-bench"}
        if body:
            headers["Content-Type"] = "application/json"
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _where(self, path: str) -> str:
        return f"{self.target.url}{path}"

    def _late(self, path: str, deadline: Deadline) -> TunehostError:
        return self._fail(f"{self._where(path)}: no complete answer within {deadline.seconds:.3g} s (one "
                          "deadline for the whole request: connect, headers, body, stream; --timeout)")

    def _open(self, method: str, path: str, body: Mapping[str, Any] | None,
              deadline: Deadline) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        cls = http.client.HTTPSConnection if self.target.scheme == "https" else http.client.HTTPConnection
        conn = cls(self.target.host, self.target.port, timeout=deadline.left())

        def connected(*args: Any, **kwargs: Any) -> socket.socket:  # watched from the TCP connect on: a TLS
            sock = socket.create_connection(*args, **kwargs)  # handshake trickled byte by byte ends at the deadline
            deadline.watch(sock)
            return sock

        conn._create_connection = connected  # type: ignore[attr-defined]
        payload = None if body is None else json.dumps(body).encode()
        try:
            conn.connect()
            deadline.watch(conn.sock)  # the TLS socket that wraps it, for the rest of the exchange
            conn.request(method, self.target.prefix + path, body=payload, headers=self._headers(body is not None))
            response = conn.getresponse()
        except BaseException as exc:
            conn.close()
            raise self._transport_error(path, exc, deadline) from None
        if response.status in (401, 403):
            _close(conn, response)
            raise self._fail(f"{self._where(path)} answered {response.status}: "
                             + ("the API key is wrong" if self._api_key else "it wants an API key")
                             + " (give it with --api-key-file)")
        return conn, response

    def _transport_error(self, path: str, exc: BaseException, deadline: Deadline) -> BaseException:
        if isinstance(exc, (KeyboardInterrupt, SystemExit, TunehostError)):
            return exc
        where = self._where(path)
        if deadline.expired or isinstance(exc, (socket.timeout, TimeoutError)):
            return self._late(path, deadline)
        if isinstance(exc, ConnectionRefusedError):
            return self._fail(f"{self.target.url}: nothing listens there (connection refused)")
        if isinstance(exc, (http.client.RemoteDisconnected, http.client.IncompleteRead, ConnectionResetError,
                            BrokenPipeError, ConnectionAbortedError)):
            return self._fail(f"{where}: the server closed the connection mid-request", ServerGone)
        if isinstance(exc, socket.gaierror):
            return self._fail(f"{self.target.url}: cannot resolve {self.target.host}")
        if isinstance(exc, (http.client.HTTPException, OSError, ValueError)):
            return self._fail(f"{where}: {exc or type(exc).__name__}")
        return exc

    def _read_body(self, response: http.client.HTTPResponse, path: str, deadline: Deadline,
                   max_bytes: int = MAX_RESPONSE_BYTES) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                chunk = response.read1(65536) if hasattr(response, "read1") else response.read(65536)
            except BaseException as exc:
                raise self._transport_error(path, exc, deadline) from None
            if deadline.expired:
                raise self._late(path, deadline)
            if not chunk:
                return self._scrub(b"".join(chunks))
            size += len(chunk)
            if size > max_bytes:
                raise self._fail(f"{self._where(path)}: answer larger than {_size(max_bytes)} (what a "
                                 "llama-server sends for this request); not a llama-server")
            chunks.append(chunk)

    def _status_error(self, path: str, status: int, data: Any, raw: bytes) -> TunehostError:
        return self._fail(f"{self._where(path)} answered {status}: {_error_text(data, raw)}")

    def _parse(self, raw: bytes, path: str, *, strict: bool = True) -> Any:
        """The JSON of an answer, with the API key out of every string in it (a key spelled with JSON escapes, cut
        short or upper-cased passes the byte scrub: it must not reach a table, a --save file or the store through
        /props)."""
        try:
            data = json.loads(raw)
            key = self._api_key
            return _without(data, key) if key and (b"\\" in raw or _mentions(raw, key)) else data
        except (ValueError, RecursionError):
            if not strict:
                return None
            shown = raw[:60].decode("utf-8", "replace")
            raise self._fail(f"{self._where(path)}: the answer is not JSON ({shown!r}…); not a llama-server") \
                from None

    # ------------------------------------------------------------ requests

    def request_json(self, method: str, path: str, body: Mapping[str, Any] | None = None, *,
                     timeout_s: float | None = None, ok: tuple[int, ...] = (200,),
                     max_bytes: int = MAX_RESPONSE_BYTES) -> tuple[int, Any]:
        """(status, parsed JSON) of one request within one deadline (``timeout_s``, default the client's) and at
        most ``max_bytes`` (the caller's smaller cap when it knows the answer's size, e.g. /tokenize of N words);
        statuses outside ``ok`` (and 401/403) are errors."""
        deadline = Deadline(self.timeout_s if timeout_s is None else timeout_s)
        try:
            conn, response = self._open(method, path, body, deadline)
            try:
                raw = self._read_body(response, path, deadline, min(max_bytes, MAX_RESPONSE_BYTES))
            finally:
                _close(conn, response)
        finally:
            deadline.cancel()
        data = self._parse(raw, path)
        if response.status not in ok:
            raise self._status_error(path, response.status, data, raw)
        return response.status, data

    def stream(self, path: str, body: Mapping[str, Any]) -> Iterator[StreamEvent]:
        """The ``data:`` objects of a streamed completion as they arrive; the last carries ``timings``. The whole
        stream is one deadline (the client's timeout) and at most MAX_STREAM_BYTES."""
        deadline = Deadline(self.timeout_s)
        conn = response = None
        try:
            conn, response = self._open("POST", path, body, deadline)
            if response.status != 200:
                raw = self._read_body(response, path, deadline)
                raise self._status_error(path, response.status, self._parse(raw, path, strict=False), raw)
            total = 0
            while True:
                try:
                    line = response.readline(MAX_LINE_BYTES + 1)
                except BaseException as exc:
                    raise self._transport_error(path, exc, deadline) from None
                at = time.monotonic()
                if deadline.expired:
                    raise self._late(path, deadline)
                if not line:
                    return
                total += len(line)
                if len(line) > MAX_LINE_BYTES:
                    raise self._fail(f"{self._where(path)}: a streamed line longer than {MAX_LINE_BYTES >> 10} "
                                     "KiB; not a llama-server")
                if total > MAX_STREAM_BYTES:
                    raise self._fail(f"{self._where(path)}: a streamed answer larger than {MAX_STREAM_BYTES >> 20} "
                                     "MiB; not a llama-server")
                text = self._scrub(line.strip())
                if not text or text.startswith(b":"):
                    continue
                field, _, value = text.partition(b":")
                value = value.strip()
                if field == b"error":
                    raise self._fail(f"{self._where(path)}: the server reported an error: "
                                     f"{_error_text(self._parse(value, path, strict=False), value)}")
                if field != b"data":
                    continue
                if value == b"[DONE]":
                    return
                data = self._parse(value, path)
                if not isinstance(data, dict):
                    raise self._fail(f"{self._where(path)}: a streamed event is not a JSON object; "
                                     "not a llama-server")
                if "error" in data:
                    raise self._fail(f"{self._where(path)}: the server reported an error: "
                                     f"{_error_text(data, value)}")
                yield StreamEvent(at, data)
        finally:
            deadline.cancel()
            if conn is not None:
                _close(conn, response)


def _close(conn: http.client.HTTPConnection, response: http.client.HTTPResponse | None) -> None:
    """Close an answer and its connection here, never leave the answer to the garbage collector. http.client's
    connection closes only a keep-alive answer; a "Connection: close" one (every stream) would be closed by io's
    finalizer when the last reference goes, and its close() is Python code: a Ctrl-C whose handler runs there
    raises KeyboardInterrupt inside the finalizer, which CPython drops without a word (the bench then ran on to its
    --budget). Closed here, the KeyboardInterrupt propagates like any other."""
    try:
        if response is not None:
            response.close()
    finally:
        conn.close()


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1 << 10 else f"{n} bytes"


class ServerGone(TunehostError):
    """The server closed a connection mid-request (it crashed, was killed, or restarted)."""


def _without(data: Any, secret: str) -> Any:
    """``data`` (parsed JSON) with ``secret`` redacted (:func:`redact`) from every string, keys included."""
    if isinstance(data, str):  # shorter than a fragment (a token's text): no spelling of the key fits in it
        return data if len(data) < min(len(secret), MIN_KEY_FRAGMENT) else redact(data, (secret,))
    if isinstance(data, list):
        return [_without(v, secret) for v in data]
    if isinstance(data, dict):
        return {_without(k, secret): _without(v, secret) for k, v in data.items()}
    return data


def _error_text(data: Any, raw: bytes) -> str:
    """What the server said went wrong, unshortened (the caller redacts, then shortens the whole message)."""
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):
            return str(err.get("message") or err)[:2000]
        if err is not None:
            return str(err)[:2000]
    return raw[:2000].decode("utf-8", "replace") or "(empty)"
