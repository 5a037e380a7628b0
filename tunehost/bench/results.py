"""Benchmark results: the saved JSON schema, before/after comparisons, and importing results a user already has.

A :class:`SavedResult` is what ``tunehost bench --save`` writes and ``--json`` prints (schema
``tunehost-bench/1``, documented in docs/bench.md). It says where every number came from: the exact llama-bench
command lines, the build, the model's identity, the host (CPU brand, the doctor's verdict), what happened on the
host during the run, and every repetition's tokens/s.

- :func:`compare_configs` (pure): candidate against baseline (each a :class:`Side`), one row per test (pp, tg),
  with the interval over rounds and the verdict of :mod:`tunehost.bench.stats`;
- :func:`compare_saved` (pure): a result measured before a host change against one measured after it;
- :func:`save` / :func:`load`: the JSON file;
- :func:`import_results`: llama-bench output in any form (Markdown, CSV, JSON, JSONL) as a SavedResult.
"""

from __future__ import annotations

import datetime
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunehost import __version__
from tunehost.bench.llama_bench import BenchResult
from tunehost.bench.watch import WatchReport
from tunehost.bounds import json_text
from tunehost.errors import TunehostError

SCHEMA = "tunehost-bench/1"
DISTURBED = "disturbed"
NOT_COMPARABLE = "n/a"
# what a comparison row's two t/s figures are (TestComparison.level)
ROUNDS_LEVEL = "rounds"  # geometric mean over rounds of each round's median: their ratio is the change judged
SAMPLES_LEVEL = "samples"  # median of all samples (llama-bench's mean without samples): no interval behind them
# BenchResult.flags that never describe a configuration (they differ run to run or are outputs)
_VOLATILE_PARAMS = frozenset({
    "test_time", "avg_ns", "stddev_ns", "samples_ns", "cpu_info", "gpu_info", "model_filename", "build_commit",
    "build_number", "backends", "model_type", "model_size", "model_n_params", "t/s",
})


@dataclass(frozen=True)
class TestSamples:
    """One llama-bench test (pp512, tg128, ...) of one configuration: every counted repetition's tokens/s."""

    __test__ = False  # not a pytest class despite its name

    test: str
    n_prompt: int
    n_gen: int
    n_depth: int = 0
    samples_ts: tuple[float, ...] = ()
    avg_ts: float | None = None  # imported Markdown/CSV rows carry only llama-bench's mean ± stddev
    stddev_ts: float | None = None

    @property
    def kind(self) -> str:
        if self.n_gen == 0:
            return "pp"
        return "tg" if self.n_prompt == 0 else "pp+tg"

    @property
    def centre(self) -> float:
        """The median of the samples (llama-bench's mean when there are none)."""
        if self.samples_ts:
            from tunehost.bench.stats import median

            return median(self.samples_ts)
        return float(self.avg_ts or 0.0)

    @property
    def spread(self) -> float | None:
        """Relative spread: MAD / median of the samples (stddev / mean without samples)."""
        from tunehost.bounds import number

        if len(self.samples_ts) >= 2:
            from tunehost.bench.stats import summarize

            value = summarize(self.samples_ts).relative_mad
        elif self.avg_ts and self.stddev_ts is not None:
            value = self.stddev_ts / self.avg_ts
        else:
            return None
        return number(value)  # negative t/s or a NaN stddev give no spread at all, never "±-33.3 %"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"test": self.test, "kind": self.kind, "n_prompt": self.n_prompt, "n_gen": self.n_gen,
                                "n_depth": self.n_depth, "n": len(self.samples_ts),
                                "median_ts": round(self.centre, 4), "samples_ts": list(self.samples_ts)}
        if self.spread is not None:
            data["relative_spread"] = round(self.spread, 5)
        if self.avg_ts is not None:
            data["avg_ts"] = self.avg_ts
            data["stddev_ts"] = self.stddev_ts
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TestSamples":
        return cls(test=str(data["test"]), n_prompt=_count(data["n_prompt"]), n_gen=_count(data["n_gen"]),
                   n_depth=_count(data.get("n_depth") or 0),
                   samples_ts=tuple(_finite(s) for s in data.get("samples_ts") or ()),
                   avg_ts=_float(data.get("avg_ts")), stddev_ts=_float(data.get("stddev_ts")))


@dataclass(frozen=True)
class ConfigResult:
    """One configuration (a set of llama-bench flags) and its tests."""

    name: str
    flags: tuple[str, ...]
    tests: tuple[TestSamples, ...]
    command: str | None = None  # the exact llama-bench command line of a counted run (measured results)
    params: Mapping[str, Any] = field(default_factory=dict, hash=False)  # llama-bench's own record of its settings

    def test(self, name: str) -> TestSamples | None:
        return next((t for t in self.tests if t.test == name), None)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "flags": list(self.flags), "command": self.command, "params": dict(self.params),
                "tests": [t.to_json() for t in self.tests]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ConfigResult":
        return cls(name=str(data["name"]), flags=tuple(str(f) for f in data.get("flags") or ()),
                   tests=tuple(TestSamples.from_json(t) for t in data.get("tests") or ()),
                   command=data.get("command"), params=dict(data.get("params") or {}))


@dataclass(frozen=True)
class Invocation:
    """One llama-bench run: which config, which round (0 = warm-up, not counted), when, how long, what it gave."""

    config: str
    round: int
    counted: bool
    started_s: float  # seconds since the measurement began
    duration_s: float
    argv: tuple[str, ...]
    samples: Mapping[str, tuple[float, ...]] = field(default_factory=dict, hash=False)  # test -> samples_ts
    energy: Mapping[str, Any] | None = field(default=None, hash=False)  # this run's tunehost.bench.energy.Energy
    tokens: int = 0  # tokens generated in its counted repetitions (n_gen x repetitions of each test)

    def to_json(self) -> dict[str, Any]:
        data = {"config": self.config, "round": self.round, "counted": self.counted,
                "started_s": round(self.started_s, 3), "duration_s": round(self.duration_s, 3),
                "argv": list(self.argv), "samples_ts": {k: list(v) for k, v in self.samples.items()}}
        if self.energy is not None:  # absent in results measured before energy was read (and then not written)
            data.update(energy=dict(self.energy), tokens=self.tokens)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Invocation":
        return cls(config=str(data["config"]), round=int(data["round"]), counted=bool(data["counted"]),
                   started_s=float(data.get("started_s") or 0.0), duration_s=float(data.get("duration_s") or 0.0),
                   argv=tuple(data.get("argv") or ()),
                   samples={k: tuple(_finite(s) for s in v) for k, v in (data.get("samples_ts") or {}).items()},
                   energy=dict(data["energy"]) if isinstance(data.get("energy"), Mapping) else None,
                   tokens=_count(data.get("tokens") or 0))


@dataclass(frozen=True)
class TestComparison:
    """One row of the before/after table: a test, both centres, the change and its interval, the verdict."""

    __test__ = False  # not a pytest class despite its name

    test: str
    kind: str
    baseline_ts: float
    candidate_ts: float
    change_percent: float
    low: float | None  # interval on candidate / baseline; None when there were no samples to compare
    high: float | None
    verdict: str  # "faster", "slower", "no clear difference", "disturbed" or "n/a"
    statistical_verdict: str | None  # what the numbers alone say (kept when the verdict is "disturbed")
    n_baseline: int = 0
    n_candidate: int = 0
    note: str | None = None
    rounds: int = 0  # observations behind the interval (paired rounds; unpaired: the smaller side's rounds)
    effective_samples: float | None = None  # what the pooled repetitions are worth as independent samples
    method: str | None = None  # how the interval was formed (stats.PAIRED / stats.UNPAIRED)
    level: str | None = None  # what baseline_ts/candidate_ts are: ROUNDS_LEVEL, SAMPLES_LEVEL; None: older results

    @property
    def ratio(self) -> float | None:
        """candidate_ts / baseline_ts (None without a baseline)."""
        return self.candidate_ts / self.baseline_ts if self.baseline_ts > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {"test": self.test, "kind": self.kind, "level": self.level, "baseline_ts": round(self.baseline_ts, 4),
                "candidate_ts": round(self.candidate_ts, 4), "change_percent": round(self.change_percent, 3),
                "ratio_low": _round(self.low), "ratio_high": _round(self.high), "verdict": self.verdict,
                "statistical_verdict": self.statistical_verdict, "n_baseline": self.n_baseline,
                "n_candidate": self.n_candidate, "note": self.note, "rounds": self.rounds,
                "effective_samples": self.effective_samples, "method": self.method}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TestComparison":
        return cls(test=str(data["test"]), kind=str(data["kind"]), baseline_ts=float(data["baseline_ts"]),
                   candidate_ts=float(data["candidate_ts"]), change_percent=float(data["change_percent"]),
                   low=_float(data.get("ratio_low")), high=_float(data.get("ratio_high")),
                   verdict=str(data["verdict"]), statistical_verdict=data.get("statistical_verdict"),
                   n_baseline=int(data.get("n_baseline") or 0), n_candidate=int(data.get("n_candidate") or 0),
                   note=data.get("note"), rounds=int(data.get("rounds") or 0),
                   effective_samples=_float(data.get("effective_samples")), method=data.get("method"),
                   level=data.get("level") if data.get("level") in (ROUNDS_LEVEL, SAMPLES_LEVEL) else None)


@dataclass(frozen=True)
class Comparison:
    """Candidate against baseline (or after against before): one row per test, and how far to trust it."""

    baseline: str  # labels: "baseline" / "candidate", or "before (file)" / "after (file)"
    candidate: str
    rows: tuple[TestComparison, ...]
    interleaved: bool  # measured A B B A ... in one session: drift hits both sides
    confidence: float
    threshold: float
    notes: tuple[str, ...] = ()

    @property
    def disturbed(self) -> bool:
        return any(r.verdict == DISTURBED for r in self.rows)

    def row(self, kind: str) -> TestComparison | None:
        return next((r for r in self.rows if r.kind == kind), None)

    def to_json(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "candidate": self.candidate, "interleaved": self.interleaved,
                "confidence": self.confidence, "threshold": self.threshold, "rows": [r.to_json() for r in self.rows],
                "notes": list(self.notes)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Comparison":
        return cls(baseline=str(data["baseline"]), candidate=str(data["candidate"]),
                   rows=tuple(TestComparison.from_json(r) for r in data.get("rows") or ()),
                   interleaved=bool(data.get("interleaved")), confidence=float(data.get("confidence") or 0.95),
                   threshold=float(data.get("threshold") or 0.02), notes=tuple(data.get("notes") or ()))

    def __str__(self) -> str:
        parts = [f"{r.test} {r.change_percent:+.1f} % ({r.verdict})" for r in self.rows]
        return f"{self.candidate} vs {self.baseline}: " + ", ".join(parts)


@dataclass(frozen=True)
class SavedResult:
    """A benchmark result with everything needed to trust it later. ``to_json()`` is the saved file."""

    source: str  # "measured" or "imported"
    configs: tuple[ConfigResult, ...]
    model: Mapping[str, Any] = field(default_factory=dict, hash=False)
    llama_bench: Mapping[str, Any] = field(default_factory=dict, hash=False)
    settings: Mapping[str, Any] = field(default_factory=dict, hash=False)
    host: Mapping[str, Any] = field(default_factory=dict, hash=False)
    comparison: Comparison | None = None
    invocations: tuple[Invocation, ...] = ()
    watch: WatchReport | None = None
    ceiling: Mapping[str, Any] | None = field(default=None, hash=False)
    label: str | None = None
    created: str = ""
    round_watch: tuple[WatchReport, ...] = ()  # one report per counted round (the store keeps them per round)
    tunehost: str = __version__
    notes: tuple[str, ...] = ()
    energy: Mapping[str, Any] | None = field(default=None, hash=False)  # config -> energy_per_config's summary

    def config(self, name: str | None = None) -> ConfigResult:
        """The named config; without a name the last one (the candidate when there is one)."""
        if name is None:
            return self.configs[-1]
        for config in self.configs:
            if config.name == name:
                return config
        raise TunehostError(f"the result has no configuration named {name!r} ({', '.join(c.name for c in self.configs)})")

    @property
    def disturbed(self) -> bool:
        return self.watch is not None and self.watch.disturbed

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "tunehost": self.tunehost, "created": self.created, "label": self.label,
            "source": self.source, "model": dict(self.model), "llama_bench": dict(self.llama_bench),
            "settings": dict(self.settings), "host": dict(self.host),
            "configs": [c.to_json() for c in self.configs],
            "comparison": self.comparison.to_json() if self.comparison else None,
            "watch": self.watch.to_json() if self.watch else None,
            "round_watch": [w.to_json() for w in self.round_watch],
            "ceiling": dict(self.ceiling) if self.ceiling else None,
            "invocations": [i.to_json() for i in self.invocations],
            "notes": list(self.notes),
            **({"energy": dict(self.energy)} if self.energy is not None else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "the result") -> "SavedResult":
        if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
            found = data.get("schema") if isinstance(data, Mapping) else type(data).__name__
            raise TunehostError(f"{where} is not a tunehost bench result (schema {found!r}, expected {SCHEMA!r})")
        try:
            configs = tuple(ConfigResult.from_json(c) for c in data["configs"])
            if not configs:
                raise ValueError("it holds no configuration")
            return cls(
                source=str(data.get("source") or "measured"),
                configs=configs,
                model=dict(data.get("model") or {}), llama_bench=dict(data.get("llama_bench") or {}),
                settings=dict(data.get("settings") or {}), host=dict(data.get("host") or {}),
                comparison=Comparison.from_json(data["comparison"]) if data.get("comparison") else None,
                invocations=tuple(Invocation.from_json(i) for i in data.get("invocations") or ()),
                watch=WatchReport.from_json(data["watch"]) if data.get("watch") else None,
                round_watch=tuple(WatchReport.from_json(w) for w in data.get("round_watch") or ()
                                  if isinstance(w, Mapping)),
                ceiling=dict(data["ceiling"]) if data.get("ceiling") else None,
                label=data.get("label"), created=str(data.get("created") or ""),
                tunehost=str(data.get("tunehost") or ""), notes=tuple(data.get("notes") or ()),
                energy=dict(data["energy"]) if isinstance(data.get("energy"), Mapping) else None,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise TunehostError(f"{where} is a damaged tunehost bench result: {exc.__class__.__name__}: "
                                f"{str(exc)[:200]}") from None

    def __str__(self) -> str:
        """One line a person can read: "pp512 123.4 t/s ±1.2 %, tg128 45.6 t/s ±0.8 % (median of 9)"."""
        config = self.config()
        parts = []
        for t in config.tests:
            spread = f" ±{t.spread * 100:.1f} %" if t.spread is not None else ""
            parts.append(f"{t.test} {t.centre:.1f} t/s{spread}")
        count = max((len(t.samples_ts) for t in config.tests), default=0)
        tail = f" (median of {count}{', DISTURBED' if self.disturbed else ''})" if count else ""
        return ", ".join(parts) + tail


def energy_per_config(invocations: Iterable[Invocation], configs: Sequence[str],
                      left_out: Iterable[int] = ()) -> dict[str, Any] | None:
    """Each configuration's joules per generated token over its counted runs, the rounds ``left_out`` (disturbed)
    excepted: the energy of those llama-bench runs (whole runs: model load, llama-bench's own one-token warm-up
    and any -p prompt test included) divided by the tokens their repetitions generated. Says which parts were
    measured and why the others were not; None when no run carries an energy reading (energy not read)."""
    from tunehost.bench.energy import Energy, add_up, per_token

    skip = set(left_out)
    every = [i for i in invocations if i.counted]
    if not any(i.energy is not None for i in every):
        return None
    runs = [i for i in every if i.round not in skip]
    out: dict[str, Any] = {}
    for name in configs:
        every_read = [Energy.from_json(i.energy) for i in every if i.config == name and i.energy is not None]
        nothing = bool(every_read) and all(e is None or e.joules is None for e in every_read)
        mine = [i for i in runs if i.config == name]
        read = [Energy.from_json(i.energy) for i in mine]
        total = add_up([e for e in read if e is not None]) if read and all(e is not None for e in read) else None
        tokens = sum(i.tokens for i in mine)
        jpt = per_token(total, tokens)
        why = None
        if nothing:  # no run measured anything: that is the reason, disturbed rounds or not
            why = "; ".join(dict.fromkeys(m for e in every_read if e is not None for m in e.missing)) \
                or "no energy reading"
        elif not mine:
            why = "every counted round was disturbed (left out, as in the paired estimate)"
        elif total is None or total.joules is None:
            why = "; ".join(total.missing) if total is not None and total.missing else "no energy reading"
        elif tokens <= 0:
            why = "no tokens generated (-n 0)"
        out[name] = {"joules_per_token": round(jpt, 5) if jpt is not None else None,
                     "tokens_per_joule": round(1 / jpt, 4) if jpt else None,
                     "watts": round(total.joules / total.wall_s, 2) if total is not None and total.joules is not None
                     and total.wall_s > 0 else None,
                     "joules": round(total.joules, 3) if total is not None and total.joules is not None else None,
                     "tokens": tokens, "runs": len(mine), "rounds_left_out": len(skip),
                     "measured": total.measured if total is not None else "none",
                     "parts": list(total.parts) if total is not None else [],
                     "missing": list(total.missing) if total is not None else [], "why_none": why}
    return out


def now_utc() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- comparing


@dataclass(frozen=True)
class Side:
    """One side of :func:`compare_configs`: a configuration's result, the name the comparison shows for it
    (default: the configuration's), and its rounds (test -> one tuple of repetitions per llama-bench invocation,
    :func:`rounds_of`; None: imported output, whose samples count as one round)."""

    config: ConfigResult
    label: str | None = None
    rounds: Mapping[str, Sequence[Sequence[float]]] | None = field(default=None, hash=False)

    @property
    def name(self) -> str:
        return self.label or self.config.name


def compare_configs(baseline: Side, candidate: Side, *, interleaved: bool, disturbed: bool = False,
                    notes: Sequence[str] = ()) -> Comparison:
    """One row per test both configurations ran. The verdict is "disturbed" whenever the host was disturbed
    (the statistics' own verdict is kept beside it), "n/a" without per-repetition samples.

    A side's rounds (:attr:`Side.rounds`) make the round the unit: paired round by round when ``interleaved``,
    unpaired otherwise. Without them (imported output) a side's samples count as ONE round: repetitions of one
    run cannot show run-to-run noise, so there is no verdict."""
    from tunehost.bench import stats

    rows = []
    for base in baseline.config.tests:
        cand = candidate.config.test(base.test)
        if cand is None:
            continue
        row_note = None
        result = None
        if len(base.samples_ts) >= 1 and len(cand.samples_ts) >= 1 and base.centre > 0:
            base_runs = _rounds_or_one(baseline.rounds, base)
            cand_runs = _rounds_or_one(candidate.rounds, cand)
            paired = interleaved and len(base_runs) == len(cand_runs)
            try:
                result = stats.compare_rounds(base_runs, cand_runs, paired=paired)
            except ValueError:  # a round with no positive, finite throughput (a damaged or hand-edited file)
                result = None
        base_ts, cand_ts, level = base.centre, cand.centre, SAMPLES_LEVEL
        if result is not None:
            low, high, statistical = result.low, result.high, result.verdict
            change = result.change_percent
            # the columns the change is the ratio of (exactly: both are geometric means over the same rounds)
            base_ts, cand_ts, level = _level(base_runs), _level(cand_runs), ROUNDS_LEVEL
            if result.too_few_rounds:
                row_note = (f"{result.rounds} round{'s' if result.rounds != 1 else ''}, fewer than "
                            f"{stats.MIN_ROUNDS}: no verdict (repetitions of one llama-bench run cannot show its "
                            "run-to-run noise)")
        else:
            low = high = None
            statistical = NOT_COMPARABLE
            change = (cand.centre / base.centre - 1.0) * 100.0 if base.centre else 0.0
            row_note = ("no per-repetition samples (Markdown/CSV output): the change cannot be judged against noise"
                        if not base.samples_ts or not cand.samples_ts else
                        "a run with no positive throughput: the change cannot be judged against noise")
        verdict = DISTURBED if disturbed and statistical != NOT_COMPARABLE else statistical
        rows.append(TestComparison(
            test=base.test, kind=base.kind, baseline_ts=base_ts, candidate_ts=cand_ts, change_percent=change,
            low=low, high=high, verdict=verdict, statistical_verdict=statistical,
            n_baseline=len(base.samples_ts), n_candidate=len(cand.samples_ts), note=row_note,
            rounds=result.rounds if result else 0, effective_samples=result.effective_samples if result else None,
            method=result.method if result else None, level=level,
        ))
    all_notes = list(notes)
    if not interleaved:
        all_notes.append("not interleaved: the two sides were measured at different times, so slow drift of the "
                         "host between them is not separated from the change")
    if not rows:
        raise TunehostError(f"{candidate.name} and {baseline.name} share no test "
                            f"({', '.join(t.test for t in baseline.config.tests)} vs "
                            f"{', '.join(t.test for t in candidate.config.tests)})")
    return Comparison(baseline=baseline.name, candidate=candidate.name, rows=tuple(rows), interleaved=interleaved,
                      confidence=stats.CONFIDENCE, threshold=stats.PRACTICAL_THRESHOLD, notes=tuple(all_notes))


def compare_saved(before: SavedResult, after: SavedResult, *, config: str | None = None) -> Comparison:
    """A result measured before a host change against one measured after it (``apply --bench``).

    Compares the named configuration of each (default: each result's last one, i.e. its candidate when it has
    one). Notes say what makes the two less comparable: another model file, llama-bench build, flags or CPU.
    A side that was disturbed makes every verdict "disturbed".
    """
    base = before.config(config) if config else before.config()
    cand = after.config(config) if config else after.config()
    notes = []
    if before.model.get("sha256_head") and after.model.get("sha256_head") \
            and before.model["sha256_head"] != after.model["sha256_head"]:
        notes.append(f"different model files: {before.model.get('name')} vs {after.model.get('name')}")
    if before.llama_bench.get("build_number") != after.llama_bench.get("build_number") \
            or before.llama_bench.get("build_commit") != after.llama_bench.get("build_commit"):
        notes.append(f"different llama-bench builds: {_build(before)} vs {_build(after)}")
    if base.flags != cand.flags:
        notes.append(f"different flags: {' '.join(base.flags) or '(defaults)'} vs {' '.join(cand.flags) or '(defaults)'}")
    if before.host.get("cpu_brand") != after.host.get("cpu_brand"):
        notes.append(f"different CPUs: {before.host.get('cpu_brand')} vs {after.host.get('cpu_brand')}")
    for side, result in (("before", before), ("after", after)):
        if result.disturbed and result.watch is not None:
            notes.append(f"{side} was disturbed: {'; '.join(result.watch.reasons)}")
    return compare_configs(
        Side(base, f"before{_label(before, 'before')}", rounds_of(before.invocations, base.name) or None),
        Side(cand, f"after{_label(after, 'after')}", rounds_of(after.invocations, cand.name) or None),
        interleaved=False, disturbed=before.disturbed or after.disturbed, notes=notes,
    )


def _label(result: SavedResult, side: str) -> str:
    return f" ({result.label})" if result.label and result.label != side else ""


def _build(result: SavedResult) -> str:
    return f"{result.llama_bench.get('build_commit')} ({result.llama_bench.get('build_number')})"


# ---------------------------------------------------------------- files


def save(result: SavedResult, path: str | os.PathLike[str]) -> Path:
    """Write the result as JSON (atomically: a crash never leaves half a file)."""
    return write_json(result.to_json(), path)


def write_json(document: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write a JSON document atomically (a temporary file beside it, then a rename)."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json_text(document, indent=2) + "\n")
        os.replace(tmp, target)
    except OSError as exc:
        raise TunehostError(f"cannot write {path}: {exc.strerror or exc}") from None
    return target


def load(path: str | os.PathLike[str]) -> SavedResult:
    """Read a saved result; TunehostError for a missing, unreadable, binary, oversized or foreign file."""
    from tunehost.bench.llama_bench import load_json, read_input

    text = read_input(path, "a saved tunehost bench result (--save FILE)", strict=True)
    return SavedResult.from_json(load_json(text, str(path)), str(path))


# ---------------------------------------------------------------- importing


def import_results(path: str | os.PathLike[str]) -> SavedResult:
    """llama-bench results a user already has (Markdown, CSV, JSON or JSONL output) as a SavedResult.

    Rows are grouped into configurations by the settings llama-bench recorded (threads, flash attention, ...);
    groups are named after what differs between them ("n_threads=4"), in the order they appear. A saved
    tunehost result is accepted too (read as is).
    """
    from tunehost.bench.llama_bench import load_json, parse_output, read_input

    text = read_input(path, "llama-bench output")
    if text.lstrip().startswith("{") and f'"{SCHEMA}"' in text[:4000]:
        return SavedResult.from_json(load_json(text, str(path)), str(path))
    try:
        parsed = parse_output(text)
    except TunehostError as exc:
        raise TunehostError(f"{path}: {exc}") from None
    return result_from_bench_results(parsed, source="imported", label=Path(path).name)


def result_from_bench_results(parsed: Sequence[BenchResult], *, source: str, label: str | None = None) -> SavedResult:
    groups: dict[tuple, list[BenchResult]] = {}
    for result in parsed:
        groups.setdefault(_config_key(result), []).append(result)
    differing = _differing_params(list(groups))
    configs = []
    names: set[str] = set()  # a set, not a scan of configs: a sweep of 100,000 rows stays linear
    for number, (key, rows) in enumerate(groups.items(), 1):
        params = dict(key)
        name = ", ".join(f"{n}={params.get(n)}" for n in differing) if differing else "imported"
        if name in names:
            name = f"{name} #{number}"
        names.add(name)
        tests = tuple(TestSamples(test=r.test, n_prompt=r.n_prompt, n_gen=r.n_gen, n_depth=r.n_depth,
                                  samples_ts=r.samples_ts, avg_ts=r.avg_ts, stddev_ts=r.stddev_ts) for r in rows)
        configs.append(ConfigResult(name=name, flags=(), tests=tests, params=params))
    first = parsed[0]
    comparison = None
    if len(configs) == 2:
        comparison = compare_configs(Side(configs[0]), Side(configs[1]), interleaved=False,
                                     notes=["imported: tunehost did not see how these runs were made"])
    return SavedResult(
        source=source, configs=tuple(configs), label=label, created=now_utc(), comparison=comparison,
        model={"name": os.path.basename(str(first.flags.get("model_filename") or "")) or None,
               "model_type": first.model_type, "size_bytes_in_memory": first.model_size, "n_params": first.n_params},
        llama_bench={"build_commit": first.build_commit, "build_number": first.build_number, "backend": first.backend},
        host={"cpu_brand": first.flags.get("cpu_info"), "gpu": first.flags.get("gpu_info")},
    )


def _differing_params(keys: Sequence[tuple]) -> list[str]:
    """The parameter names whose value is not the same in every configuration key (absent counts as a value).
    One pass over the keys: comparing every key with every other was quadratic (96 s of CPU on a 36 MB import)."""
    seen: dict[str, set[Any]] = {}
    count: dict[str, int] = {}
    for key in keys:
        for name, value in key:
            seen.setdefault(name, set()).add(value)
            count[name] = count.get(name, 0) + 1
    return sorted(name for name, values in seen.items() if len(values) > 1 or count[name] < len(keys))


def _config_key(result: BenchResult) -> tuple:
    params = {"n_threads": result.n_threads, "n_gpu_layers": result.n_gpu_layers, "backend": result.backend,
              "model_type": result.model_type}
    for name, value in result.flags.items():
        if name not in _VOLATILE_PARAMS and not isinstance(value, (list, dict)):
            params[name] = value
    return tuple(sorted(params.items(), key=lambda kv: kv[0]))


def config_from_invocations(name: str, flags: Sequence[str], invocations: Iterable[Invocation],
                            results: Mapping[str, BenchResult], command: str | None = None) -> ConfigResult:
    """A configuration's pooled samples from its counted invocations (test order as llama-bench printed it)."""
    counted = [i for i in invocations if i.config == name and i.counted]
    tests = []
    for test, first in results.items():
        samples = tuple(s for inv in counted for s in inv.samples.get(test, ()))
        tests.append(TestSamples(test=test, n_prompt=first.n_prompt, n_gen=first.n_gen, n_depth=first.n_depth,
                                 samples_ts=samples))
    params = {k: v for k, v in _config_key(next(iter(results.values()))) if k != "model_type"} if results else {}
    return ConfigResult(name=name, flags=tuple(flags), tests=tuple(tests), command=command, params=params)


def rounds_of(invocations: Iterable[Invocation], name: str) -> dict[str, list[tuple[float, ...]]]:
    """test -> the repetitions of each counted invocation of configuration ``name``, in round order."""
    by_test: dict[str, list[tuple[float, ...]]] = {}
    for inv in sorted((i for i in invocations if i.counted and i.config == name), key=lambda i: i.round):
        for test, samples in inv.samples.items():
            if samples:
                by_test.setdefault(test, []).append(tuple(samples))
    return by_test


def _level(runs: Sequence[Sequence[float]]) -> float:
    """A side's level as the interval sees it: the geometric mean over rounds of each round's median.
    The paired change is exp(mean of per-round log ratios) = level(candidate) / level(baseline), so the two
    columns and the change beside them always agree."""
    from tunehost.bench.stats import round_value

    return math.exp(math.fsum(math.log(round_value(r)) for r in runs) / len(runs))


def _rounds_or_one(rounds: Mapping[str, Sequence[Sequence[float]]] | None,
                   test: TestSamples) -> Sequence[Sequence[float]]:
    """The test's rounds when known, else all its samples as one round (nothing shows run-to-run noise)."""
    found = rounds.get(test.test) if rounds else None
    return found if found else [test.samples_ts]


def _float(value: Any) -> float | None:
    """A number of a saved result, None when absent or not a number; NaN/inf is damage (ValueError)."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number):
        raise ValueError(f"{value!r} is not a finite number")
    return number


def _finite(value: Any) -> float:
    from tunehost.bounds import require_tokens_per_s

    return require_tokens_per_s(value)


def _count(value: Any) -> int:
    from tunehost.bounds import require_token_count

    return require_token_count(value)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 5)


__all__ = [
    "SCHEMA", "TestSamples", "ConfigResult", "Invocation", "TestComparison", "Comparison", "SavedResult",
    "compare_configs", "compare_saved", "save", "load", "import_results", "result_from_bench_results",
    "config_from_invocations", "rounds_of",
]
