"""Router mode remedies with their cost, and the inference servers beside the plan on its GPU (issue 33).

The concrete case: two ~8.5 GB models on a 12 GB RTX 3060 with the default --models-max 4. Both resident cannot
fit, so the plan shrinks the larger one; the remedies say what keeps each whole and at what TG."""

from __future__ import annotations

from dataclasses import replace

from tunehost.advise.host_view import GpuView
from tunehost.advise.plan import AdviseOptions, plan
from tunehost.advise.router import co_resident, co_resident_notes, plan_router
from tunehost.facts.processes import ProcessFacts, ProcessInfo

from .test_plan import HOSTS, MODELS, MiB, quantized, shape_fixture

GiB = 1024 * MiB


def _router(names, models, host, models_max, *, with_ctx=True, found=None):
    opts = [AdviseOptions(f"/models/{n}.gguf", ram_bandwidth_gbps=45.0) for n in names]
    return plan_router(names, lambda i, h: plan(models[i], h, opts[i]), host, models_max,
                       plan_ctx=(lambda i, h, c: plan(models[i], h, replace(opts[i], ctx=c))) if with_ctx else None,
                       co_resident_found=found)


def test_a_model_demoted_to_the_cpu_gets_models_max_1_with_its_speed_and_load_cost():
    host = HOSTS["12700f-3060"]
    gemma = quantized(shape_fixture("gemma-3-12b"), 8_400_000_000, tied=True)
    llama = quantized(shape_fixture("llama-3.1-8b"), 8_540_000_000)
    rp = _router(["gemma", "llama"], [gemma, llama], host, 4)
    assert rp.plans[1].path == "cpu"  # what the resident worst case did: llama to the CPU
    (_, low_now, high_now), = rp.now
    assert high_now < 6.5  # a few t/s from DDR4 (45 GB/s measured: at most 110 % of it, MEASURED_RAM_SHARE)
    mm = next(r for r in rp.remedies if r.kind == "models-max")
    assert [(f.name, f.value) for f in mm.flags] == [("--models-max", "1")]
    (name, low, high), = mm.speeds
    assert name == "llama" and low > 4 * high_now  # whole on the GPU: several times faster (28.7 against 6.1)
    assert "GiB read" in mm.cost and "GB/s" in mm.cost and "--server URL --model NAME" in mm.cost
    data = rp.to_json()
    assert data["remedies"][0]["kind"] == "models-max" and data["shrunk_speeds"][0]["model"] == "llama"
    assert not any(r.kind == "context" for r in rp.remedies)  # no context makes 2 x 8.5 GB fit 11.5 GB
    assert any(w.startswith("llama runs at 4-6 t/s in this plan (cpu)") and "--models-max 1 gives it" in w
               for w in rp.warnings)


def test_a_shorter_context_for_every_model_keeps_both_whole():
    host = HOSTS["12700f-3060"]
    rp = _router(["a", "b"], [MODELS["llama8b"](), MODELS["llama8b"]()], host, 2)
    assert rp.scaled is not None and rp.plans[0].path == "split"
    ctx = next(r for r in rp.remedies if r.kind == "context")
    assert {f.name for f in ctx.flags} == {"-c"} and all(int(f.value) < 32768 for f in ctx.flags)
    assert ctx.speeds[0][0] == "a" and ctx.speeds[0][1] > rp.now[0][2]  # whole again: faster than the split
    trial = [plan(m, host, AdviseOptions("/m.gguf", ctx=int(f.value))) for m, f in
             zip((MODELS["llama8b"](), MODELS["llama8b"]()), ctx.flags)]
    assert sum(p.budget.gpu_total for p in trial) <= rp.gpu_free  # the remedy holds: both whole fit
    assert not any(r.kind == "context" for r in _router(["a", "b"], [MODELS["llama8b"]()] * 2, host, 2,
                                                         with_ctx=False).remedies)


def test_a_smaller_quant_is_offered_where_it_is_enough():
    host = HOSTS["12700f-3060"]
    small = quantized(shape_fixture("llama-3.1-8b"), 3_000_000_000)
    big = quantized(shape_fixture("llama-3.1-8b"), 8_000_000_000)
    rp = _router(["small", "big"], [small, big], host, 2, with_ctx=False)
    q = next(r for r in rp.remedies if r.kind == "quant")
    assert q.text.startswith("a smaller quantization of big") and "quality" in q.cost
    whole = plan(big, host, AdviseOptions("/m.gguf", ram_bandwidth_gbps=45.0)).ceiling.band
    assert q.speeds[0][1] > whole.low  # fewer bytes per token: faster than the same model whole


def test_nothing_to_remedy_when_everything_fits_whole():
    rp = _router(["a"], [MODELS["llama8b"]()], HOSTS["12700f-3060"], 1)
    assert rp.fits and rp.remedies == () and rp.now == ()


def _proc(pid, name, ppid=1, command=None):
    return ProcessInfo(pid=pid, name=name, ppid=ppid, exe=f"/usr/bin/{name}", argv0=name, command=command)


def _host_with(clients):
    host = HOSTS["12700f-3060"]
    g = host.gpus[0]
    return replace(host, gpus=(replace(g, vram_clients=clients),))


def test_co_resident_servers_come_from_the_gpu_and_process_samples():
    procs = ProcessFacts(processes=(
        _proc(10, "llama-server"),                       # an embedding server holding VRAM
        _proc(20, "ollama", command="serve"),            # Ollama: its runner holds the VRAM
        _proc(21, "ollama", ppid=20, command="runner"),
        _proc(30, "llama-server"), _proc(31, "llama-server", ppid=30),  # a router and one of its models
        _proc(40, "gnome-shell"),
    ))
    host = _host_with(((10, "llama-server", 600), (21, "ollama", 3000), (31, "llama-server", 5000),
                       (40, "gnome-shell", 300)))
    found = co_resident(host, procs)
    assert [(c.kind, c.pid, c.vram_bytes // MiB, c.router_child) for c in found] == [
        ("llama-server", 10, 600, False), ("ollama", 21, 3000, False), ("llama-server", 31, 5000, True)]
    warnings, notes = co_resident_notes(found, 2 * GiB)
    assert not warnings
    assert any("llama-server (pid 10)" in n and "0.6 GiB are kept for it" in n for n in notes)
    assert any("--reserve-vram (2.0 GiB) is kept on top" in n for n in notes)
    assert any("router" in n and "run advise again" in n for n in notes)


def test_an_idle_ollama_is_warned_about_and_the_router_plan_says_what_it_kept():
    procs = ProcessFacts(processes=(_proc(20, "ollama", command="serve"),))
    found = co_resident(_host_with(()), procs)
    assert [(c.kind, c.idle) for c in found] == [("ollama", True)]
    rp = _router(["a"], [MODELS["llama8b"]()], HOSTS["12700f-3060"], 1, found=found)
    assert any("holds no VRAM now" in w and "--reserve-vram" in w for w in rp.warnings)
    assert rp.to_json()["co_resident"] == [{"kind": "ollama", "pid": 20, "gpu": None, "vram_bytes": None,
                                            "idle": True, "router_child": False}]
    assert co_resident(_host_with(((40, "gnome-shell", 300),)), ProcessFacts(processes=())) == ()
    assert co_resident(_host_with(((7, "ollama_llama_server", 100),)), None)[0].kind == "ollama"  # names only


def test_the_human_router_output_shows_the_remedies_within_80_columns():
    import io

    from rich.console import Console

    from tunehost.formats.human import render_router_human

    host = HOSTS["12700f-3060"]
    gemma = quantized(shape_fixture("gemma-3-12b"), 8_400_000_000, tied=True)
    llama = quantized(shape_fixture("llama-3.1-8b"), 8_540_000_000)
    rp = _router(["gemma", "llama"], [gemma, llama], host, 4)
    buf = io.StringIO()
    render_router_human(rp, rp.launch(), "models.ini", Console(file=buf, width=80, color_system=None))
    text = buf.getvalue()
    assert "instead of shrinking" in text and "--models-max 1" in text and "cost:" in text
    assert max(len(line) for line in text.splitlines()) <= 80
