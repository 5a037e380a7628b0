"""cpu-hogs, headless and llama-exposure: ProcessFacts from the processes/activity/listeners samples.

Live tests start REAL processes (a python busy loop; python sockets in a process whose executable is named
llama-server) detached from pytest (so they are not tunehost's own children) and sample them with
open_host().sample(...). Snapshot tests use the composite snapshots (tests/data/snapshots/*: process lists and
sockets hand-written in the samples' real format, pids matching the GPU group's nvidia-smi process list) and
single-purpose snapshots built here.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tunehost.check import Severity
from tunehost.facts import HostFacts
from tunehost.facts.processes import ProcessFacts, is_loopback
from tunehost.host import open_host
from tunehost.host.redact import REDACTED
from tunehost.host.samples import RawProcess, candidate_row
from tunehost.checks.cpu_hogs import CpuHogsCheck
from tunehost.checks.headless import HeadlessCheck
from tunehost.checks.llama_exposure import LlamaExposureCheck

SNAPS = Path(__file__).parents[1] / "data" / "snapshots"


def findings(check, snap):
    return list(check().run(HostFacts(open_host(snap))))


def sev(items):
    return [f.severity.value for f in items]


def spawn_detached(argv, tmp_path):
    """Start argv as a grandchild (its parent exits), so the samplers do not count it as tunehost's own child."""
    out = subprocess.run(["sh", "-c", '"$0" "$@" >/dev/null 2>&1 </dev/null & echo $!', *argv],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def stop(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def wait_for(path: Path, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.exists(), f"helper process did not start ({path})"


# ---- live ----


LISTEN = """
import socket, sys
host, port = sys.argv[sys.argv.index('--host') + 1], int(sys.argv[sys.argv.index('--port') + 1])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((host, port)); s.listen(1)
open(sys.argv[sys.argv.index('--ready') + 1], 'w').close()
import time
time.sleep(120)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- cpu-hogs ----


# ---- headless ----


# ---- llama-exposure ----


def test_recorded_options_never_keep_the_key():
    row = candidate_row(RawProcess(1, "llama-server", ("llama-server", "--host", "0.0.0.0", "--api-key",
                                                       "sk-secret-123", "--port=9000")))
    assert row["options"] == {"--host": "0.0.0.0", "--port": "9000", "--api-key": REDACTED}
    assert "sk-secret-123" not in repr(row)


@pytest.mark.parametrize("address, loop", [("127.0.0.1", True), ("::1", True), ("::ffff:127.0.0.1", True),
                                           ("localhost", True), ("0.0.0.0", False), ("::", False),
                                           ("192.168.1.5", False), ("", False), ("garbage", False)])
def test_is_loopback(address, loop):
    assert is_loopback(address) is loop
