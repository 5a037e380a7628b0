"""`tunehost bench --serve --draft-ab -- llama-server ARGS` (issue 33): the command without its speculative-decoding
options (A) raced against it as given (B), with the acceptance from llama-server's timings (draft_n,
draft_n_accepted: tools/server/server-common.cpp) and the net TG change from the engine's comparison."""

from __future__ import annotations

import json
import sys

import pytest

from tunehost.launch import is_spec_option, without_speculation

from .test_server_bench import FAKE, QUICK, one_error_line, run_cli


def test_without_speculation_strips_every_spelling_and_keeps_the_rest():
    argv = ["llama-server", "-m", "t.gguf", "-md", "mtp.gguf", "--spec-type", "draft-mtp", "-ngl", "99",
            "--spec-draft-n-max=3", "--spec-default", "-ngld", "99", "-ctkd", "f16", "-c", "4096",
            "--spec-ngram-mod-n-match", "24", "--model-draft", "x.gguf"]
    kept, removed = without_speculation(argv)
    assert kept == ["llama-server", "-m", "t.gguf", "-ngl", "99", "-c", "4096"]
    assert removed == ["-md", "mtp.gguf", "--spec-type", "draft-mtp", "--spec-draft-n-max=3", "--spec-default",
                       "-ngld", "99", "-ctkd", "f16", "--spec-ngram-mod-n-match", "24", "--model-draft", "x.gguf"]
    assert without_speculation(["llama-server", "-m", "a.gguf"]) == (["llama-server", "-m", "a.gguf"], [])
    assert not any(is_spec_option(n) for n in ("-m", "-c", "-ngl", "-ctk", "--model", "-mm"))


def test_every_spec_option_is_a_real_llama_server_option():
    """The names come from common/arg.cpp; the recorded --help of a real build lists the ones it has."""
    from pathlib import Path

    from tunehost.launch import SPEC_SWITCHES, SPEC_VALUE_OPTIONS

    help_text = (Path(__file__).resolve().parents[1] / "data" / "snapshots" / "desktop-9950x3d-rtx5090" / "cmd"
                 / "_home_sam_llama.cpp_build_bin_llama-server_--help").read_text()
    for name in ("-md", "--model-draft", "-ngld", "-ctkd", "-ctvd", "--spec-type", "--spec-draft-n-max"):
        assert name in help_text and is_spec_option(name)
    assert "--spec-default" in SPEC_SWITCHES and "-md" in SPEC_VALUE_OPTIONS


def test_draft_ab_races_the_command_without_drafting_and_reports_acceptance_and_net_speed(cli, tmp_path):
    out = tmp_path / "ab.json"
    result, _ = run_cli(cli, "--serve", "--draft-ab", *QUICK, "--save", str(out), "--", sys.executable, str(FAKE),
                        "--spec-type", "ngram-mod")
    assert result.exit_code == 0, result.output
    starts = [ln for ln in result.output.splitlines() if ln.startswith("starting llama-server")]
    assert "--spec-type" not in starts[0] and "--spec-type ngram-mod" in starts[1]
    assert "speculative decoding (B): " in result.output and "(70.0%)" in result.output
    assert "net tg8@d32:" in result.output and "on A: +50.0 %," in result.output
    data = json.loads(out.read_text())
    (spec,) = data["speculation"]
    assert spec["server"] == "B" and spec["acceptance"] == 0.7 and spec["drafted"] == 10 * spec["requests"]
    assert {t["net_percent"] for t in spec["tg"]} == {50.0}
    assert {t["verdict"] for t in spec["tg"]} <= {"faster", "disturbed"}  # a busy test host is said, not hidden


@pytest.mark.parametrize("args, message", [
    (["--serve", "--draft-ab", "--", "llama-server", "-m", "a.gguf"], "no speculative-decoding option"),
    (["--serve", "--draft-ab", "--", "llama-server", "-md", "d.gguf", "--vs", "--", "-m", "b"], "leave out --vs"),
    (["--server", "http://127.0.0.1:9", "--draft-ab"], "use it with --serve"),
    (["--draft-ab", "-m", "a.gguf"], "use it with --serve"),
])
def test_draft_ab_refusals(cli, args, message):
    result, _ = run_cli(cli, *args)
    assert result.exit_code != 0 and message in one_error_line(result)


def test_speculation_summary_from_the_side_of_the_drafting_server():
    from types import SimpleNamespace

    from tunehost.bench.server.rounds import speculation_summary

    def rec(config, n, acc, gen=8):
        return SimpleNamespace(config=config, round=1, draft_n=n, draft_n_accepted=acc, predicted_n=gen)

    row = SimpleNamespace(test="tg8@d32", ratio=0.8, baseline_ts=100.0, candidate_ts=80.0, verdict="slower")
    comparison = SimpleNamespace(rows=[row, SimpleNamespace(test="pp32", ratio=1.0, baseline_ts=1.0,
                                                            candidate_ts=1.0, verdict="n/a")])
    # A drafted (the first server), B did not: A's net is 100 against 80, +25 %, faster
    (a,) = speculation_summary([rec("A", 10, 4), rec("A", 10, 6), rec("B", None, None)], ["A", "B"], comparison)
    assert a["server"] == "A" and a["acceptance"] == 0.5 and a["accepted_per_generated"] == 10 / 16
    (tg,) = a["tg"]
    assert tg["net_percent"] == 25.0 and tg["verdict"] == "faster" and tg["vs"] == "B" and tg["ts"] == 100.0
    assert speculation_summary([rec("A", None, None)], ["A"], None) == ()


@pytest.mark.integration
def test_draft_ab_on_the_real_server_with_an_ngram_draft(cli, llama_server, tiny_model):
    """The tiny random-weight model repeats itself under greedy decoding, so ngram-mod drafts and llama-server
    reports draft_n / draft_n_accepted; the net change is whatever this host measures (not asserted)."""
    result = cli("bench", "--serve", "--draft-ab", "--depths", "64", "-n", "64", "--clients", "1", "--budget", "0",
                 "--json", "--", str(llama_server), "-m", str(tiny_model), "-c", "512", "-t", "1",
                 "--spec-type", "ngram-mod")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert "--spec-type" not in data["servers"][0]["command"] and "ngram-mod" in data["servers"][1]["command"]
    (spec,) = data["speculation"]
    assert spec["server"] == "B" and spec["drafted"] > 0 and 0 <= spec["accepted"] <= spec["drafted"]
    assert [t["test"] for t in spec["tg"]] == ["tg64@d64"] and spec["tg"][0]["vs"] == "A"
