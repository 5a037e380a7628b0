"""Issue 32, classes 8, 9, 14 and 15: every value that reaches an Ollama Modelfile, a router preset INI, a shell
heredoc or a systemd unit goes through its format's one quoting function (tunehost.formats.quoting), read back
here by a port of the reader's own parser (tests/bounds/readers.py); a format's refusal comes before a tune spends
its budget; llama-fit-params' output is hostile input (never written into a command as it came)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.bounds.readers import ollama_commands, preset_sections
from tests.tune.test_tune_cli import boundary  # noqa: F401 (a fixture: llama-bench faked, its runs counted)
from tunehost.errors import TunehostError
from tunehost.formats.quoting import ini_section, ini_value, modelfile_path
from tunehost.launch import Flag, LaunchConfig

# the characters that broke a format before: line ends, C0/C1 controls, ESC, VT, FF, the Unicode line separators,
# format characters (zero-width space, BOM, bidi), non-ASCII spaces, and INI/Modelfile syntax
HOSTILE = ["\n", "\r", "\x1b", "\x0b", "\x0c", "\x85", "\u2028", "\u2029", "\u200b", "\ufeff", "\u202e", "\xa0",
           "\t", "\x00", "\x7f", '"', '"""', "]", "[", "*", ";", "#", "=", ":", " ", "TUNEHOST_PRESET", "SYSTEM x",
           "ADAPTER /a.gguf", "é", "模型", "%", "$", "\\"]
hostile_text = st.lists(st.sampled_from(HOSTILE) | st.text(min_size=1, max_size=4), min_size=1, max_size=8).map(
    "".join)


def _printable_lines(text: str) -> bool:
    return all(line.isprintable() for line in text.split("\n"))


# ---- class 8: the Ollama Modelfile's FROM line ----

@settings(max_examples=300)
@example("/m/a\nSYSTEM pwned\nADAPTER /x.gguf")
@example("/m/a\u200b.gguf")
@example("/m/a.gguf ")
@example('/m/"q" .gguf ')
@example('/m/a""" ')
@given(hostile_text.map(lambda s: "/m/" + s))
def test_a_modelfile_reads_back_the_path_it_was_given_or_it_is_refused(path: str) -> None:
    try:
        line = modelfile_path(path)
    except TunehostError as e:
        assert "\n" not in str(e) and str(e).isprintable()
        assert not path.isprintable()  # only what Ollama would drop or change is refused
        return
    text = f"FROM {line}\nPARAMETER num_ctx 4096\n"
    assert ollama_commands(text) == [("model", path), ("num_ctx", "4096")]


def test_a_relative_modelfile_path_is_refused() -> None:
    with pytest.raises(TunehostError, match="absolute"):
        modelfile_path("models/a.gguf")


def _advise(cli, *args: str):
    return cli("advise", *args, "--no-probe", "--snapshot", str(SNAPSHOTS / "desktop-12700f-rtx3060"))


SNAPSHOTS = Path(__file__).resolve().parents[1] / "data" / "snapshots"


@pytest.mark.parametrize("name", ["a\nSYSTEM pwned\nADAPTER x.gguf", "a\u200bb.gguf", "a\ufeff.gguf", "a\xa0.gguf",
                                  "trail .gguf"])
def test_a_linked_model_never_adds_modelfile_lines(cli, tmp_path, name) -> None:
    """A clean --model symlink to a file with a hostile name, and the same file in a --models-dir: refused in one
    line, or (a trailing blank) quoted so Ollama reads the same path."""
    from tests.advise.conftest import dense_tensors, write_gguf

    (tmp_path / "d").mkdir()
    real = write_gguf(tmp_path / "d" / name, "llama", dense_tensors(2), n_layer=2)
    link = tmp_path / "clean.gguf"
    link.symlink_to(real)
    for args in (("--model", str(link)), ("--models-dir", str(real.parent))):
        r = _advise(cli, *args, "--format", "ollama")
        if name.endswith(" .gguf") and args[0] == "--model":
            assert r.exit_code == 0, r.output
            modelfile = r.stdout.split("----\n")[2].split("\n\n")[0]
            assert ollama_commands(modelfile)[0] == ("model", str(real))
        else:
            assert r.exit_code == 1 and r.stdout == "" and r.stderr.count("\n") == 1, r.output
            assert r.stderr.isprintable() or r.stderr[:-1].isprintable()
        assert "SYSTEM" not in r.stdout and "ADAPTER" not in r.stdout


# ---- class 9: router preset sections and values ----

@settings(max_examples=300)
@example("x\x1bred\x0b\x0c\u2028y")
@example("*")
@example(" *")
@example("a]b")
@example("q:q4_k_m")
@given(hostile_text)
def test_a_preset_section_is_the_model_name_or_refused(name: str) -> None:
    launch = LaunchConfig("", (), models=(LaunchConfig("/m/a.gguf", (Flag("-m", "/m/a.gguf"),), name=name),
                                          LaunchConfig("/m/b.gguf", (Flag("-m", "/m/b.gguf"),), name="b")),
                          preset=(Flag("-fa", "on"),))
    from tunehost.formats.router_ini import render_preset
    from tunehost.formats.shell import render_router_files

    try:
        text = render_preset(launch)
    except TunehostError as e:
        assert str(e).isprintable()
        with pytest.raises(TunehostError):
            ini_section(name)
        return
    sections = preset_sections(text)
    assert [s for s, _ in sections] == ["default", "*", name, "b"]  # one [*], the model under its own name
    assert sections[2][1] == {"model": "/m/a.gguf"}
    assert _printable_lines(text)
    shell = render_router_files(launch, "/etc/models.ini")
    assert shell.count("\nTUNEHOST_PRESET\n") == 1 and _printable_lines(shell)


@settings(max_examples=200)
@given(hostile_text)
def test_a_preset_value_is_read_back_or_refused(value: str) -> None:
    try:
        written = ini_value("-m", value)
    except TunehostError:
        assert not value.isprintable() or value != value.strip() or ";" in value or "#" in value
        return
    assert preset_sections(f"[a]\nmodel = {written}\n")[1] == ("a", {"model": value})


def _linked_models_dir(tmp_path: Path, names: list[str]) -> Path:
    from tests.advise.conftest import dense_tensors, write_gguf

    clean = write_gguf(tmp_path / "clean.gguf", "llama", dense_tensors(2), n_layer=2)
    d = tmp_path / "models"
    d.mkdir()
    for n in names:
        (d / n).symlink_to(clean)
    return d


@pytest.mark.parametrize("fmt", ["shell", "systemd", "human", "json", "ollama"])
@pytest.mark.parametrize("name", ["x\x1b[31mred.gguf", "v\x0bt.gguf", "f\x0cf.gguf", "l\u2028s.gguf", "*.gguf"])
def test_a_linked_models_dir_entry_never_reaches_a_preset_raw(cli, tmp_path, fmt, name) -> None:
    d = _linked_models_dir(tmp_path, ["good.gguf", name])
    r = _advise(cli, "--models-dir", str(d), "--format", fmt, "--preset-file", str(tmp_path / "models.ini"))
    assert r.exit_code == 1 and r.stdout == "" and r.stderr.count("\n") == 1, r.output
    assert "preset section" in r.stderr or "INI section" in r.stderr
    assert r.stderr.rstrip("\n").isprintable()


def test_models_max_beyond_a_c_int_is_refused_before_the_unit(cli, tmp_path) -> None:
    from tunehost.advise.router import plan_router

    d = _linked_models_dir(tmp_path, ["a.gguf", "b.gguf"])
    for value in (str(10 ** 30), str(2 ** 31), "-1"):
        r = _advise(cli, "--models-dir", str(d), "--models-max", value, "--format", "systemd")
        assert r.exit_code != 0 and r.stdout == "" and "ExecStart" not in r.output
    assert _advise(cli, "--models-dir", str(d), "--models-max", str(2 ** 31 - 1), "--format", "json").exit_code == 0
    with pytest.raises(TunehostError, match="--models-max"):
        plan_router(["a"], lambda i, h: None, None, 10 ** 30)  # type: ignore[arg-type]


# ---- class 14: a format's refusal before a tune measures ----

@pytest.mark.parametrize("fmt", ["shell", "systemd"])
@pytest.mark.parametrize("name", ["a\nb.gguf", "a\x1bb.gguf", "a\u2028b.gguf"])
def test_tune_refuses_an_unwritable_model_path_before_any_measurement(cli, boundary, tmp_path, fmt, name) -> None:
    from tests.advise.conftest import dense_tensors, write_gguf

    model = write_gguf(tmp_path / name, "llama", dense_tensors(2), n_layer=2)
    r = cli("tune", "--model", str(model), "--budget", "2h", "-n", "16", "--format", fmt)
    assert r.exit_code == 1 and r.stdout == "" and r.stderr.count("\n") == 1, r.output
    assert boundary["fake"].invocations == []  # no budget spent


# ---- class 15: llama-fit-params' output is hostile input ----

FIT_LINES = ['-c 32768 -ngl 49 -ot "blk\\.1\\.ffn_up_exps=CPU\x1b[2J"', "-c 32768 -ngl 49 -ts nan,inf,-1,1e999",
             "-c 32768 -ngl 49 -ts inf", "-c 32768 -ngl 49 -ts 0,0", "-c 32768 -ngl 49 -ts " + ",".join("1" * 16),
             "-c 32768 -ngl 99999999 ", "-c 0 -ngl 10", "-c 32768 -ngl " + "9" * 5000,
             '-c 32768 -ngl 49 -ot "blk\u2028=CPU"', '-c 32768 -ngl 49 -ot "(unclosed=CPU"',
             '-c 32768 -ngl 49 -ot "blk=CPU;rm -rf /"', "-c 32768 -ngl 49 -ot noequals"]


@pytest.mark.parametrize("line", FIT_LINES)
def test_an_unusable_fit_params_placement_falls_back_with_one_note(cli, qwen30b, tmp_path, line) -> None:
    from tests.advise.test_advise_cli import snapshot_with_fit_params

    snap = snapshot_with_fit_params(tmp_path, qwen30b, line + "\n")
    r = cli("advise", "--model", str(qwen30b), "--snapshot", str(snap), "--format", "json")
    assert r.exit_code in (0, 2), r.output
    data = json.loads(r.stdout)
    assert data["placement_source"] == "estimate"
    notes = [n for n in data["notes"] if "llama-fit-params" in n]
    assert len(notes) == 1 and "cannot use" in notes[0] or "no placement" in notes[0], data["notes"]
    assert all(n.isprintable() for n in data["notes"])
    for fmt in ("shell", "systemd"):
        out = cli("advise", "--model", str(qwen30b), "--snapshot", str(snap), "--format", fmt)
        assert out.exit_code in (0, 2), out.output
        for bad in ("nan", "1e999", "\x1b", "\u2028", "99999999", "-ts inf", ",inf", "-1,"):
            assert bad not in out.stdout


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ngl=st.integers(-10, 10 ** 6) | st.just(-1), ts=st.none() | st.lists(
    st.sampled_from(["nan", "inf", "-inf", "-1", "1e999", "0", "1", "3.5", "", "x", "\x1b"]), max_size=20).map(
    ",".join), ot=st.lists(hostile_text, max_size=4))
def test_fit_unusable_lets_through_only_what_llama_cpp_accepts(ngl: int, ts: str | None, ot: list[str]) -> None:
    import math
    import re

    from tunehost.advise.flags import FitProbe, fit_unusable

    probe = FitProbe(4096, ngl, ts, tuple(ot))
    why = fit_unusable(probe)
    if why is not None:
        assert why.isprintable()
        return
    assert -1 <= ngl <= 4096
    if ts is not None:
        shares = [float(x) for x in re.split(r"[,/]+", ts)]
        assert 0 < len(shares) < 16 and all(math.isfinite(x) and x >= 0 for x in shares) and any(shares)
    for item in ot:
        assert item.isascii() and item.isprintable() and " " not in item and "=" in item


@pytest.fixture(scope="module")
def qwen30b(tmp_path_factory) -> Path:
    from tests.advise.test_advise_cli import sparse_qwen3_30b

    return sparse_qwen3_30b(tmp_path_factory.mktemp("models") / "Qwen3-30B-A3B-Q4_K.gguf")

