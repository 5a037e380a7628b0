"""tune --objective tokens-per-joule (issue 34): the race scores each arm's own llama-bench call by the tokens it
generated per joule the (simulated) CPU package used over that call, with the same paired intervals, the same
discarding of disturbed rounds and the same journal as the speed objectives. The simulated host (tests/tune/busy.py)
gets an energy counter: a package that draws ``base + per_thread * threads + per_thread * load`` watts while a call
generates its tokens, and its idle base over the call's model load."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from tests.tune.busy import LoadedBench, one_core
from tests.tune.test_tune_cli import boundary, model  # noqa: F401 (fixtures)
from tests.tune.test_race import MemoryJournal, cand, threads_knob
from tunehost.bench.energy import Counter, EnergyReading
from tunehost.bench.llama_bench import BenchResult
from tunehost.bench.watch import CallWatcher, HostWatcher
from tunehost.errors import TunehostError
from tunehost.tune.race import ENERGY_OBJECTIVE, Measurer, TuneSettings, score, tune

PLAN = cand("plan", t="2", ub="512")
ENERGY = TuneSettings(model="m.gguf", n_gen=16, reps=3, budget_s=600.0, objective=ENERGY_OBJECTIVE)
SPEED = TuneSettings(model="m.gguf", n_gen=16, reps=3, budget_s=600.0, objective="tg")


class PoweredBench(LoadedBench):
    """LoadedBench with a RAPL-like package counter: each call adds its energy, computed from the throughput it
    reports (a slower repetition takes longer, so it costs more joules at the same power)."""

    def __init__(self, *args, base_w: float = 20.0, per_thread_w: float = 5.0, counter: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.base_w, self.per_thread_w, self.counter = base_w, per_thread_w, counter
        self.joules = 1000.0

    def __call__(self, args: Sequence[str]) -> list[BenchResult]:
        began = self.now
        out = super().__call__(args)
        load = self.busy_cpu_s_at(began)
        self.joules += self.base_w * 1.0  # the model load, at idle power
        threads = args[args.index("-t") + 1] if "-t" in args else str(self.cpus)
        for value, result in zip(threads.split(","), out):  # a speed race groups values
            watts = self.base_w + self.per_thread_w * (int(value) + load)
            self.joules += sum(result.n_gen / ts * watts for ts in result.samples_ts)
        return out

    def read_energy(self) -> EnergyReading:
        counters = (Counter("cpu", "intel-rapl:0 package-0", self.joules),) if self.counter else ()
        return EnergyReading(self.now, counters, {} if self.counter else {"cpu": "energy_uj root only"})

    def watch(self) -> CallWatcher:
        return CallWatcher(HostWatcher(None, cpu_count=self.cpus, read=self.reading, gpu=False,  # type: ignore[arg-type]
                                       clock=self.clock, sleep=self.advance, energy=self))

    def read(self) -> EnergyReading:  # the meter's interface (tunehost.bench.energy.EnergyMeter.read)
        return self.read_energy()


def race(bench: PoweredBench, settings: TuneSettings, journal=None, watch=True):
    measurer = Measurer(bench, journal, clock=bench.clock, watch=bench.watch() if watch else None)
    return tune(PLAN, [threads_knob(("1",))], measurer, settings)


def test_score_is_tokens_per_joule_of_the_arms_own_run():
    results = [BenchResult(test="tg16", n_prompt=0, n_gen=16, n_depth=0, avg_ts=10.0, stddev_ts=0.0,
                           samples_ts=(10.0, 10.0, 10.0))]
    assert score(results, ENERGY_OBJECTIVE, {"wall_s": 5.0, "cpu_j": 12.0}) == pytest.approx(48 / 12.0)
    assert score(results, ENERGY_OBJECTIVE, {"wall_s": 5.0, "cpu_j": None, "missing": ["x"]}) is None
    assert score(results, ENERGY_OBJECTIVE, None) is None
    assert score(results, "tg") == pytest.approx(10.0)


@pytest.mark.parametrize("seed", range(3))
def test_the_more_efficient_configuration_wins_tokens_per_joule_while_the_faster_wins_tg(seed):
    # 5 W idle + 25 W per busy core: -t 1 makes 0.64 of -t 2's tokens/s at 30 W against 55 W: 17 % more tokens/J
    speed = race(PoweredBench(seed=seed, base_w=5.0, per_thread_w=25.0), SPEED)
    assert speed.winner == PLAN
    bench = PoweredBench(seed=seed, base_w=5.0, per_thread_w=25.0)
    energy = race(bench, ENERGY)
    assert energy.winner.label == "-t 1" and energy.improved
    c = energy.confirmation
    assert c is not None and c.low > 1.02 and 1.05 < c.ratio < 1.35   # the true ratio is 1.17 (+ the idle load)
    # each arm ran alone (the energy is read per call), generation only
    assert all("," not in " ".join(a) for a in bench.invocations)
    assert all(a[a.index("-p") + 1] == "0" for a in bench.invocations)


@pytest.mark.parametrize("seed", range(3))
def test_a_load_mid_race_never_crowns_a_winner_from_disturbed_rounds(seed):
    # on the quiet host -t 2 is the more efficient (20 W idle + 5 W per core); under a held core -t 2 is
    # oversubscribed and -t 1 would look far better per joule: the disturbed rounds must never count
    bench = PoweredBench(lambda t: 1.0 if t > 20.0 else 0.0, seed=seed)
    outcome = race(bench, ENERGY)
    assert outcome.winner.label != "-t 1"
    assert outcome.discarded_rounds >= ENERGY.busy_streak
    assert all(not m.counted for m in outcome.marks if m.disturbed)
    assert outcome.stopped is not None


def test_a_held_core_throughout_measures_nothing():
    outcome = race(PoweredBench(one_core, seed=1), ENERGY)
    assert outcome.winner == PLAN and not outcome.improved and outcome.stopped is not None


def test_no_energy_figure_stops_the_race_with_the_reason():
    with pytest.raises(TunehostError, match="tokens-per-joule.*no energy figure.*root only"):
        race(PoweredBench(seed=0, counter=False), ENERGY)
    with pytest.raises(TunehostError, match="no energy reading"):
        race(PoweredBench(seed=0), ENERGY, watch=False)


def test_the_journal_keeps_each_calls_energy_and_a_replay_decides_the_same():
    journal = MemoryJournal()
    bench = PoweredBench(seed=2, base_w=5.0, per_thread_w=25.0)
    first = race(bench, ENERGY, journal)
    steps = [o for _, _, o in journal.rows.values() if isinstance(o, dict) and "results" in o]
    assert steps and all(o["watch"]["energy"]["cpu_j"] > 0 for o in steps)
    replay_bench = PoweredBench(seed=2, base_w=5.0, per_thread_w=25.0)
    again = race(replay_bench, ENERGY, journal)
    assert not replay_bench.invocations  # everything replayed from the journal, energy included
    assert again.winner == first.winner and again.confirmation == first.confirmation


# ---------------------------------------------------------------- through the CLI


def test_tune_refuses_tokens_per_joule_without_an_energy_counter_before_measuring(cli, model, boundary,  # noqa: F811
                                                                                  monkeypatch):
    from tunehost.ops import tune as tune_op

    monkeypatch.setattr(tune_op, "energy_unavailable", lambda host: "CPU package: energy_uj readable by root only")
    result = cli("tune", "--model", str(model), "--objective", "tokens-per-joule")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1, result.output
    assert "needs an energy counter" in result.stderr and "root only" in result.stderr
    assert boundary["fake"].invocations == []
    assert json.loads(cli("history", "--json").stdout)["runs"] == []


def test_tune_tokens_per_joule_through_the_cli_names_the_objective_and_stores_it(cli, model, boundary,  # noqa: F811
                                                                                 monkeypatch):
    from tunehost.ops import tune as tune_op

    bench = PoweredBench(cpus=4, threads_speed={1: 0.4, 2: 0.7, 3: 0.9, 4: 1.0}, seed=4)
    boundary["fake"] = bench
    monkeypatch.setattr(tune_op, "energy_unavailable", lambda host: None)
    monkeypatch.setattr(tune_op, "race_watch", lambda host: bench.watch())
    result = cli("tune", "--model", str(model), "--objective", "tokens-per-joule", "--budget", "20m", "-n", "16")
    assert result.exit_code == 0, result.output
    assert "tokens per joule" in result.stdout or "the most efficient" in result.stdout
    assert bench.invocations and all(a[a.index("-p") + 1] == "0" for a in bench.invocations)
    (run,) = json.loads(cli("history", "--json").stdout)["runs"]
    assert run["summary"]["settings"]["objective"] == "tokens-per-joule" and run["summary"]["settings"]["n_prompt"] == 0
    assert "tokens-per-joule" in cli("history").stdout and "tokens/J" in cli("history").stdout
