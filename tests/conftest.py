"""Shared test helpers: snapshot directories built in tmp_path, the real Typer app, corpus files."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Mapping

import pytest

from tunehost.host.commands import command_file_name

try:  # the fuzz suite's hypothesis profiles, registered before pytest configures so --hypothesis-profile finds them
    from tests.fuzz.profiles import register_profiles
except ImportError:  # hypothesis is not installed: tests/fuzz is skipped
    pass
else:
    register_profiles()

DATA = Path(__file__).parent / "data"
CORPUS = DATA / "corpus"  # a copy of ../shared/corpus (real outputs; SOURCES.md says what each shows)
SNAPSHOTS = DATA / "snapshots"  # real captured machines and corpus-built snapshots


def corpus(relpath: str) -> str:
    """The text of a real corpus file, e.g. corpus("dmidecode/ddr4-3600-kit-ryzen3600-xmp-off-2133.txt")."""
    return (CORPUS / relpath).read_text()


def write_snapshot(root: Path, *, fs: Mapping[str, str | bytes] | None = None,
                   cmd: Mapping[str, str | tuple] | None = None, samples: Mapping[str, Any] | None = None,
                   manifest: Mapping[str, Any] | None = None) -> Path:
    """A format-1 snapshot directory. cmd values: stdout, or (stdout, rc) or (stdout, rc, stderr)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "manifest.json").write_text(json.dumps(dict(manifest or {"format": 1})))
    for path, content in (fs or {}).items():
        target = root / "fs" / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    (root / "cmd").mkdir(exist_ok=True)
    for line, value in (cmd or {}).items():
        stdout, rc, stderr = (value, 0, "") if isinstance(value, str) else (tuple(value) + (0, ""))[:3]
        name = command_file_name(line.split(" "))
        (root / "cmd" / name).write_text(stdout)
        if rc:
            (root / "cmd" / f"{name}.rc").write_text(str(rc))
        if stderr:
            (root / "cmd" / f"{name}.stderr").write_text(stderr)
    if samples:
        (root / "samples").mkdir(exist_ok=True)
        for name, data in samples.items():
            (root / "samples" / f"{name}.json").write_text(json.dumps(data))
    return root


@pytest.fixture
def make_snapshot(tmp_path):
    """make_snapshot(fs={...}, cmd={...}, samples={...}) -> a snapshot directory in tmp_path."""
    counter = iter(range(10_000))

    def make(**kwargs) -> Path:
        return write_snapshot(tmp_path / f"snap{next(counter)}", **kwargs)

    return make


@pytest.fixture
def cli():
    """Invoke the real Typer app: cli("doctor", "--json") -> Result (exit_code, stdout, stderr)."""
    from typer.testing import CliRunner

    from tunehost.cli import app

    runner = CliRunner()

    def invoke(*args: str, input: str | None = None, env: Mapping[str, str] | None = None):
        return runner.invoke(app, list(args), input=input, env=dict(env or {}), terminal_width=120)

    return invoke


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path, monkeypatch):
    """No test writes tunehost state or caches outside tmp_path unless it asks to."""
    monkeypatch.setenv("TUNEHOST_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "120")


# ---------------------------------------------------------------- the real llama-bench and the test model
# Missing pieces skip locally but FAIL when $CI is set: CI runs ./scripts/test, which builds them, and must never
# pass by skipping.

SCRIPTS = Path(__file__).parents[1] / "scripts"


def write_tiny_gguf(path: Path) -> Path:
    """A real (tiny, one-layer dense llama) GGUF for tests that need a valid model file but never run it."""
    from tests.advise.conftest import dense_tensors, write_gguf

    return write_gguf(path, "llama", dense_tensors(1), n_layer=1)


def load_script(name: str) -> ModuleType:
    """A module of scripts/ (build_llama_cpp, make_test_model) loaded by path: scripts/ is no package."""
    spec = importlib.util.spec_from_file_location(f"tunehost_scripts_{name}", SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: integration tests must run, not skip)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def llama_bench() -> Path:
    from tunehost.bench.llama_bench import find_llama_bench

    configured = os.environ.get("TUNEHOST_LLAMA_BIN_DIR")
    if configured:
        # An explicitly configured location that is wrong is an error, never a skip.
        return find_llama_bench(configured)
    bin_dir = load_script("build_llama_cpp").cached_bin_dir()
    if bin_dir is None:
        _unavailable("no cached llama-bench build; run `python scripts/build_llama_cpp.py` or set TUNEHOST_LLAMA_BIN_DIR")
    return find_llama_bench(bin_dir)


@pytest.fixture(scope="session")
def llama_server(llama_bench: Path) -> Path:
    """The llama-server built beside llama-bench (scripts/build_llama_cpp.py builds both)."""
    server = llama_bench.with_name("llama-server")
    if not (server.is_file() and os.access(server, os.X_OK)):
        _unavailable(f"no llama-server beside {llama_bench}; rebuild with scripts/build_llama_cpp.py")
    return server


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    configured = os.environ.get("TUNEHOST_TEST_MODEL")
    if configured:
        path = Path(configured)
        assert path.is_file(), f"TUNEHOST_TEST_MODEL={configured} does not exist"
        return path
    try:
        return load_script("make_test_model").ensure_model("tiny")
    except (OSError, ValueError, ImportError) as error:
        _unavailable(f"cannot write the tiny test model: {error}")
        raise
