"""tune's search space (tunehost.tune.space): which knobs are searched for which objective, and only values that
change what llama.cpp does."""

from __future__ import annotations

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
