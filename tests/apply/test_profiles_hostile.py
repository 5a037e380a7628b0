"""Hostile profiles (issue 12) through the real CLI: include chains deeper than MAX_INCLUDE_DEPTH (a 1,200-deep one
was a RecursionError), cycles, nesting, bytes and values a profile cannot hold. One line, exit 1, nothing changed."""

from __future__ import annotations

import pytest

from tests.apply.fakehost import build_root, tree
from tunehost.apply.profiles import MAX_INCLUDE_DEPTH


@pytest.fixture
def root(tmp_path, monkeypatch):
    r = build_root(tmp_path / "root", "intel_pstate", cpus=2)
    monkeypatch.setenv("TUNEHOST_ROOT", str(r))
    return r


@pytest.fixture
def profiles(tmp_path, monkeypatch):
    d = tmp_path / "profiles"
    d.mkdir()
    monkeypatch.setenv("TUNEHOST_PROFILES_DIR", str(d))
    return d


def refused(cli, root, tmp_path, *args) -> str:
    before = tree(root)
    result = cli(*args)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tunehost: error: "), result.stderr
    assert tree(root) == before and not (tmp_path / "state").exists()
    return lines[0]


def chain(profiles, depth: int) -> None:
    for i in range(depth):
        (profiles / f"p{i}.toml").write_text(f'include = ["p{i + 1}"]\n')
    (profiles / f"p{depth}.toml").write_text("swappiness = 10\n")


def test_a_1200_deep_include_chain_is_one_line_naming_the_chain(cli, root, tmp_path, profiles):
    chain(profiles, 1200)
    line = refused(cli, root, tmp_path, "apply", "--profile", "p0", "--yes")
    assert line == (f"tunehost: error: profile includes nest deeper than {MAX_INCLUDE_DEPTH}: "
                    "p0 -> p1 -> p2 -> ... (28 more) -> p31 -> p32 -> p33")
    assert "nest deeper than 32" in refused(cli, root, tmp_path, "profiles")


def test_a_chain_within_the_bound_still_loads(cli, root, profiles):
    chain(profiles, MAX_INCLUDE_DEPTH)
    result = cli("apply", "--profile", "p0", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "60 -> 10" in result.stdout


def test_a_long_include_cycle_names_it(cli, root, tmp_path, profiles):
    for i in range(5):
        (profiles / f"c{i}.toml").write_text(f'include = ["c{(i + 1) % 5}"]\n')
    assert refused(cli, root, tmp_path, "apply", "-p", "c0", "--yes").endswith(
        "profile include cycle: c0 -> c1 -> c2 -> c3 -> c4 -> c0")


@pytest.mark.parametrize("content, message", [
    (b"swappiness = 1000000000000000000000000000000\n", "swappiness = 1000000000000000000000000000000 must be between"),
    (b"swappiness = nan\n", "swappiness must be an integer, not a number (nan)"),
    (b"swappiness = 1.5\n", "swappiness must be an integer"),
    (b"swappiness = true\n", "swappiness must be an integer, not true or false"),
    (b"swappiness = -1\n", "must be between 0 and 200"),
    (b'governor = "performance\\nExecStart=/bin/sh"\n', "must be one word"),
    (b'governor = "\\u001b[31mred"\n', "must be one word"),
    (b'tuned_profile = ""\n', "must be one word"),
    (b'boost = "yes"\n', "boost must be true or false, not a string"),
    (b"epp = 5\n", "epp must be a string"),
    (b'thp = "sometimes"\n', "thp = 'sometimes' is not one of always, madvise, never"),
    (b'include = "throughput"\n', "include must be a list"),
    (b"include = [1]\n", "include must be a list of profile names, not 1"),
    (b'include = ["../etc/passwd"]\n', "invalid profile name '../etc/passwd'"),
    (b"[governor]\nx = 1\n", "governor must be a string, not a table"),
    (b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", "is not valid TOML: nested too deeply"),
    (b"swappiness = \xff\n", "is not UTF-8 text (byte 14)"),
    (b"\x00\x01\x02", "is not valid TOML"),
])
def test_bad_values_are_one_line(cli, root, tmp_path, profiles, content, message):
    (profiles / "bad.toml").write_bytes(content)
    assert message in refused(cli, root, tmp_path, "apply", "--profile", "bad", "--yes")


def test_a_profile_too_large_is_refused_before_parsing(cli, root, tmp_path, profiles):
    with open(profiles / "huge.toml", "wb") as fh:
        fh.truncate(2 * 1024 * 1024)
    assert "is larger than 1 MiB" in refused(cli, root, tmp_path, "apply", "--profile", "huge", "--yes")


@pytest.mark.parametrize("name", ["", "../x", ".hidden", "a/b", "9" * 5000, "x\n[y]"])  # 5000: ENAMETOOLONG (fuzz)
def test_bad_profile_names(cli, root, tmp_path, profiles, name):
    assert "invalid profile name" in refused(cli, root, tmp_path, "apply", "--profile", name, "--yes")
