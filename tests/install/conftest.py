"""One clean virtual environment for the session, made the way a user installs: `pip install <repo>` (no -e) plus
the example check package. Skipped, with the reason, when pip cannot reach a package index."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = "examples/tunehost-check-example"
# what pip prints when no index can be reached (DNS, refused connection, proxy, offline)
NO_INDEX = re.compile(r"NewConnectionError|Failed to establish a new connection|Temporary failure in name resolution|"
                      r"Name or service not known|Network is unreachable|ProxyError|Could not find a version that "
                      r"satisfies the requirement|No matching distribution found|ConnectTimeout|ReadTimeout")


def _copy_checkout(dest: Path) -> Path:
    """The files git tracks or would track (no .venv, build/ or egg-info), so the install builds what a clone has."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


@pytest.fixture(scope="session")
def venv_bin(tmp_path_factory) -> Path:
    """bin/ of a new venv holding tunehost and the example plugin (with its test extra), installed from copies."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to copy what a clone has")
    base = tmp_path_factory.mktemp("install")
    src = _copy_checkout(base / "src")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    result = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                             "--disable-pip-version-check", str(src), f"{src / EXAMPLE}[test]"],
                            capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        output = result.stdout + result.stderr
        if NO_INDEX.search(output):
            pytest.skip(f"pip cannot reach a package index: {output.strip().splitlines()[-1]}")
        pytest.fail(f"pip install failed:\n{output}")
    return venv / "bin"


@pytest.fixture(scope="session")
def example_src(venv_bin) -> Path:
    """The example's source as it was installed (its tests run from here)."""
    return venv_bin.parent.parent / "src" / EXAMPLE


def run_installed(venv_bin: Path, *args: str, cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    """The venv's `tunehost ARGS`, run outside the repo with a bare environment: only what pip installed imports."""
    env = {"PATH": f"{venv_bin}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([str(venv_bin / "tunehost"), *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=300)
