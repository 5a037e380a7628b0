"""Fuzzing the journal reader (issue 12): every generated journal ends in a clean report or "journal damaged at line
N: why" in one line — through the real `tunehost status` and `tunehost rollback` — never a traceback. Rollback acts
on a throw-away root and only on knobs that name files inside it."""

from __future__ import annotations

import json

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.apply.fakehost import build_root  # noqa: E402
from tunehost.apply.journal import Journal  # noqa: E402

KNOBS = [  # paths inside the throw-away root (a fuzzed path must never send rollback outside it)
    {"kind": "file", "key": "swappiness", "unit": "", "path": "/proc/sys/vm/swappiness", "codec": "plain"},
    {"kind": "file", "key": "thp", "unit": "", "path": "/sys/kernel/mm/transparent_hugepage/enabled",
     "codec": "selector"},
    {"kind": "file", "key": "governor", "unit": "cpu0",
     "path": "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "codec": "plain"},
]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                    st.text(max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=6)
runs = st.sampled_from(["r1", "r2"])
steps = st.one_of(st.integers(-1, 4), values)


def record(record_type: str, **fields):
    return st.fixed_dictionaries({"type": st.just(record_type), "run": runs, **fields})


intact = st.one_of(
    record("begin", root=st.sampled_from(["ROOT", "/", 5]), profile=st.sampled_from(["throughput", None]),
           expect=st.lists(st.fixed_dictionaries({"knob": st.sampled_from(KNOBS), "target": st.sampled_from(
               ["10", "always", "performance"])}), max_size=2)),
    record("intent", step=steps, kind=st.sampled_from(["setting", "file", "bogus"]),
           knob=st.one_of(st.sampled_from(KNOBS), values), target=st.sampled_from(["10", "always", 3]),
           previous=st.sampled_from(["60", "madvise", None])),
    record("result", step=steps, ok=st.booleans()),
    record("end", status=st.sampled_from(["applied", "reverted", 7])),
    record("rolled-back", complete=st.one_of(st.booleans(), values)),
    st.dictionaries(st.sampled_from(["type", "run", "step", "kind", "knob"]), values, max_size=5),
)


def as_line(rec) -> bytes:
    return json.dumps(rec).replace('"ROOT"', '"@ROOT@"').encode()


lines = st.one_of(intact.map(as_line), st.binary(max_size=40), values.map(lambda v: json.dumps(v).encode()),
                  intact.map(as_line).map(lambda b: b[: len(b) // 2]))


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(journal_lines=st.lists(lines, max_size=8), newline_at_end=st.booleans())
def test_every_journal_ends_in_a_report_or_one_damage_line(cli, tmp_path, monkeypatch, journal_lines, newline_at_end):
    root = tmp_path / "root"
    if not root.exists():
        build_root(root, "intel_pstate", cpus=1)
    monkeypatch.setenv("TUNEHOST_ROOT", str(root))
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    data = b"\n".join(journal_lines).replace(b"@ROOT@", str(root.resolve()).encode())
    (state / "journal.jsonl").write_bytes(data + (b"\n" if newline_at_end else b""))

    journal = Journal(state)
    read = journal.read()  # never raises
    for damage in read.damage:
        assert str(damage).startswith(f"journal damaged at line {damage.line}: ")
    for command in ("status", "verify", "rollback"):
        result = cli(command)
        assert result.exit_code in ((0, 1, 2) if command == "verify" else (0, 1)), result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert "Traceback" not in result.output
        errors = [line for line in result.stderr.splitlines() if line.startswith("tunehost: error:")]
        assert len(errors) <= 1, result.stderr
        if read.harmful and command == "status":
            assert result.exit_code == 1 and "journal damaged at line" in errors[0], result.output
        if read.harmful and command == "rollback":  # the damage, or another one-line refusal (another root)
            assert result.exit_code == 1 and len(errors) == 1, result.output
