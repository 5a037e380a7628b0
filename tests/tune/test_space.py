"""tune's search space (tunehost.tune.space): which knobs are searched for which objective, and only values that
change what llama.cpp does."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.advise.conftest import dense_tensors, write_gguf
from tests.tune.test_tune_cli import HOST, SUPPORTED
from tunehost.advise.plan import AdviseOptions, plan
from tunehost.bench.runner import bench_flags
from tunehost.model import read_model
from tunehost.tune.race import Candidate
from tunehost.tune.space import NOT_FOR_TG, knobs


def _setup(tmp_path, objective: str, n_prompt: int = 512):
    path = str(write_gguf(tmp_path / "tiny.gguf", "llama", dense_tensors(2), n_layer=2))
    facts = read_model(path)
    made = plan(facts, HOST, AdviseOptions(model_path=path, ctx=512))
    plan_c = Candidate("advise's plan", made.launch(), bench_flags(made.launch(), SUPPORTED).flags)
    return {k.name: k for k in knobs(facts, HOST, made.path, SUPPORTED, objective, n_prompt)}, plan_c


def test_batch_knobs_are_not_searched_for_token_generation(tmp_path):
    stages, plan_c = _setup(tmp_path, "tg")
    assert stages["ubatch"].not_searched == NOT_FOR_TG and stages["batch"].not_searched == NOT_FOR_TG
    assert stages["threads"].not_searched is None and stages["threads"].variants(plan_c)


def test_batch_values_are_the_ones_that_change_prompt_processing(tmp_path):
    stages, plan_c = _setup(tmp_path, "pp", n_prompt=512)
    assert plan_c.launch.value("-b") == "2048" and plan_c.launch.value("-ub") == "512"
    # -b 2048 already takes a 512-token prompt in one batch: 512/1024/4096/8192 would run it the same way
    assert [c.label for c in stages["batch"].variants(plan_c)] == []
    # -ub above the prompt changes nothing either: 128 and 256 are the only other physical batches
    assert [c.label for c in stages["ubatch"].variants(plan_c)] == ["-ub 128", "-ub 256"]
    long_stages, plan_long = _setup(tmp_path, "balanced", n_prompt=8192)
    assert [c.label for c in long_stages["batch"].variants(plan_long)] == ["-b 512", "-b 1024", "-b 4096", "-b 8192"]
    assert [c.label for c in long_stages["ubatch"].variants(plan_long)] == ["-ub 128", "-ub 256", "-ub 1024"]
    small_batch = Candidate("b", plan_long.launch.with_flag("-b", "1024"),
                            bench_flags(plan_long.launch.with_flag("-b", "1024"), SUPPORTED).flags)
    # -ub at most -b
    assert all(int(c.launch.value("-ub")) <= 1024 for c in long_stages["ubatch"].variants(small_batch))
    assert all("-b" in c.args for c in long_stages["batch"].variants(plan_long))


def test_cpu_sets_on_a_hybrid_cpu_are_p_cores_one_per_core_all_and_none(tmp_path):
    from dataclasses import replace

    from tunehost.advise.host_view import HostView

    # 2 P-cores with SMT (0,1 / 2,3) and 4 E-cores (4..7), as an i7-12700-like layout in small
    hybrid = HostView(online_cpus=tuple(range(8)), cores=((0, 1), (2, 3), (4,), (5,), (6,), (7,)), pin_cpus=(0, 2),
                      performance_cores=2, threads=2, smt=True, hybrid=True, ram_total=16 << 30,
                      ram_available=12 << 30, memlock_unlimited=True, numa_nodes=1, efficiency_cpus=(4, 5, 6, 7))
    path = str(write_gguf(tmp_path / "tiny.gguf", "llama", dense_tensors(2), n_layer=2))
    facts = read_model(path)
    made = plan(facts, hybrid, AdviseOptions(model_path=path, ctx=512))
    plan_c = Candidate("advise's plan", made.launch(), bench_flags(made.launch(), SUPPORTED).flags)
    assert plan_c.launch.pin_cpus == (0, 2)
    stages = {k.name: k for k in knobs(facts, hybrid, made.path, SUPPORTED)}
    sets = {c.label: c.launch.pin_cpus for c in stages["cpu set"].variants(plan_c)}
    assert sets == {"one CPU per core": (0, 2, 4, 5, 6, 7), "all CPUs": tuple(range(8)), "no pinning": None}
    flat = replace(hybrid, cores=((0,), (1,)), online_cpus=(0, 1), pin_cpus=(0, 1), hybrid=False, efficiency_cpus=())
    made = plan(facts, flat, AdviseOptions(model_path=path, ctx=512))
    plan_c = Candidate("advise's plan", made.launch(), bench_flags(made.launch(), SUPPORTED).flags)
    stages = {k.name: k for k in knobs(facts, flat, made.path, SUPPORTED)}
    assert [c.label for c in stages["cpu set"].variants(plan_c)] == ["no pinning"]  # the plan already pins all


def _advised(model, host, objective: str = "tg", n_prompt: int = 512, **options):
    """advise's plan for `model` on `host` as tune's incumbent, and tune's stages around it (by knob name)."""
    made = plan(model, host, AdviseOptions(model_path="/models/m.gguf", **options))
    assert made.fits, made.warnings
    plan_c = Candidate("advise's plan", made.launch(), bench_flags(made.launch(), SUPPORTED).flags)
    stages = {k.name: k for k in knobs(model, host, made.path, SUPPORTED, objective, n_prompt)}
    return stages, plan_c, made.path


def _plans_advise_emits(tmp_path):
    """Plans advise makes: a CPU host (tg, and balanced with a long prompt), speculative decoding (f16 KV), a dense
    model split over a small GPU and a MoE model with experts in RAM."""
    from dataclasses import replace

    from tests.advise.test_plan import HOSTS, MODELS
    from tunehost.advise.host_view import GpuView

    tiny = read_model(str(write_gguf(tmp_path / "tiny.gguf", "llama", dense_tensors(2), n_layer=2)))
    small_gpu = replace(HOSTS["12700f-3060"], gpus=(GpuView(0, "NVIDIA GeForce RTX 3060", "nvidia", 6 << 30, 6 << 30),))
    return {
        "cpu, tg": _advised(tiny, HOST, ctx=512),
        "cpu, balanced 8192": _advised(tiny, HOST, "balanced", 8192, ctx=512),
        "cpu, mtp (f16 KV)": _advised(tiny, HOST, ctx=512, spec="mtp"),
        "split": _advised(MODELS["gemma12b"](), small_gpu, ram_bandwidth_gbps=50.0),
        "moe": _advised(MODELS["qwen30b"](), HOSTS["12700f-3060"]),
    }


def test_every_declared_knob_gives_a_challenger_for_some_plan_advise_emits(tmp_path):
    """A knob that can never produce a candidate other than the incumbent on a plan advise actually makes is dead
    (as --prio was: advise never emits it and the knob only removed it)."""
    from tunehost.tune.space import KNOBS

    plans = _plans_advise_emits(tmp_path)
    assert {path for _, _, path in plans.values()} == {"cpu", "split", "moe"}
    dead = []
    for spec in KNOBS:
        raced = {name: [c.label for c in stages[spec.name].variants(plan_c)]
                 for name, (stages, plan_c, _) in plans.items() if stages[spec.name].not_searched is None}
        if not any(labels for labels in raced.values()):
            dead.append(spec.name)
        for labels in raced.values():  # never the incumbent itself, never two twins
            assert "advise's plan" not in labels and len(labels) == len(set(labels))
    assert dead == [], f"declared knobs that never race on an advised plan: {dead}"


def test_priority_races_both_ways_from_advise_s_plan(tmp_path):
    from dataclasses import replace

    path = str(write_gguf(tmp_path / "tiny.gguf", "llama", dense_tensors(2), n_layer=2))
    facts = read_model(path)
    stages, plan_c, _ = _advised(facts, HOST, ctx=512)
    assert plan_c.launch.flag("--prio") is None and plan_c.launch.pin_cpus == (0, 1, 2)  # CPU 3 left free
    (raised,) = stages["priority"].variants(plan_c)
    assert raised.label == "--prio 2" and raised.launch.value("--prio") == "2" and raised.launch.nice == -10
    assert raised.args[raised.args.index("--prio") + 1] == "2"  # llama-bench spells it the same (llama-bench.cpp)
    (back,) = stages["priority"].variants(raised)
    assert back.label == "no --prio" and back.launch.flag("--prio") is None and back.launch.nice is None
    assert back.args == plan_c.args
    # real-time threads on every CPU could starve the system: not raced when the pinning leaves no CPU free
    everything = Candidate("all", replace(plan_c.launch, pin_cpus=(0, 1, 2, 3)),
                           bench_flags(replace(plan_c.launch, pin_cpus=(0, 1, 2, 3)), SUPPORTED).flags)
    assert stages["priority"].variants(everything) == []
    unpinned = Candidate("none", replace(plan_c.launch, pin_cpus=None),
                         bench_flags(replace(plan_c.launch, pin_cpus=None), SUPPORTED).flags)
    assert stages["priority"].variants(unpinned) == []
    # a llama-bench without --prio cannot express it
    no_prio = {k.name: k for k in knobs(facts, HOST, "cpu", SUPPORTED - {"--prio"})}
    assert no_prio["priority"].variants(plan_c) == []


def test_priority_is_not_raced_where_this_process_may_not_lower_its_nice_value(tmp_path):
    """llama-bench refuses to run with --prio 2 ("failed to set process priority", llama-bench.cpp) where the
    process cannot reach nice -10: without CAP_SYS_NICE and with RLIMIT_NICE below 30. No failed challenger then."""
    from dataclasses import replace

    path = str(write_gguf(tmp_path / "tiny.gguf", "llama", dense_tensors(2), n_layer=2))
    facts = read_model(path)
    for floor, raced in ((0, False), (-9, False), (-10, True), (-20, True), (None, True)):
        host = replace(HOST, nice_floor=floor)
        stages, plan_c, _ = _advised(facts, host, ctx=512)
        assert bool(stages["priority"].variants(plan_c)) is raced, floor


@pytest.mark.parametrize(("limits", "status", "floor"), [
    ("Max nice priority         0                    0                    \n", "CapEff:\t0000000000000000\n", 0),
    ("Max nice priority         30                   30                   \n", "CapEff:\t0000000000000000\n", -10),
    ("Max nice priority         25                   40                   \n", "CapEff:\t0000000000000000\n", -5),
    ("Max nice priority         0                    0                    \n", "CapEff:\t000001ffffffffff\n", -20),
    ("Max nice priority         unlimited            unlimited            \n", None, -20),
    ("Max nice priority         0                    0                    \n", "CapEff:\t0000000000800000\n", -20),
    (None, "CapEff:\t0000000000000000\n", 0),  # no CAP_SYS_NICE, the limit unread: the default 0 (nice 20 - 0)
    (None, None, None),  # neither file: unknown (the knob is tried)
    ("Max nice priority         x                    x                    \n", "CapEff:\tzz\n", None),
    ("Max nice priority         99999999999999999999 0                    \n", "CapEff:\t0\n", -20),  # clamped
    ("Max nice priority         -5                   -5                   \n", "CapEff:\t0\n", 0),
    ("Max nice priority\n", "CapEff:\n", None),  # cut short: unknown
])
def test_the_nice_floor_from_the_limits_and_the_capabilities(limits, status, floor):
    from tunehost.advise.host_view import parse_nice_floor

    assert parse_nice_floor(limits, status) == floor


def test_advise_s_note_on_prio_says_whether_tune_races_it_here(tmp_path):
    """One rule (tunehost.advise.host_view.why_no_prio) decides both the race and what advise promises of it."""
    from dataclasses import replace

    path = str(write_gguf(tmp_path / "tiny.gguf", "llama", dense_tensors(2), n_layer=2))
    facts = read_model(path)

    def prio_note(host):
        made = plan(facts, host, AdviseOptions(model_path="/models/m.gguf", ctx=512))
        return next(n for n in made.notes if n.startswith("no --prio"))

    assert prio_note(HOST).endswith("`tunehost tune` measures it on this host")
    assert prio_note(replace(HOST, nice_floor=0)).endswith(
        "tune does not race it here: this account may not lower its nice value to -10 (it needs CAP_SYS_NICE or a "
        "'Max nice priority' limit of 30)")
    everything = replace(HOST, pin_cpus=tuple(HOST.online_cpus))
    assert "the pinning uses every CPU" in prio_note(everything)


def test_the_nice_floor_of_this_process_from_its_own_proc_files():
    """The real files, as advise reads them through the host: a floor in nice's range, -20 exactly where this
    process holds CAP_SYS_NICE (root here, usually)."""
    from tunehost.advise.host_view import CAP_SYS_NICE, LIMITS, STATUS, parse_nice_floor

    limits, status = Path(LIMITS).read_text(), Path(STATUS).read_text()
    floor = parse_nice_floor(limits, status)
    assert floor is not None and -20 <= floor <= 19
    cap_eff = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("CapEff:"))
    if cap_eff >> CAP_SYS_NICE & 1:
        assert floor == -20


def test_kv_cache_is_not_raced_on_a_plan_that_drafts(tmp_path):
    """A drafting plan keeps f16 KV (q8_0 drove MTP acceptance near zero): llama-bench does not draft, so tune
    cannot see that cost and does not offer q8_0 there (issue 33); n-gram drafting keeps the race."""
    path = str(write_gguf(tmp_path / "tiny.gguf", "llama", dense_tensors(2), n_layer=2))
    facts = read_model(path)
    for spec, raced in (("mtp", False), ("ngram", True)):
        made = plan(facts, HOST, AdviseOptions(model_path=path, ctx=512, spec=spec))
        plan_c = Candidate("advise's plan", made.launch(), bench_flags(made.launch(), SUPPORTED).flags)
        stages = {k.name: k for k in knobs(facts, HOST, made.path, SUPPORTED, "tg", 512)}
        labels = [c.label for c in stages["kv cache"].variants(plan_c)]
        assert bool(labels) == raced, (spec, labels)
