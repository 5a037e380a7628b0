"""The server bench against the real llama-server on the tiny test model, on loopback (short: small depths)."""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest

from tunehost.bench.server import launch as serving
from tunehost.bench.server.rounds import ServerSettings, ServerTarget, measure_server
from tunehost.errors import TunehostError

pytestmark = pytest.mark.integration


def test_serve_measures_the_real_server(cli, llama_server, tiny_model, tmp_path):
    out = tmp_path / "server.json"
    result = cli("bench", "--serve", "--depths", "64,256", "-n", "8", "--clients", "1,2", "--budget", "0",
                 "--save", str(out), "--", str(llama_server), "-m", str(tiny_model), "-c", "1024", "-np", "2")
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    server = data["servers"][0]
    assert server["build"].startswith("b") and server["total_slots"] == 2 and server["n_ctx"] == 512
    assert server["model_path"] == str(tiny_model)
    rows = {(r["test"], r["depth"]): r for r in data["summary"]["A"]}
    assert set(rows) == {("cold", 64), ("cold", 256), ("cached", 64), ("cached", 256), ("x2", 64)}
    for depth in (64, 256):
        cold, cached = rows[("cold", depth)], rows[("cached", depth)]
        assert cold["cache_n"] == 0 and cold["prompt_n"] == depth  # every prompt token processed, none cached
        assert cached["cache_n"] >= depth - 1 and cached["prompt_n"] <= 1  # the resent prompt came from the slot
        assert cold["pp_ts"] > 0 and cold["tg_ts"] > 0 and cold["ttft_ms_p50"] > 0
    assert all(r["predicted_n"] == 8 for r in data["requests"])
    assert data["client_overhead"]["requests"] == len([r for r in data["requests"] if r["round"] > 0])


def test_serve_ab_gives_a_verdict_row_per_test(cli, llama_server, tiny_model):
    result = cli("bench", "--serve", "--depths", "64", "-n", "8", "--clients", "1", "--budget", "0", "--json",
                 "--", str(llama_server), "-m", str(tiny_model), "-c", "512", "-t", "1",
                 "--vs", "--", "-m", str(tiny_model), "-c", "512", "-t", "2")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    rows = {r["test"]: r for r in data["comparison"]["rows"]}
    assert set(rows) == {"pp64", "pp64 client", "tg8@d64", "cached64 client"}
    # "disturbed" when other processes took CPU time during the rounds (this host may be busy; the servers' own
    # CPU time is the measurement's, never a disturbance: they are not among the busiest others)
    assert all(r["verdict"] in ("faster", "slower", "no clear difference", "disturbed") for r in rows.values())
    assert not any("llama-server" in b["name"] for w in data["round_watch"] for b in w["busiest_others"])
    assert len(data["round_watch"]) == data["settings"]["rounds"]
    assert [s["command"][-4:-2] for s in data["servers"]] == [["--host", "127.0.0.1"]] * 2


def test_a_server_killed_mid_run_is_named_by_its_signal(llama_server, tiny_model):
    serving.install_handlers()
    with serving.ServedServer([str(llama_server), "-m", str(tiny_model), "-c", "512"], name="A") as served:
        assert served.proc is not None
        pid = served.proc.pid
        threading.Timer(1.0, lambda: os.kill(pid, signal.SIGSEGV)).start()
        with pytest.raises(TunehostError, match=r"ended \(killed by SIGSEGV\)"):
            measure_server([ServerTarget("A", served.target, served.command, served.died)],
                           ServerSettings(depths=(64,), n_gen=8, budget_s=60, min_rounds=200, max_rounds=200))
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_router_mode_reports_the_load_apart(cli, llama_server, tiny_model, tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    (models / "tiny.gguf").symlink_to(tiny_model)
    result = cli("bench", "--serve", "--model", "tiny", "--depths", "64", "-n", "8", "--clients", "1", "--budget",
                 "0", "--json", "--", str(llama_server), "--models-dir", str(models), "-c", "512")
    assert result.exit_code == 0, result.output
    server = json.loads(result.stdout)["servers"][0]
    assert server["router"] is True and server["load_s"] > 0 and server["n_ctx"]


def test_serve_sets_each_depths_tg_beside_the_band_at_that_depth(cli, llama_server, tiny_model, tmp_path):
    """--serve knows the server's arguments: its model and placement (a CPU build here: the RAM path), -ctk/-ctv and
    -nkvo. The cold requests' TG at each depth is set beside tunehost's band at that depth, whose bytes add the KV
    cache a token reads there (q8_0 here), as `bench --depth` and advise's "when a slot's context fills" give it."""
    from tunehost.advise.memory import ServerSettings, kv_read_per_layer
    from tunehost.model import read_model

    out = tmp_path / "server.json"
    args = ("bench", "--serve", "--depths", "64,256", "-n", "8", "--clients", "1", "--budget", "0", "--save", str(out),
            "--", str(llama_server), "-m", str(tiny_model), "-c", "1024", "-ctk", "q8_0", "-ctv", "q8_0")
    result = cli(*args)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    ceilings = data["ceilings"]["A"]
    assert set(ceilings) == {"64", "256"}
    model = read_model(tiny_model)
    for depth in (64, 256):
        c = ceilings[str(depth)]
        expected = sum(kv_read_per_layer(model, ServerSettings(type_k="q8_0", type_v="q8_0"), depth))
        assert c["depth"] == depth and c["kv_bytes_per_token"] == expected > 0 and c["band"] is not None
    assert ceilings["256"]["band"]["high_tokens_per_s"] < ceilings["64"]["band"]["high_tokens_per_s"]
    text = " ".join(result.stdout.split())
    assert "TG against tunehost's band at each depth" in text and "d64 " in text and "d256 " in text
