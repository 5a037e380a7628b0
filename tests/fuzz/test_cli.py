"""The CLI's argument handling takes any argv: random options and hostile values for doctor, advise, bench,
apply --dry-run, verify, status and snapshot end in their documented exit status — and exit 1 is one line on
stderr — never a traceback, never a hang.

Nothing here can change the host: tuning commands act on a fake root (TUNEHOST_ROOT, tests/apply/fakehost.py)
and always get --dry-run, state lives in tmp_path, doctor and advise read a snapshot (never the live machine's
probes), bench is never given a readable model (it would run llama-bench), and snapshot writes into tmp_path."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.advise.conftest import dense_tensors, write_gguf
from tests.conftest import SNAPSHOTS
from tests.fuzz.profiles import budget, time_limit
from tests.fuzz.strategies import HOSTILE_NUMBERS, HOSTILE_TEXT
from tests.apply.fakehost import build_root

# command -> the exit statuses its help documents
EXITS = {"doctor": {0, 1, 2}, "advise": {0, 1, 2}, "bench": {0, 1, 2}, "apply": {0, 1}, "verify": {0, 1, 2},
         "status": {0, 1}, "snapshot": {0, 1}, "profiles": {0, 1}, "recommend": {0, 1}}
SNAPSHOT = str(SNAPSHOTS / "ci-vm")


@functools.cache
def _files() -> dict[str, str]:
    """Paths the values are drawn from: a tiny valid model, text, a directory, a missing file, an empty file."""
    base = Path(tempfile.mkdtemp(prefix="tunehost-fuzz-cli-"))
    (base / "text.gguf").write_text("not a model\n")
    (base / "empty.gguf").write_bytes(b"")
    (base / "dir.gguf").mkdir()
    (base / "snapshot-without-manifest").mkdir()
    return {"model": str(write_gguf(base / "tiny.gguf", "llama", dense_tensors(1), n_layer=1)),
            "text": str(base / "text.gguf"), "empty": str(base / "empty.gguf"), "dir": str(base / "dir.gguf"),
            "missing": str(base / "missing.gguf"), "not-a-snapshot": str(base / "snapshot-without-manifest"),
            "base": str(base)}


def _values() -> st.SearchStrategy[str]:
    files = _files()
    # no NUL: execve cannot pass one in argv, so only an in-process runner could ever see it
    return st.one_of(st.sampled_from(HOSTILE_NUMBERS), st.sampled_from([t for t in HOSTILE_TEXT if "\x00" not in t]),
                     st.text(st.characters(blacklist_characters="\x00"), max_size=10),
                     st.sampled_from([files["text"], files["empty"], files["dir"], files["missing"], "-", "--",
                                      "4096", "1", "0", "10" + "0" * 30, "-5", "nan", "0-3", "0-100000000", "json",
                                      "systemd", "shell", "human", "ollama", "mtp", "draft", "0.0.0.0", "::", "swap", "thp"]))


OPTIONS = {
    "doctor": ["--json", "--snapshot", "-s", "--check", "-c", "--skip", "--list-checks", "--strict", "-q", "-v",
               "--quick"],
    "advise": ["--model", "-m", "--ctx", "--parallel", "--mmproj", "--draft", "--spec", "--format", "-f",
               "--snapshot", "--llama-server", "--cpus", "--host", "--no-probe", "--models-dir", "--models-max",
               "--reserve-vram", "--preset-file", "--spec-draft-n-max", "--draft-max", "--draft-min", "--user",
               "--system", "--service-user", "--force"],  # never --write: a drawn value would be a directory here
    "bench": ["--baseline", "--candidate", "-p", "-n", "-d", "-r", "--budget", "--json", "--llama-bench", "--save"],
    "apply": ["-p", "--profile", "--persist", "--power-daemon", "-y", "--yes", "throughput", "benchmark",
              "throughput-quiet", "ppd", "tuned-ppd"],
    "verify": [],
    "status": ["--json"],
    "profiles": [],
    "recommend": [],
}


@st.composite
def argv(draw, command: str) -> list[str]:
    tokens = draw(st.lists(st.sampled_from(OPTIONS[command] + ["--help", "-h", "--bogus"]) | _values(), max_size=7))
    files = _files()
    if command in ("doctor", "advise") and not {"--snapshot", "-s"} & set(tokens):
        tokens += ["--snapshot", SNAPSHOT]  # never the live host's probes
    if command == "advise" and draw(st.booleans()):
        tokens = ["--model", files["model"], *tokens]
    if command == "bench":
        # never a readable model: bench would run llama-bench
        tokens = ["--model", draw(st.sampled_from([files["text"], files["empty"], files["dir"], files["missing"]])),
                  *tokens]
    if command == "apply":
        tokens = ["--dry-run", *tokens]
    return [command, *tokens]


def _assert_documented(command: str, args: list[str], result: Any) -> None:
    exc = result.exception
    assert exc is None or isinstance(exc, SystemExit), f"{args}: traceback {exc!r}"
    assert "Traceback" not in result.output, args
    assert result.exit_code in EXITS[command], (args, result.exit_code, result.stderr[-500:])
    if result.exit_code == 1:
        lines = result.stderr.strip().split("\n")  # what a terminal shows as lines
        assert len(lines) == 1 and lines[0].startswith("tunehost"), (args, result.stderr[-500:])
        assert "\x1b" not in result.stderr, args


@pytest.fixture
def tuning_env(tmp_path: Path) -> dict[str, str]:
    """A fake writable root (tuning acts on it, never on this machine) and a state dir in tmp_path."""
    root = build_root(tmp_path / "root")
    return {"TUNEHOST_ROOT": str(root), "TUNEHOST_STATE_DIR": str(tmp_path / "state")}


@pytest.mark.parametrize("command", ["doctor", "advise", "bench", "apply", "verify", "status", "profiles",
                                     "recommend"])
def test_any_argv_ends_in_a_documented_exit(cli, tuning_env: dict[str, str], command: str) -> None:
    @settings(budget(ci=8, long=300))
    @given(argv(command))
    def run(args: list[str]) -> None:
        with time_limit(f"cli {command}"):
            result = cli(*args, env=tuning_env)
        _assert_documented(command, args, result)

    run()


@settings(budget(ci=3, long=40))
@given(st.sampled_from(["new", "file", "full", "nested", "missing-parent"]), st.booleans())
def test_snapshot_argv(tmp_path: Path, cli, where: str, quick: bool) -> None:
    target = tmp_path / "snap-out"
    if target.exists():
        import shutil

        shutil.rmtree(target) if target.is_dir() else target.unlink()
    if where == "file":
        target.write_text("x")
    elif where == "full":
        target.mkdir()
        (target / "something").write_text("x")
    elif where == "nested":
        target = target / "a" / "b"
    elif where == "missing-parent":
        target = Path(_files()["missing"]) / "x"
    args = ["snapshot", str(target)] + (["--quick"] if quick else [])
    with time_limit("cli snapshot", 120):
        result = cli(*args)
    _assert_documented("snapshot", args, result)


@given(st.lists(st.sampled_from(["--version", "--help", "-h", "nosuchcommand", "--bogus"]) | st.text(max_size=8),
                min_size=1, max_size=3).filter(lambda a: a[0] in ("--version", "--help", "-h", "nosuchcommand",
                                                                   "--bogus") or a[0].startswith("-")))
def test_top_level_argv(cli, args: list[str]) -> None:
    with time_limit("cli top level"):
        result = cli(*args)
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)
    assert result.exit_code in (0, 1), (args, result.exit_code)


@pytest.mark.parametrize("cpus", ["0-100000000", "0-999999", "0-18446744073709551616"])
def test_advise_cpus_beyond_the_kernel_is_one_line(cli, cpus: str) -> None:
    with time_limit("cli advise --cpus"):
        result = cli("advise", "--model", _files()["model"], "--snapshot", SNAPSHOT, "--cpus", cpus)
    assert result.exit_code == 1
    assert result.stderr.strip().count("\n") == 0 and "8192 CPUs" in result.stderr


@settings(budget(ci=6, long=200))
@given(st.sampled_from(["--import", "--compare"]),
       st.binary(max_size=300) | st.text(max_size=300).map(str.encode)
       | st.sampled_from([b"[" * 5_000, b'{"configs": NaN}', b"| model | t/s |\n|---|---|\n| x | nan \xc2\xb1 nan |\n"]))
def test_bench_import_and_compare_any_file(tmp_path: Path, cli, option: str, data: bytes) -> None:
    path = tmp_path / "input"
    path.write_bytes(data)
    args = ["bench", option, str(path)] + (["--model", _files()["text"]] if option == "--compare" else [])
    with time_limit("cli bench import/compare"):
        result = cli(*args)
    _assert_documented("bench", args, result)
