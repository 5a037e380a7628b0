"""Issue 32 re-run with other inputs of the same classes (the red-team pass before the hidden cases): a served
server's descendant that left its process group (double fork + setsid, class 7), a key echoed in part or in
another case (class 10), a key the HTTP header cannot carry (class 2), the router's /models under --timeout
(class 1), and the output formats' refusals (classes 8, 9, 14, 15)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.bounds.limits import MiB, alive, program, within
from tunehost.host.proc import run_bounded

HOSTILE = Path(__file__).with_name("hostile_http.py")




def _escapee(pid_file: Path) -> str:
    """Shell that leaves a SIGTERM-ignoring process in a session of its own (a double fork and setsid())."""
    return (f"( setsid sh -c 'trap \"\" TERM INT; echo $$ > {pid_file}; exec sleep 600' "
            "</dev/null >/dev/null 2>&1 & ) ; while [ ! -s " + str(pid_file) + " ]; do sleep 0.05; done")


# ---------------------------------------------------------------- 7. nothing served is left behind


def test_a_served_descendant_in_its_own_session_is_stopped(tmp_path: Path, monkeypatch) -> None:
    """A llama-server (wrapper) whose child double-forks and setsid()s left the group killpg reaches: it kept
    running after --serve (found by the run mark in its environment now)."""
    from tunehost.bench.server import launch

    monkeypatch.setattr(launch, "STOP_GRACE_S", 1.0)
    pid_file = tmp_path / "escapee.pid"
    wrapper = program(tmp_path / "llama-server",
                       f"{_escapee(pid_file)}\nexec \"{sys.executable}\" \"{HOSTILE}\" --mode ok \"$@\"")
    with within("stopping a served server's escaped descendant", seconds=15.0, peak_bytes=16 * MiB):
        with launch.ServedServer([str(wrapper)], name="A", start_timeout_s=10.0):
            escapee = int(pid_file.read_text())
            assert alive(escapee)
    time.sleep(0.3)
    assert not alive(escapee), "a descendant in its own session outlived --serve"


def test_a_bounded_commands_descendant_in_its_own_session_is_killed(tmp_path: Path) -> None:
    """run_bounded's deadline reached only the process group: a double-forked, setsid() child lived on."""
    pid_file = tmp_path / "escapee.pid"
    with within("a command that escapes its group", seconds=10.0, peak_bytes=16 * MiB):
        result = run_bounded(["sh", "-c", f"{_escapee(pid_file)}; sleep 600"], timeout_s=1.0, max_stdout=4096,
                             max_stderr=4096, max_line=4096)
    assert result.timed_out
    escapee = int(pid_file.read_text())
    time.sleep(0.3)
    assert not alive(escapee), "a command's descendant in its own session outlived its deadline"


# ---------------------------------------------------------------- 10. the key echoed in another spelling


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=12, max_size=64),
       st.sampled_from(["prefix", "suffix", "upper", "middle-cut", "base64", "bearer-base64"]))
def test_an_echoed_key_in_part_or_another_case_is_redacted(key: str, spelling: str) -> None:
    """A server echoing the key cut short by one character, upper-cased or base64'd printed it (only the whole
    key and its JSON/percent spellings were redacted)."""
    import base64

    from tunehost.bench.server.client import MIN_KEY_FRAGMENT, redact

    echoed = {"prefix": key[:-1], "suffix": key[1:], "upper": key.upper(),
              "middle-cut": key[:MIN_KEY_FRAGMENT] + "..." + key[MIN_KEY_FRAGMENT:],
              "base64": base64.b64encode(key.encode()).decode(),
              "bearer-base64": base64.b64encode(f"Bearer {key}".encode()).decode()}[spelling]
    shown = redact(f"invalid key {echoed} given", (key,))
    assert "[redacted]" in shown
    kept = shown.replace("[redacted]", "\0").lower()
    low = key.lower()
    assert not any(low[i:i + MIN_KEY_FRAGMENT] in kept for i in range(len(low) - MIN_KEY_FRAGMENT + 1)), shown


@pytest.mark.parametrize("first_line", ["sk-\u202eRLO", "sk-\u00e9t\u00e9", "sk-\u200bzw"])
def test_a_key_an_http_header_cannot_carry_is_refused_when_read(tmp_path: Path, first_line: str) -> None:
    """A key with U+202E reached http.client (an error at the first request); "é" was sent as latin-1, not as the
    file's UTF-8 bytes."""
    from tunehost.bench.server.client import read_api_key
    from tunehost.errors import TunehostError

    path = tmp_path / "key"
    path.write_text(first_line + "\n", encoding="utf-8")
    with pytest.raises(TunehostError, match="printable ASCII"):
        read_api_key(str(path))


# ---------------------------------------------------------------- 1. every request within --timeout


def test_the_routers_model_list_ends_at_the_timeout() -> None:
    """/models (asked when a router is benchmarked without --model) took PROBE_TIMEOUT_S (10 s) from a server
    that never answers, whatever --timeout said."""
    import socket

    from tunehost.bench.server.client import ServerClient, parse_target
    from tunehost.bench.server.rounds import list_models

    with socket.socket() as listener:  # accepts (the kernel's backlog) and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        client = ServerClient(parse_target(f"http://127.0.0.1:{listener.getsockname()[1]}"), timeout_s=0.5)
        began = time.monotonic()
        assert list_models(client) == []
        assert time.monotonic() - began < 2.0


# ---------------------------------------------------------------- 9. shell lines and units: invisible characters

INVISIBLE = ["\u202e", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069", "\u200b", "\u200d", "\u00ad", "\ufeff",
             "\U000e0041", "\u061c", "\u2060"]


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=0, max_size=6), st.sampled_from(INVISIBLE), st.text(min_size=0, max_size=6),
       st.sampled_from(["shell", "systemd"]))
def test_an_invisible_format_character_never_reaches_a_shell_line_or_a_unit(head: str, ch: str, tail: str,
                                                                             fmt: str) -> None:
    """A --model path with U+202E (or another Cf character) was written into the shell line and ExecStart=
    verbatim: the command a person reads before running it reads differently from what runs (Ollama and INI
    refused the same path)."""
    from tunehost.errors import TunehostError
    from tunehost.formats.quoting import shell_word, systemd_quote

    quote = shell_word if fmt == "shell" else systemd_quote
    with pytest.raises(TunehostError) as err:
        quote(f"/m/{head}{ch}{tail}.gguf")
    assert "\n" not in str(err.value) and str(err.value).isprintable()


def test_a_linked_model_with_a_bidi_override_is_refused_by_every_format(cli, tmp_path: Path) -> None:
    from tests.advise.conftest import dense_tensors, write_gguf

    snapshot = Path(__file__).resolve().parents[1] / "data" / "snapshots" / "desktop-12700f-rtx3060"
    real = write_gguf(tmp_path / "a\u202efdp.gguf", "llama", dense_tensors(2), n_layer=2)
    link = tmp_path / "clean.gguf"
    link.symlink_to(real)
    for fmt in ("shell", "systemd", "ollama"):
        r = cli("advise", "--model", str(link), "--no-probe", "--snapshot", str(snapshot), "--format", fmt)
        assert r.exit_code == 1, (fmt, r.output)
        assert "\u202e" not in r.output and "U+202E" in r.output


# ---------------------------------------------------------------- a named binary is run exactly


@pytest.mark.parametrize("named", ["", " ", "no\n\x1b[31mred"])
def test_a_named_llama_bench_that_names_nothing_is_refused(tmp_path: Path, monkeypatch, named: str) -> None:
    """`--llama-bench ""` ran the current directory's llama-bench (Path("") is "."), which nobody named; an error
    quoted the name raw (a newline and an ESC in one error line)."""
    from tunehost.bench.llama_bench import find_llama_bench
    from tunehost.errors import TunehostError

    program(tmp_path / "llama-bench", "exit 0")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TunehostError) as err:
        find_llama_bench(named)
    assert str(err.value).isprintable()


def test_an_empty_llama_bench_is_refused_on_the_command_line(cli, tmp_path: Path, monkeypatch) -> None:
    """typer turned `--llama-bench ""` into Path("."): the current directory's llama-bench ran."""
    marker = tmp_path / "ran"
    program(tmp_path / "llama-bench", f"touch {marker}")
    monkeypatch.chdir(tmp_path)
    r = cli("bench", "-m", str(tmp_path / "m.gguf"), "--llama-bench", "", "--budget", "0")
    assert r.exit_code == 1 and "empty path" in r.output
    assert not marker.exists()


# ---------------------------------------------------------------- 15. llama-fit-params' -ts as llama.cpp reads it

NON_ASCII_DIGITS = ["\u0663", "\uff11", "\U0001d7d9", "\u0967", "1_0", "+1", " 1", "1\u00a0"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["0", "1", "0.5", "3", ".25", "1e2"]), min_size=0, max_size=3),
       st.sampled_from(NON_ASCII_DIGITS), st.lists(st.sampled_from(["1", "2.5"]), max_size=3))
def test_a_tensor_split_is_written_only_in_ascii_decimals(head: list[str], odd: str, tail: list[str]) -> None:
    """Python's float() reads "٣", "１", "𝟙" and "1_0": `-ts ٣,1` from llama-fit-params was written into the
    command as it came (llama.cpp's std::stof reads none of them as Python does)."""
    from tunehost.advise.flags import FitProbe, fit_unusable

    ts = ",".join([*head, odd, *tail])
    why = fit_unusable(FitProbe(4096, 10, ts, ()))
    assert why is not None and why.isprintable() and "-ts" in why


def test_a_placement_in_other_digits_is_no_placement() -> None:
    from tunehost.advise.flags import parse_fit_params

    assert parse_fit_params("-c \u0664\u0660\u0669\u0666 -ngl \u0664\u0669\n") is None
    assert parse_fit_params("-c 4096 -ngl 49\n") is not None


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~", min_size=10,
               max_size=40).filter(lambda s: not s.isdigit()),
       st.sampled_from(["http://[::1]:8080/?key={s}", "http://h/p#{s}", "http://h:1/?a=1&token={s}",
                        "http://user:{s}", "http://user:{s}/", "http://[::1]:{s}/x", "https://u:{s}@[::1]:1/",
                        "http://{s}@h", "ftp://u:{s}"]))
def test_a_secret_anywhere_in_a_refused_url_is_never_quoted(secret: str, shape: str) -> None:
    """The password of `http://user:PASSWORD` (no "@host": it stands where the port goes) and a key in a query
    (`?key=...`) or fragment were quoted in the refusal."""
    from tunehost.bench.server.client import parse_target
    from tunehost.errors import TunehostError

    with pytest.raises(TunehostError) as err:
        parse_target(shape.format(s=secret))
    assert secret not in str(err.value) and "[redacted]" in str(err.value)


def test_a_second_ctrl_c_while_stopping_kills_at_once(tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C again during the SIGTERM grace raised KeyboardInterrupt out of stop(): no SIGKILL went out, the
    server (and a child in its own session) lived on, and atexit printed a traceback."""
    from tunehost.bench.server import launch

    monkeypatch.setattr(launch, "STOP_GRACE_S", 5.0)
    pid_file = tmp_path / "escapee.pid"
    wrapper = program(tmp_path / "llama-server",
                       f"{_escapee(pid_file)}\ntrap '' TERM INT\n"
                       f"exec \"{sys.executable}\" \"{HOSTILE}\" --mode ok \"$@\"")
    served = launch.ServedServer([str(wrapper)], name="A", start_timeout_s=10.0)
    with within("a Ctrl-C while stopping", seconds=15.0, peak_bytes=16 * MiB):
        served.__enter__()
        leader, escapee = served.proc.pid, int(pid_file.read_text())
        real_wait = served.proc.wait
        calls = []

        def interrupted_wait(timeout=None):
            calls.append(timeout)
            if len(calls) == 1:
                raise KeyboardInterrupt
            return real_wait(timeout)

        monkeypatch.setattr(served.proc, "wait", interrupted_wait)
        began = time.monotonic()
        served.stop()  # no KeyboardInterrupt out of it
        assert time.monotonic() - began < 4.0, "the grace was waited out after Ctrl-C"
    time.sleep(0.3)
    assert not alive(leader) and not alive(escapee)


# ---------------------------------------------------------------- 3. /tokenize: a flood of tokens per call


@pytest.mark.parametrize("per_word", [17, 1000, 100_000])
def test_a_token_flood_is_refused_before_it_is_validated(per_word: int) -> None:
    """A /tokenize answering 16M tokens (32 MiB) to a 72-word request was parsed and checked token by token on
    every call: `--depths 64 --budget 0 --clients 1,4` took 81 s and 234 MB; now the answer is capped at what N
    words can be (MAX_TOKENS_PER_WORD each) and refused past it."""
    from tunehost.bench.server.client import parse_target
    from tunehost.bench.server.rounds import MAX_TOKENS_PER_WORD, TOKEN_JSON_BYTES, TOKENIZE_SLACK, seeded_prompt
    from tunehost.errors import TunehostError

    asked: list[int] = []

    class Tokenizer:
        timeout_s = 10.0
        target = parse_target("http://127.0.0.1:9")

        def request_json(self, method, path, body, timeout_s=None, max_bytes=None):
            words = len(body["content"].split())
            asked.append(max_bytes)
            assert max_bytes is not None and max_bytes <= (words * MAX_TOKENS_PER_WORD + TOKENIZE_SLACK) \
                * TOKEN_JSON_BYTES + 4096
            return 200, {"tokens": [3] * (words * per_word)}

    with within("a token flood", seconds=2.0, peak_bytes=64 * MiB):
        with pytest.raises(TunehostError, match="not a real tokenizer"):
            seeded_prompt(Tokenizer(), 64, 42)  # type: ignore[arg-type]
    assert len(asked) == 1


def test_a_requests_byte_cap_is_the_callers() -> None:
    from tests.bounds.hostile_http import HostileServer
    from tunehost.bench.server.client import ServerClient, parse_target
    from tunehost.errors import TunehostError

    with HostileServer("ok") as server:
        client = ServerClient(parse_target(server.url), timeout_s=5.0)
        with pytest.raises(TunehostError, match="larger than 100 bytes"):
            client.request_json("GET", "/props", max_bytes=100)
        assert client.request_json("GET", "/props")[0] == 200
