"""Issue 21: router mode, co-resident servers, Ollama output, busy hosts, and the smaller fixes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tunehost.advise.host_view import GpuView, HostView
from tunehost.advise.plan import AdviseOptions, plan
from tunehost.advise.router import plan_router, scan_models_dir
from tunehost.errors import TunehostError
from tunehost.formats.router_ini import render_preset

from .conftest import dense_tensors, write_gguf
from .test_plan import HOSTS, MODELS

MiB = 1024 * 1024
GiB = 1024 * MiB
SNAPSHOTS = Path(__file__).resolve().parents[1] / "data" / "snapshots"


def _router(names, models, host, models_max, reserve=0):
    opts = [AdviseOptions(f"/models/{n}.gguf") for n in names]
    return plan_router(names, lambda i, h: plan(models[i], h, opts[i]), host, models_max, reserve)


def test_router_plans_the_worst_case_of_n_resident_and_shrinks_each_model_to_fit():
    host = HOSTS["12700f-3060"]
    qwen, llama = MODELS["qwen30b"](), MODELS["llama8b"]()
    alone = _router(["qwen", "llama"], [qwen, llama], host, 1)
    assert alone.fits and alone.scaled is None  # one at a time: each plan is the single-model plan
    assert alone.plans[0].value("--n-cpu-moe") == plan(qwen, host, AdviseOptions("/m.gguf")).value("--n-cpu-moe")
    both = _router(["qwen", "llama"], [qwen, llama], host, 2)
    free = host.gpus[0].free_bytes
    assert both.gpu_worst <= free and both.scaled is not None
    assert sum(p.budget.gpu_total for p in both.plans) <= free  # any 2 resident fit together
    assert int(both.plans[0].value("--n-cpu-moe")) > int(alone.plans[0].value("--n-cpu-moe"))
    assert both.plans[1].path == "gpu"  # the largest footprint gives up VRAM first: the dense model stays whole
    assert [m for m, _, _ in both.scaled] == ["qwen"]


def test_a_reservation_for_another_server_leaves_less_vram_to_plan_on():
    host = HOSTS["12700f-3060"]
    qwen = MODELS["qwen30b"]()
    free = _router(["qwen"], [qwen], host, 1)
    reserved = _router(["qwen"], [qwen], host, 1, reserve=2 * GiB)
    assert reserved.gpu_free == free.gpu_free - 2 * GiB
    assert int(reserved.plans[0].value("--n-cpu-moe")) > int(free.plans[0].value("--n-cpu-moe"))
    assert any("reserved for other servers" in n for n in reserved.notes)


def test_router_names_must_be_unique_and_models_max_not_negative():
    host = HOSTS["12700f-3060"]
    m = MODELS["llama8b"]()
    with pytest.raises(TunehostError, match="share a router name"):
        _router(["a", "a"], [m, m], host, 1)
    with pytest.raises(TunehostError, match="--models-max"):
        _router(["a"], [m], host, -1)


def test_router_launch_puts_per_model_choices_in_the_preset_and_shared_ones_in_the_star_section():
    host = HOSTS["12700f-3060"]
    rp = _router(["qwen", "llama"], [MODELS["qwen30b"](), MODELS["llama8b"]()], host, 2)
    launch = rp.launch("/usr/bin/llama-server", "/etc/llama/models.ini")
    assert launch.is_router and [m.name for m in launch.models] == ["qwen", "llama"]
    argv = launch.argv()
    assert argv[:5] == ["/usr/bin/llama-server", "--models-preset", "/etc/llama/models.ini", "--models-max", "2"]
    assert "-m" not in argv and "-ngl" not in argv  # router options override presets: placement stays per model
    ini = render_preset(launch)
    assert "[*]\n" in ini and "fa = on" in ini.split("[qwen]")[0]
    qwen = ini.split("[qwen]")[1].split("[llama]")[0]
    assert "model = /models/qwen.gguf" in qwen and "n-cpu-moe = " in qwen and "host" not in qwen
    assert launch.from_json(json.loads(json.dumps(launch.to_json()))) == launch


def test_preset_refuses_what_ini_cannot_carry():
    from tunehost.launch import Flag, LaunchConfig

    bad = LaunchConfig("", (), models=(LaunchConfig("/m#1.gguf", (Flag("-m", "/m#1.gguf"),), name="m"),))
    with pytest.raises(TunehostError, match="INI"):
        render_preset(bad)


def test_scan_models_dir_follows_llama_cpp_naming(tmp_path):
    write_gguf(tmp_path / "small.gguf", "llama", dense_tensors(2), n_layer=2)
    (tmp_path / "mmproj-x.gguf").write_bytes(b"")
    (tmp_path / "mtp-draft.gguf").write_bytes(b"")
    sub = tmp_path / "vision"
    sub.mkdir()
    write_gguf(sub / "v.gguf", "llama", dense_tensors(2), n_layer=2)
    (sub / "mmproj-F16.gguf").write_bytes(b"")
    found = scan_models_dir(tmp_path)
    assert [(m.name, Path(m.path).name, m.mmproj and Path(m.mmproj).name) for m in found] == [
        ("small", "small.gguf", None), ("vision", "v.gguf", "mmproj-F16.gguf")]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TunehostError, match="no GGUF model"):
        scan_models_dir(empty)


def test_cli_router_mode_on_a_snapshot(cli, tmp_path):
    a = write_gguf(tmp_path / "a.gguf", "llama", dense_tensors(2), n_layer=2, name="A")
    b = write_gguf(tmp_path / "b.gguf", "llama", dense_tensors(2), n_layer=2, name="B")
    r = cli("advise", "--model", str(a), "--model", str(b), "--models-max", "2", "--snapshot",
            str(SNAPSHOTS / "desktop-12700f-rtx3060"), "--format", "json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["mode"] == "router" and data["resident"] == 2 and data["fits"]
    assert [m["router_name"] for m in data["models"]] == ["a", "b"]
    # absolute: a unit has no working directory to resolve a relative preset against (issue 30)
    preset = os.path.abspath("models.ini")
    assert data["launch"]["argv"][1:5] == ["--models-preset", preset, "--models-max", "2"]
    shell = cli("advise", "--model", str(a), "--model", str(b), "--snapshot",
                str(SNAPSHOTS / "desktop-12700f-rtx3060"), "--format", "shell")
    assert shell.exit_code == 0 and f"cat > {preset} <<'TUNEHOST_PRESET'\n" in shell.stdout
    assert "--models-max 4" in shell.stdout  # llama-server's default when not given


@pytest.mark.parametrize("args, message", [
    (("--mmproj", "/x.gguf"), "router mode"),
    (("--draft-max", "8"), "use --spec-draft-n-max"),
    (("--draft-min", "2"), "use --spec-draft-n-min"),
])
def test_cli_refusals(cli, tmp_path, args, message):
    a = write_gguf(tmp_path / "a.gguf", "llama", dense_tensors(2), n_layer=2)
    r = cli("advise", "--model", str(a), "--model", str(a), *args, "--snapshot",
            str(SNAPSHOTS / "desktop-12700f-rtx3060"))
    assert r.exit_code == 1 and message in r.output


def test_ollama_output_carries_the_same_plan(cli, tmp_path):
    a = write_gguf(tmp_path / "Small Model.gguf", "llama", dense_tensors(2), n_layer=2)
    r = cli("advise", "--model", str(a), "--ctx", "4096", "--parallel", "3", "--snapshot",
            str(SNAPSHOTS / "desktop-9950x3d-rtx5090"), "--format", "ollama")
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "/etc/systemd/system/ollama.service.d/tunehost.conf" in out
    for line in ("Environment=OLLAMA_FLASH_ATTENTION=1", "Environment=OLLAMA_KV_CACHE_TYPE=q8_0",
                 "Environment=OLLAMA_NUM_PARALLEL=3", "Environment=OLLAMA_MAX_LOADED_MODELS=1",
                 "CPUAffinity=0-15", f"FROM {a.resolve()}", "PARAMETER num_ctx 4096",  # Ollama multiplies by 3
                 "PARAMETER num_gpu 99", "PARAMETER num_thread 16"):
        assert line in out.splitlines(), line
    # each Modelfile under its own name (issue 30: several had to be saved as "Modelfile")
    assert "# ---- Modelfile.small-model (then: ollama create small-model -f Modelfile.small-model) ----" in out


def test_ollama_moe_leaves_num_gpu_to_llama_server_fit():
    from tunehost.formats.ollama import render_ollama

    p = plan(MODELS["qwen30b"](), HOSTS["12700f-3060"], AdviseOptions("/models/q.gguf"))
    out = render_ollama(p.launch())
    assert "PARAMETER num_gpu" not in out and "no --n-cpu-moe" in out and "PARAMETER use_mmap false" in out


def test_busy_host_is_said_and_the_dimm_peak_is_used():
    from types import SimpleNamespace

    from tunehost.advise.ceiling import CPU_DIMM_EFFICIENCY

    p = plan(MODELS["qwen30b"](), HOSTS["epyc-2s"], AdviseOptions(
        "/m.gguf", ram_peak=SimpleNamespace(configured_gbps=460.8, basis="24 x DDR5-4800", rated_gbps=None),
        host_busy=True, ram_bandwidth_note="not measured: an inference server is at work (llama-server pid 7)"))
    assert any(w.startswith("the host is busy") and "llama-server pid 7" in w for w in p.warnings)
    bw = p.ceiling.bandwidths
    assert bw.ram_gbps == 460.8 and "the DIMMs' peak" in bw.ram_basis and f"{CPU_DIMM_EFFICIENCY:.0%}" in bw.ram_basis
    assert p.ceiling.band is not None and p.ceiling.band.low < p.ceiling.band.high <= p.ceiling.tokens_per_s * 1.0001


def test_cli_busy_live_host_never_measures(cli, tmp_path, monkeypatch):
    import tunehost.facts.processes as procs
    import tunehost.probes.sampler as measure

    monkeypatch.setattr(procs, "busy_reason", lambda facts: "not measured: the host is busy (stress pid 9)")
    monkeypatch.setattr(measure, "probe_memory", lambda host: pytest.fail("measured a busy host"))
    a = write_gguf(tmp_path / "a.gguf", "llama", dense_tensors(2), n_layer=2)
    r = cli("advise", "--model", str(a), "--format", "json")
    data = json.loads(r.stdout)
    assert any("stress pid 9" in w for w in data["warnings"])


def test_e_cores_in_cpus_are_warned_with_the_p_core_list():
    view = HostView(online_cpus=tuple(range(20)), cores=tuple((2 * c, 2 * c + 1) for c in range(8))
                    + tuple((c,) for c in range(16, 20)), pin_cpus=(0, 2, 4, 6, 8, 10, 12, 14), performance_cores=8,
                    threads=8, smt=True, hybrid=True, efficiency_cpus=(16, 17, 18, 19))
    v = view.with_cpus("0-19")
    assert v.cpu_warnings and "E-cores (16-19)" in v.cpu_warnings[0] and "--cpus 0-15" in v.cpu_warnings[0]
    assert not view.with_cpus("0-7").cpu_warnings
    p = plan(MODELS["llama8b"](), v, AdviseOptions("/m.gguf"))
    assert any("E-cores" in w for w in p.warnings)


def test_a_draft_model_gets_spec_type_draft_simple_and_old_builds_drop_it():
    from tunehost.advise.flags import adapt, parse_help
    from tunehost.advise.plan import apply_caps

    from .test_plan import quantized, shape_fixture

    draft = quantized(shape_fixture("llama-3.1-8b"), 1 * GiB)
    p = plan(MODELS["llama8b"](), HOSTS["9950x3d-5090"],
             AdviseOptions("/m.gguf", draft="/d.gguf", draft_model=draft, spec_draft_n_max=8))
    assert p.value("--spec-type") == "draft-simple" and p.value("--spec-draft-n-max") == "8"
    old = parse_help("-md, --model-draft FNAME  draft\n--draft-max, --draft, --draft-n N  n\n"
                     "--spec-type [none|ngram-simple]  t\n")
    flags, notes = adapt(p.flags, old)
    names = [f.name for f in flags]
    assert "--spec-type" not in names and "--draft-max" in names
    assert any("draft-simple" in n for n in notes)
    assert apply_caps(p, old).value("--draft-max") == "8"


def test_power_cap_ratio_reaches_the_band():
    gpu = GpuView(0, "NVIDIA GeForce RTX 3090", "nvidia", 24576 * MiB, 24000 * MiB, power_limit_w=200.0,
                  power_default_limit_w=350.0)
    host = HostView(online_cpus=tuple(range(16)), cores=tuple((c,) for c in range(16)), pin_cpus=tuple(range(16)),
                    performance_cores=16, threads=16, gpus=(gpu,), ram_available=60 * GiB)
    p = plan(MODELS["llama8b"](), host, AdviseOptions("/m.gguf"))
    assert p.ceiling.bandwidths.power_ratio == pytest.approx(0.571, abs=0.001)
    assert any("power limit" in n for n in p.ceiling.band.notes)


# ---- draft vocabulary and RoPE scaling (tunehost.advise.vocab) ----

def _tok(writer, model="llama", tokens=None, bos=1):
    writer.add_tokenizer_model(model)
    writer.add_token_list(tokens or [f"t{i}" for i in range(300)])
    writer.add_bos_token_id(bos)
    writer.add_add_bos_token(True)


def test_vocab_compare_follows_llama_cpp_rules(tmp_path):
    from tunehost.advise.vocab import compare, read_meta

    same_a = write_gguf(tmp_path / "a.gguf", "llama", dense_tensors(2), n_layer=2, extra=_tok)
    same_b = write_gguf(tmp_path / "b.gguf", "llama", dense_tensors(2), n_layer=2, extra=_tok)
    bpe = write_gguf(tmp_path / "c.gguf", "llama", dense_tensors(2), n_layer=2,
                     extra=lambda w: _tok(w, "gpt2", [f"t{i}" for i in range(7)] + [f"x{i}" for i in range(293)], 2))
    a, b, c = read_meta(same_a), read_meta(same_b), read_meta(bpe)
    assert a is not None and a.tokenizer == "llama" and len(a.tokens) == 300 and a.bos == 1 and a.add_bos
    assert compare(a, b) == []
    problems = compare(a, c)
    assert any("vocabulary type llama (target) vs gpt2 (draft)" in p for p in problems)
    assert any("BOS token 1 (target) vs 2 (draft)" in p for p in problems)
    assert any(p.startswith("token 7 is 't7'") for p in problems)
    assert read_meta(tmp_path / "missing.gguf") is None
    (tmp_path / "junk.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 20)
    assert read_meta(tmp_path / "junk.gguf") is None  # bounded: a huge count is refused, not looped over
    import os
    import threading

    fifo = tmp_path / "fifo.gguf"
    os.mkfifo(fifo)  # no writer: a plain open() would block for ever
    done: list = []
    reader = threading.Thread(target=lambda: done.append(read_meta(fifo)), daemon=True)
    reader.start()
    reader.join(5)
    assert done == [None]
    assert read_meta(tmp_path) is None and read_meta("/proc/self/status") is None


def test_cli_warns_about_an_incompatible_draft(cli, tmp_path):
    target = write_gguf(tmp_path / "t.gguf", "llama", dense_tensors(2), n_layer=2, extra=_tok)
    draft = write_gguf(tmp_path / "d.gguf", "llama", dense_tensors(2), n_layer=2,
                       extra=lambda w: _tok(w, "gpt2"))
    r = cli("advise", "--model", str(target), "--draft", str(draft), "--snapshot",
            str(SNAPSHOTS / "desktop-9950x3d-rtx5090"), "--format", "json")
    data = json.loads(r.stdout)
    assert any("llama-server refuses to start with it" in w and "vocabulary type" in w for w in data["warnings"])
    assert {f["name"]: f["value"] for f in data["flags"]}["--spec-type"] == "draft-simple"


def test_context_above_training_is_clamped_unless_the_gguf_declares_rope_scaling(cli, tmp_path):
    plain = write_gguf(tmp_path / "p.gguf", "llama", dense_tensors(2), n_layer=2)
    yarn = write_gguf(tmp_path / "y.gguf", "llama", dense_tensors(2), n_layer=2,
                      extra=lambda w: (w.add_rope_scaling_type(__import__("gguf").RopeScalingType.YARN),
                                       w.add_rope_scaling_factor(4.0),
                                       w.add_rope_scaling_orig_ctx_len(1024)))
    snap = str(SNAPSHOTS / "desktop-9950x3d-rtx5090")
    clamped = json.loads(cli("advise", "--model", str(plain), "--ctx", "8192", "--snapshot", snap, "--format",
                             "json").stdout)
    assert clamped["ctx_per_slot"] == 4096 and any("clamped to 4096" in w for w in clamped["warnings"])
    kept = json.loads(cli("advise", "--model", str(yarn), "--ctx", "8192", "--snapshot", snap, "--format",
                          "json").stdout)
    assert kept["ctx_per_slot"] == 8192 and any("RoPE scaling (yarn x4 from 1024)" in w for w in kept["warnings"])


def test_router_unit_lifts_memlock_for_its_models_and_runs_unprivileged():
    from tunehost.formats.systemd import render_systemd

    rp = _router(["qwen", "llama"], [MODELS["qwen30b"](), MODELS["llama8b"]()], HOSTS["12700f-3060"], 2)
    unit = render_systemd(rp.launch("/usr/bin/llama-server", "/etc/llama.cpp/models.ini"))
    assert "ExecStart=/usr/bin/llama-server --models-preset /etc/llama.cpp/models.ini --models-max 2" in unit
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    assert "LimitMEMLOCK=infinity" in unit and "DynamicUser=yes" in unit and " -m " not in exec_start


def test_router_ollama_carries_shared_flags_to_every_modelfile_and_the_loaded_models():
    from tunehost.formats.ollama import render_ollama

    rp = _router(["qwen", "llama"], [MODELS["qwen30b"](), MODELS["llama8b"]()], HOSTS["12700f-3060"], 2)
    out = render_ollama(rp.launch())
    assert "Environment=OLLAMA_MAX_LOADED_MODELS=2" in out and "Environment=OLLAMA_KV_CACHE_TYPE=q8_0" in out
    assert out.count("PARAMETER num_thread 8") == 2 and out.count("FROM /models/") == 2


def test_router_on_unified_memory_checks_the_shared_pool():
    qwen = MODELS["qwen30b"]()
    rp = _router(["a", "b", "c", "d", "e", "f", "g"], [qwen] * 7, HOSTS["strix-halo"], 0)
    assert not rp.fits and any("unified memory" in w for w in rp.warnings)
    assert _router(["a", "b"], [qwen] * 2, HOSTS["strix-halo"], 2).fits


def test_single_model_json_carries_the_launch_configuration(cli, tmp_path):
    from tunehost.launch import LaunchConfig

    a = write_gguf(tmp_path / "a.gguf", "llama", dense_tensors(2), n_layer=2)
    data = json.loads(cli("advise", "--model", str(a), "--snapshot", str(SNAPSHOTS / "desktop-12700f-rtx3060"),
                          "--format", "json").stdout)
    launch = LaunchConfig.from_json(data["launch"])
    assert launch.argv() == data["argv"] and launch.model == data["model"]
