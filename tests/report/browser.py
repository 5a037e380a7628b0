"""Headless Chromium driven over the Chrome DevTools protocol (websocket-client): load a page from a file, record
every network request, console message and uncaught exception, ask the DOM, take screenshots and a PDF.

Used by tests/report/test_report_browser.py and scripts/bench_report.py (the page's render time)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_LISTENING = re.compile(r"DevTools listening on (ws://\S+)")


def find_browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, binary: str, *, timeout: float = 60.0):
        import websocket  # websocket-client

        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="tunehost-chromium-")
        argv = [binary, "--headless=new", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
                "--remote-debugging-port=0", "--remote-allow-origins=*", f"--user-data-dir={self.profile}",
                "about:blank"]
        if os.geteuid() == 0:
            argv.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        browser_ws = self._listening()
        port = int(browser_ws.split(":")[2].split("/")[0])
        page_ws = self._page_socket(port)
        self.ws = websocket.create_connection(page_ws, timeout=timeout, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.call(f"{domain}.enable")

    def _listening(self) -> str:
        deadline = time.monotonic() + self.timeout
        lines = []
        assert self.proc.stderr is not None
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                if self.proc.poll() is not None:
                    break
                continue
            lines.append(line)
            found = _LISTENING.search(line)
            if found:
                return found.group(1)
        self.close()
        raise RuntimeError("Chromium did not start: " + "".join(lines[-10:]))

    def _page_socket(self, port: int) -> str:
        import urllib.request

        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
                targets = json.loads(answer.read())
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
            time.sleep(0.1)
        raise RuntimeError("Chromium opened no page")

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            if getattr(self, "ws", None) is not None:
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(10)
            shutil.rmtree(self.profile, ignore_errors=True)

    # ------------------------------------------------------------ the protocol

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        mine = self.next_id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == mine:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_for(self, method: str, timeout: float | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + (timeout or self.timeout)
        seen = len(self.events)
        for event in self.events:
            if event["method"] == method:
                return event
        while time.monotonic() < deadline:
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            message = json.loads(self.ws.recv())
            if "method" in message:
                self.events.append(message)
                if message["method"] == method:
                    return message
        raise TimeoutError(f"no {method} within the timeout ({len(self.events) - seen} other events)")

    def evaluate(self, expression: str) -> Any:
        """A JavaScript expression's value (JSON-able), or the exception it threw as RuntimeError."""
        answer = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in answer:
            raise RuntimeError(f"{expression[:60]}: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    # ------------------------------------------------------------ what the tests use

    def viewport(self, width: int, height: int, *, scale: float = 1, mobile: bool = False) -> None:
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=scale,
                  mobile=mobile)

    def load(self, path: Path) -> float:
        """Navigate to the file and wait for its load event (the inline scripts have run): seconds taken."""
        self.events.clear()
        start = time.monotonic()
        self.call("Page.navigate", url=path.absolute().as_uri())
        self.wait_for("Page.loadEventFired")
        return time.monotonic() - start

    def settle(self, seconds: float = 0.3) -> None:
        """Let timers run (the charts' resize), collecting events."""
        self.evaluate(f"new Promise(r => setTimeout(r, {int(seconds * 1000)}))")

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions, the browser's own error log (a CSP refusal, a load
        that failed), and any dialog a script opened (alert)."""
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                out.append(f"console.{p['type']}: " + " ".join(str(a.get("value", a.get("description")))
                                                                 for a in p.get("args", [])))
            elif e["method"] == "Runtime.exceptionThrown":
                out.append(f"exception: {p.get('exceptionDetails', {}).get('text')}")
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
                out.append(f"log: {p['entry'].get('text')}")
            elif e["method"] == "Page.javascriptDialogOpening":
                out.append(f"dialog: {p.get('message')}")
        return out

    def screenshot(self, target: Path, *, full_page: bool = True) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 12000),
                                "scale": 1})
        data = self.call("Page.captureScreenshot", **params)["data"]
        target.write_bytes(base64.b64decode(data))
        return target

    def pdf(self, target: Path) -> Path:
        data = self.call("Page.printToPDF", printBackground=True, preferCSSPageSize=False)["data"]
        target.write_bytes(base64.b64decode(data))
        return target
